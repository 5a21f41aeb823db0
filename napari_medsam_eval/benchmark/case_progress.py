"""Progress inside the running case of a benchmark run, and the cancel check that rides on it.

A case is one or more targets, each segmented by a propagation that reports
its slices (frames) through a :data:`~napari_medsam_eval.core.progress.SliceProgress`.
:func:`target_progress` turns those reports into :class:`CaseStep` values for a
run's ``steps`` callback (:data:`StepProgress`);
:func:`~napari_medsam_eval.core.progress.until_cancelled` adds the run's ``cancel`` event: the callback answers False once it is set, so the
propagation stops after its current slice (it raises or returns
``cancelled``, and :class:`~.evaluator.CaseEvaluator` raises
:class:`~napari_medsam_eval.core.errors.Cancelled`: the case gives no rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..core.progress import SliceProgress


@dataclass(frozen=True)
class CaseStep:
    """Where the running case is: target ``target_index`` of ``targets``, ``done`` of ``total`` slices.

    ``total`` 0: the target is starting (its slice count is not known yet).
    """

    case_id: str
    target: str
    target_index: int
    targets: int
    done: int
    total: int
    unit: str = "slice"

    @property
    def fraction(self) -> float:
        """How much of the case is done, 0..1 (targets counted equally)."""
        within = min(self.done, self.total) / self.total if self.total > 0 else 0.0
        return min(1.0, (self.target_index + within) / max(1, self.targets))

    def __str__(self) -> str:
        where = f"{self.unit} {self.done}/{self.total}" if self.total else "starting"
        target = self.target if self.targets == 1 else f"{self.target} ({self.target_index + 1}/{self.targets})"
        return f"{self.case_id}: {target}, {where}"


#: ``steps(CaseStep)`` called after every slice of the running case; returning False cancels the case
StepProgress = Callable[[CaseStep], "bool | None"]


def target_progress(steps: StepProgress, case_id: str, target: str, index: int, count: int,
                    unit: str = "slice") -> SliceProgress:
    """The slice callback of one target's propagation, reporting :class:`CaseStep` values to ``steps``."""
    def report(done: int, total: int) -> bool | None:
        return steps(CaseStep(str(case_id), str(target), index, count, int(done), int(total), unit))
    return report


__all__ = ["CaseStep", "StepProgress", "target_progress"]
