"""The CVPR 2025 interactive protocol on a whole case, as the challenge runs one: every class at each step.

``CVPR25_iter_eval.py`` runs a case's classes together: the model gets every class's box (step 0), hands
back one label map, and before each of the 5 click steps the script places one click per class on that
map (``segs == c`` against ``gts == c``), all of them before the model runs again; each step is scored on
the map (:func:`napari_medsam_eval.evaluation.cvpr25.case_scores`). Here each class is a segmentation of its
own (its anchors, its mask: what the model answered for it), and the step's map is made from their masks by
:func:`~napari_medsam_eval.evaluation.cvpr25.class_map` (a later class over an earlier one). A class whose
map mask is exact gets no click that step (the script appends ``None``) and keeps its mask.

Besides the map's scores each class's own mask is scored after every step (``own``: NSD gated on its own
DSC), so the two views can be told apart in a run's table.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Mapping, Protocol, Sequence

import numpy as np

from ..core.errors import Cancelled, InputError
from ..core.progress import SliceProgress
from ..core.prompt import Prompt
from ..evaluation import cvpr25


class ClassSegmentation(Protocol):
    """What the case needs of one class's segmentation (:class:`~napari_medsam_eval.propagation.anchors.
    AnchoredSegmentation` is one): its mask and anchors, a first prompt propagated, a correction."""

    mask: np.ndarray | None
    anchors: dict[int, Prompt]
    n_slices: int

    def propagate(self, prompt: Prompt, progress: SliceProgress | None = None) -> Any: ...

    def correct(self, prompt: Prompt, progress: SliceProgress | None = None) -> Any: ...

    def anchor_list(self) -> list[Prompt]: ...


@dataclass
class ChallengeCase:
    """A case after the box and the clicks: per class its steps in the map (``classes``: ``{"dice", "nsd"}``
    after each of the 1 + K steps), on its own mask (``own``), its click per step (``((z, y, x), fg)`` or None),
    its final own mask and anchors; ``case`` the script's step scores of the case."""

    classes: dict[int, list[dict[str, float]]] = field(default_factory=dict)
    own: dict[int, list[dict[str, float]]] = field(default_factory=dict)
    clicks: dict[int, list[Any]] = field(default_factory=dict)
    masks: dict[int, np.ndarray] = field(default_factory=dict)
    anchors: dict[int, list[Prompt]] = field(default_factory=dict)
    case: list[dict[str, float]] = field(default_factory=list)

    def steps(self, key: int, view: str = "classes", score: str = "dice") -> list[float]:
        """One class's step values: ``view`` ``classes`` (in the map) or ``own``, ``score`` dice or nsd."""
        return [float(step[score]) for step in getattr(self, view)[int(key)]]


def overlapping_truths(truths: Mapping[int, np.ndarray]) -> tuple[int, int] | None:
    """Two classes whose truths share a voxel (no one label map holds both), else None."""
    keys = sorted(truths)
    seen = np.zeros(np.shape(truths[keys[0]]), dtype=np.int64) if keys else None
    for key in keys:
        mask = np.asarray(truths[key], bool)
        clash = seen[mask]
        if clash.any():
            return int(clash[clash > 0][0]), int(key)
        seen[mask] = key
    return None


def run_challenge_case(sessions: Mapping[int, ClassSegmentation], firsts: Mapping[int, Prompt],
                       truths: Mapping[int, np.ndarray], protocol: Any, spacing: Sequence[float], *,
                       progress: Mapping[int, SliceProgress | None] | None = None,
                       timed: Callable[[int], ContextManager[Any]] | None = None) -> ChallengeCase:
    """Every class of a case through the box and ``protocol.interactions`` clicks together (module doc).

    ``sessions``, ``firsts`` and ``truths`` are keyed by class value (the map's value, the label order);
    ``timed(key)`` wraps every model call of that class (its time columns); ``progress[key]`` sees its passes
    and may cancel (:class:`Cancelled`)."""
    keys = sorted(int(k) for k in sessions)
    if not keys or set(keys) != {int(k) for k in firsts} or set(keys) != {int(k) for k in truths}:
        raise InputError(f"a challenge case needs a segmentation, a first prompt and a truth per class; got "
                         f"{sorted(sessions)}, {sorted(firsts)}, {sorted(truths)}")
    clash = overlapping_truths(truths)
    if clash is not None:
        raise InputError(f"{protocol.name}: the challenge scores one label map per case, but the truths of "
                         f"targets {clash[0]} and {clash[1]} share voxels (regions sharing a label); name "
                         "targets that do not overlap")
    progress = progress or {}
    timed = timed or (lambda _key: contextlib.nullcontext())
    truth = {k: np.asarray(truths[k], bool) for k in keys}
    out = ChallengeCase(classes={k: [] for k in keys}, own={k: [] for k in keys}, clicks={k: [] for k in keys})

    def passed(result: Any) -> None:
        if getattr(result, "cancelled", False):
            raise Cancelled(result.mask, result.done, result.total)

    def score() -> np.ndarray:
        segs = cvpr25.class_map({k: sessions[k].mask for k in keys})
        step = cvpr25.case_scores(segs, truth, spacing)
        out.case.append({"dice": step["dice"], "nsd": step["nsd"]})
        gate = step["dice"] > cvpr25.NSD_MIN_DICE
        for k in keys:
            scored = step["classes"][k]
            out.classes[k].append(scored)
            mask = np.asarray(sessions[k].mask, bool)
            same = np.array_equal(segs == k, mask)  # its own mask is its map mask: the same DSC
            if same and scored["dice"] <= cvpr25.NSD_MIN_DICE:
                out.own[k].append({"dice": scored["dice"], "nsd": 0.0})  # its own gate is closed
            elif same and gate:
                out.own[k].append(dict(scored))
            else:
                out.own[k].append(cvpr25.step_scores(mask, truth[k], spacing))
        return segs

    for k in keys:  # step 0: each class's box (and the extent it gives)
        with timed(k):
            passed(sessions[k].propagate(firsts[k], progress.get(k)))
            for anchor in protocol.extent_anchors(firsts[k], sessions[k].n_slices):
                passed(sessions[k].correct(anchor, progress.get(k)))
    segs = score()
    for _ in range(protocol.interactions):
        fixes = {k: protocol.next_correction(segs == k, truth[k], sessions[k].anchors, k) for k in keys}
        for k in keys:  # every click placed on the same map, then the model runs
            fix = fixes[k]
            out.clicks[k].append(None if fix is None else (tuple(fix.info["click_zyx"]), bool(fix.point_labels[0])))
            if fix is not None:
                with timed(k):
                    passed(sessions[k].correct(fix, progress.get(k)))
        segs = score()
    out.masks = {k: np.asarray(sessions[k].mask, bool) for k in keys}
    out.anchors = {k: sessions[k].anchor_list() for k in keys}
    return out


__all__ = ["ChallengeCase", "ClassSegmentation", "overlapping_truths", "run_challenge_case"]
