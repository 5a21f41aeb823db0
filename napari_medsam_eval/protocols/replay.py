"""The ``replay`` protocol: the prompts a person drew, read back from a prompt log.

``medsam-eval run DATASET --prompts LOG.csv --model M --out RUN`` (or ``--protocol replay
--protocol-options '{"log": "LOG.csv"}'``) runs the prompts of a prompt log
(:mod:`napari_medsam_eval.protocols.prompt_log`, written by the Segment widget) through any model, so
one clinician's prompts can be compared across models.

* A case's prompts are the log rows whose ``case_id`` is the case's id (else whose
  ``image_path`` has the file name of the case's ``image_path``).
* Per target label, the *last* replayable row of that case and label is used (a person
  who tried several times is replayed with their final prompt); ``correct`` rows (a
  correction added on top of a propagation) are not replayed.
* The prompt keeps the row's operation in ``info["operation"]``: a ``slice`` row is
  segmented on its slice alone, a ``propagate`` row is propagated (with the run's
  propagation rules), so the benchmark does what the user did and scores the same
  whole-case DSC the log's ``drawn_dsc`` holds.
* A case or target label the log has no prompt for gets a prompt with
  ``info["no_prompt"]`` (and ``info["empty"]``): the benchmark records that target as a **failed** row whose error
  says "no logged prompt ..." (never silently dropped, never scored).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ..core.prompt import Prompt
from .prompt_log import LoggedPrompt, read_log
from .base import PromptProtocol, PromptSource, carry_targets, resolve_source


@dataclass
class ReplayProtocol(PromptProtocol):
    """Prompts drawn by a person, replayed from the prompt log ``log`` (module doc).

    Source: this tool's own prompt log (docs/napari.md, "Prompt log"). ``seed`` is
    unused (nothing is drawn at random).
    """

    name: ClassVar[str] = "replay"

    log: str = ""
    _rows: list[LoggedPrompt] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.log = str(self.log or "")
        self._rows = read_log(self.log) if self.log else []  # a malformed log is refused now, naming its line

    def logged(self, case_id: str, image_path: str = "") -> dict[int, LoggedPrompt]:
        """The replayed row of each target label of a case (the last replayable one)."""
        name = Path(image_path).name if image_path else ""
        rows = [r for r in self._rows if r.case_id == case_id]
        if not rows and name:
            rows = [r for r in self._rows if r.image_path and Path(r.image_path).name == name]
        return {r.target_label: r for r in rows if r.replayable}

    def prompts(self, source, kind=None, target_labels=None, targets=None) -> list[Prompt]:  # type: ignore[override]
        image_path = str(getattr(source, "metadata", {}).get("image_path", "") or "")
        target = resolve_source(source, kind, target_labels, targets)
        return carry_targets(self._replay(target, image_path), targets, source)

    def _replay(self, target: PromptSource, image_path: str) -> list[Prompt]:
        rows = self.logged(target.case_id, image_path)
        prompts = []
        for value in target.labels:
            row = rows.get(value)
            if row is None:
                why = (f"no logged prompt for case {target.case_id!r} label {value} in {self.log} (logged labels "
                       f"of this case: {sorted(rows) or 'none'})" if self.log else
                       "no logged prompt: protocol 'replay' was given no prompt log (--prompts LOG.csv)")
                prompts.append(Prompt(target_label=value, protocol=self.name, info={"empty": True, "no_prompt": why}))
            else:
                prompts.append(row.prompt(self.log))
        return prompts

    def _prompts(self, target: PromptSource) -> list[Prompt]:
        return self._replay(target, "")


__all__ = ["ReplayProtocol"]
