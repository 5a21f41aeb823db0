"""One target prompted on several slices or frames (anchors), corrected and propagated again.

A clinician looks at a propagated result, corrects the slice where it went wrong and
propagates again. :class:`AnchoredSegmentation` holds every prompt given so far, each tied
to its slice (an *anchor*), and the current mask:

* :meth:`~AnchoredSegmentation.propagate` starts over from one prompt (it becomes the only
  anchor) and propagates as :func:`~.segment.segment_by_kind` does;
* :meth:`~AnchoredSegmentation.correct` adds a prompt on slice ``k``: on top of that slice's
  anchor if it has one (:func:`merge_prompt`: a new box replaces the box, new points join
  the points), else as a new anchor. Slice ``k`` is segmented again and the propagation runs
  from ``k`` in both directions (videos: forward) **towards the next anchor**, up to the
  slices nearer to that anchor than to ``k``, or to a stop rule; the slices it segmented
  replace the old ones, so the other anchors' slices, the slices nearer to them, everything
  beyond them and everything past a stop rule are kept. Towards an anchor that holds the
  object the walk **joins that anchor's mask**: it goes on to the slice before that mask
  begins when the mask falls short of the halfway slice (the gap is filled), and the drift
  rules (:data:`~.rules.DRIFT_RULES`: intensity, overlap IoU, area growth) do not stop it there -
  the object runs on between two slices that hold it; an empty prediction still ends it.
  Away from every anchor (past the outermost one) the rules are the run's own.
* A correction given with the target's ground truth (``truth``) returns a :class:`CorrectionResult`:
  the DSC before and after, and its summary says when the correction lowered it.
A cancelled propagation or correction changes nothing: the anchors and the mask stay as
they were.

* A *painted* prompt (:func:`painted_prompt`, :mod:`napari_medsam_eval.core.anchor_prompts`) holds the mask the user painted
  on slice ``k``: that slice is kept exactly as painted and the propagation from it starts
  from the painted mask (its box for a walk; the mask itself for a model with memory).
* An *absent* prompt (:func:`absent_prompt`, "the target is not on this slice") empties
  slice ``k``; past the outermost anchor it also empties the rest of the stack on that side
  (the object ends there).

A model with its own memory (SAM2 / MedSAM2) gets all anchors at once: they are added to
its state before it propagates (it takes prompts on several frames; an absent anchor is an
empty mask prompt), and its whole result replaces the mask.

Core module: no Qt, no napari. The Segment widget, ``medsam-eval segment`` and the
``corrections`` protocol drive it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Hashable

import numpy as np

from ..core.errors import Cancelled
from ..models.base import SegmentationBackend
from ..core.postprocess import LARGEST_COMPONENT
from ..core.progress import SliceProgress
from ..core.anchor_prompts import (ABSENT, PAINTED, absent_prompt, is_absent,  # noqa: F401 - anchors name them too
                              painted_prompt, painted_slices)
from ..core.prompt import Prompt
from .rules import resolve_rules
from .segment import PropagationResult, segment_by_kind
from .slice_by_slice import PropagationRecord
from ..core.errors import InputError


def merge_prompt(old: Prompt | None, new: Prompt) -> Prompt:
    """The anchor after ``new`` is given on a slice that holds ``old``.

    A new box replaces the old box(es); new points are added to the old points; a mask
    prompt or an absent prompt replaces everything; a box or points given after an absent
    prompt start a new anchor.
    """
    if old is None or is_absent(new) or new.mask is not None or is_absent(old) or old.mask is not None:
        return new
    return dataclasses.replace(
        old,
        boxes=list(new.boxes) if new.boxes else list(old.boxes),
        points=list(old.points) + list(new.points),
        point_labels=list(old.point_labels) + list(new.point_labels),
        protocol=new.protocol,
        info={**old.info, **new.info},
    )


@dataclass
class AnchoredSegmentation:
    """One target of one prepared image (``kind`` ``volume`` or ``video``), its anchors and mask."""

    backend: SegmentationBackend
    image: np.ndarray
    kind: str
    rules: Any = None
    case_id: Hashable = None
    anchors: dict[int, Prompt] = field(default_factory=dict)
    mask: np.ndarray | None = None
    #: what the last propagation did (where it stopped), for a status line
    last: PropagationResult | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("volume", "video"):
            raise InputError(f"anchors are slices of a volume or frames of a video, not of a {self.kind!r}")
        self.image = np.asarray(self.image)

    @property
    def n_slices(self) -> int:
        return int(self.image.shape[0])

    def anchor_list(self) -> list[Prompt]:
        """The anchors in slice order."""
        return [self.anchors[k] for k in sorted(self.anchors)]

    def snapshot(self) -> "AnchorSnapshot":
        """The anchors and mask as they are now (the mask bit-packed), for :meth:`restore`."""
        mask = None if self.mask is None else (np.packbits(self.mask, axis=None), self.mask.shape)
        return AnchorSnapshot(self, dict(self.anchors), mask)

    def restore(self, snapshot: "AnchorSnapshot") -> None:
        """Put back the anchors and mask of ``snapshot`` (an undo goes back one correction)."""
        if snapshot.owner is not self:
            raise InputError("a snapshot restores the segmentation it was taken of")
        self.anchors = dict(snapshot.anchors)
        if snapshot.mask is None:
            self.mask = None
        else:
            packed, shape = snapshot.mask
            self.mask = np.unpackbits(packed, count=int(np.prod(shape))).astype(bool).reshape(shape)

    # ------------------------------------------------------------------ prompting
    def propagate(self, prompt: Prompt, progress: SliceProgress | None = None) -> PropagationResult:
        """Start over: ``prompt`` becomes the only anchor and is propagated through the stack."""
        k = self._slice_of(prompt)
        if is_absent(prompt):
            raise InputError("the first prompt of a segmentation cannot say the target is absent")
        result = segment_by_kind(self.backend, self.image, self.kind, _no_component_step(prompt),
                                 progress=progress, case_id=self.case_id, rules=self.rules)
        if not result.cancelled:  # a cancelled start keeps what was there
            self.anchors = {k: prompt}
            self.mask = np.asarray(result.mask, dtype=bool).copy()
            self.last = result
        return result

    def correct(self, prompt: Prompt, progress: SliceProgress | None = None,
                truth: np.ndarray | None = None) -> PropagationResult:
        """Add ``prompt`` on its slice (merged with that slice's anchor) and propagate again
        from there up to the neighbouring anchors (module doc). With ``truth`` (the target's bool
        ground truth, the image's shape) the result is a :class:`CorrectionResult`: the DSC before
        and after the correction."""
        if self.mask is None:
            return self.propagate(prompt, progress)
        k = self._slice_of(prompt)
        before = dict(self.anchors)
        mask_before = None if truth is None else self.mask.copy()
        anchor = merge_prompt(self.anchors.get(k), prompt)
        self.anchors[k] = anchor
        try:
            result = self._correct(k, anchor, progress)
        except BaseException:
            self.anchors = before
            raise
        if result.cancelled:  # nothing changes: the anchor was not segmented
            self.anchors = before
        elif mask_before is not None:
            result = CorrectionResult.judged(result, mask_before, truth)
        return result

    def _correct(self, k: int, anchor: Prompt, progress: SliceProgress | None) -> PropagationResult:
        if getattr(self.backend, "propagates_natively", False):
            return self._native(progress)
        lo, hi = self._free_range(k)
        if is_absent(anchor):
            self._erase(k, lo, hi)
            self.last = PropagationResult(self.mask.copy(), anchor, done=1, total=1, record=PropagationRecord())
            return self.last
        (lo, joins_down), (hi, joins_up) = self._reach(k, lo, hi)
        if joins_down == joins_up or self.kind == "video":  # one walk, both ways alike
            result = self._walk(anchor, lo, hi, self._rules(joins_up or joins_down), progress)
        else:  # towards an anchor on one side only: each side its own walk and rules
            result = self._walk_apart(k, anchor, lo, hi, (self._rules(joins_down), self._rules(joins_up)), progress)
        if result.cancelled:
            return dataclasses.replace(result, mask=self.mask.copy())
        kept_lo, kept_hi = _kept_range(result.record, k, lo, hi)
        self.mask[kept_lo : kept_hi + 1] = np.asarray(result.mask, dtype=bool)[kept_lo : kept_hi + 1]
        self.last = result
        return dataclasses.replace(result, mask=self.mask.copy())

    # ------------------------------------------------------------------ walks
    def _reach(self, k: int, lo: int, hi: int) -> tuple[tuple[int, bool], tuple[int, bool]]:
        """How far a correction on ``k`` walks each way, and whether it walks towards an anchor that holds
        the object (it then joins that anchor's mask): ``((lo, joins_down), (hi, joins_up))``.

        Towards such an anchor the walk goes at least to the slice before the anchor's mask begins (the
        first slice from ``k`` on that side with a mask; the anchor itself when there is none), so a gap
        between the correction and the rest of the object is filled rather than left empty."""
        above = [a for a in self.anchors if a > k]
        below = [a for a in self.anchors if a < k] if self.kind == "volume" else []
        joins_up = bool(above) and not is_absent(self.anchors[min(above)])
        joins_down = bool(below) and not is_absent(self.anchors[max(below)])
        filled = self.mask.reshape(self.mask.shape[0], -1).any(axis=1)
        if joins_up:
            begins = next((z for z in range(k + 1, min(above)) if filled[z]), min(above))
            hi = max(hi, begins - 1)
        if joins_down:
            begins = next((z for z in range(k - 1, max(below), -1) if filled[z]), max(below))
            lo = min(lo, begins + 1)
        return (lo, joins_down), (hi, joins_up)

    def _rules(self, joins: bool) -> Any:
        """The run's rules; without the drift rules for a walk that joins another anchor's mask."""
        return resolve_rules(self.kind, self.rules).without_drift() if joins else self.rules

    def _walk(self, anchor: Prompt, lo: int, hi: int, rules: Any, progress: SliceProgress | None) -> PropagationResult:
        """The anchor's slice segmented again and walked over ``lo..hi`` (videos: forward to ``hi``)."""
        limits = {"z_limits": (lo, hi)} if self.kind == "volume" else {"end_frame": hi}
        return segment_by_kind(self.backend, self.image, self.kind, _no_component_step(anchor), progress=progress,
                               case_id=self.case_id, rules=rules, **limits)

    def _walk_apart(self, k: int, anchor: Prompt, lo: int, hi: int, rules: tuple[Any, Any],
                    progress: SliceProgress | None) -> PropagationResult:
        """Down to ``lo`` and up to ``hi`` as two walks with their own rules (``(down, up)``), as one result:
        the down walk's slices below ``k``, the up walk's from ``k``, each direction's stop from its own walk."""
        total = (k - lo + 1) + (hi - k + 1)
        down = self._walk(anchor, lo, k, rules[0], _shifted(progress, 0, total))
        if down.cancelled:
            return down
        up = self._walk(anchor, k, hi, rules[1], _shifted(progress, k - lo + 1, total))
        if up.cancelled:
            return up
        mask = np.asarray(up.mask, dtype=bool).copy()
        mask[lo:k] = np.asarray(down.mask, dtype=bool)[lo:k]
        record = PropagationRecord(rules=down.record.rules, unit=down.record.unit,
                                   scores={**down.record.scores, **up.record.scores})
        record.stops = ([s for s in down.record.stops if s.direction == "down"]
                        + [s for s in up.record.stops if s.direction != "down"])
        return PropagationResult(mask, down.prompt, False, down.done + up.done, total, down.seconds + up.seconds,
                                 record)

    # ------------------------------------------------------------------ helpers
    def _slice_of(self, prompt: Prompt) -> int:
        if prompt.slice_index is None:
            raise InputError("an anchor needs the slice (or frame) it was given on: slice_index is None")
        k = int(prompt.slice_index)
        if not 0 <= k < self.n_slices:
            raise InputError(f"slice {k} is outside the stack of {self.n_slices} slices (0..{self.n_slices - 1})")
        return k

    def _free_range(self, k: int) -> tuple[int, int]:
        """The slices a correction on ``k`` may change: those nearer to ``k`` than to a neighbouring
        anchor (a slice as near to both keeps what it had), to the end of the stack where there
        is no anchor beyond; videos only forward from ``k``.

        Each slice between two anchors thus comes from the nearer one: a propagated mask drifts
        with every slice it is carried, so the nearer prompt is the better one.
        """
        below = [a for a in self.anchors if a < k]
        above = [a for a in self.anchors if a > k]
        lo = k if self.kind == "video" else ((max(below) + k) // 2 + 1 if below else 0)
        hi = -(-(k + min(above)) // 2) - 1 if above else self.n_slices - 1
        return lo, hi

    def _erase(self, k: int, lo: int, hi: int) -> None:
        """Absent on ``k``: empty it, and the rest of its side past the outermost present anchor."""
        present = [a for a, p in self.anchors.items() if not is_absent(p)]
        self.mask[k] = False
        if self.kind == "video" or all(a < k for a in present):
            self.mask[k : hi + 1] = False
        elif all(a > k for a in present):
            self.mask[lo : k + 1] = False

    def _native(self, progress: SliceProgress | None) -> PropagationResult:
        """A model with memory: every anchor in its state, then its own propagation of the whole stack."""
        anchors = [_native_prompt(p, self.image.shape[1:3]) for p in self.anchor_list()]
        present = [p for p in anchors if not is_absent(p)]
        if not present:
            raise InputError("every anchor says the target is absent: nothing to propagate")
        first, others = present[0], [p for p in anchors if p is not present[0]]
        try:
            frames = self.backend.propagate(self.image, first, reverse=self.kind == "volume", progress=progress,
                                            anchors=others)
        except Cancelled as stop:
            return PropagationResult(self.mask.copy(), first, cancelled=True, done=stop.done, total=stop.total)
        self.mask = np.asarray(frames, dtype=bool).copy()
        for k, painted in painted_slices(self.anchors).items():  # the model took them as mask prompts;
            self.mask[k] = painted  # the painted slices stay as painted
        self.last = PropagationResult(self.mask.copy(), first, record=PropagationRecord())
        return self.last


@dataclass(frozen=True, eq=False)
class AnchorSnapshot:
    """What :meth:`AnchoredSegmentation.snapshot` kept: its segmentation, anchors and packed mask."""

    owner: AnchoredSegmentation
    anchors: dict[int, Prompt]
    mask: tuple[np.ndarray, tuple[int, ...]] | None


#: a correction whose DSC falls by more than this is said to have lowered it
DICE_TOLERANCE = 1e-4


@dataclass(repr=False)
class CorrectionResult(PropagationResult):
    """A correction's :class:`~.segment.PropagationResult` with the DSC against the target's ground truth
    before and after it: its :meth:`summary` (a status line) says what the correction did, and says so
    plainly when it lowered the DSC (:attr:`lowered`)."""

    dice_before: float = float("nan")
    dice_after: float = float("nan")

    @classmethod
    def judged(cls, result: PropagationResult, before: np.ndarray, truth: np.ndarray) -> "CorrectionResult":
        """``result`` with the DSC of ``before`` (the mask before the correction) and of its mask against ``truth``."""
        from ..evaluation.metrics import compute_dice

        truth = np.asarray(truth, dtype=bool)
        if truth.shape != np.shape(result.mask):
            raise InputError(f"the ground truth's shape {truth.shape} is not the image's {np.shape(result.mask)}")
        fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(PropagationResult)}
        return cls(**fields, dice_before=float(compute_dice(before, truth)),
                   dice_after=float(compute_dice(result.mask, truth)))

    @property
    def lowered(self) -> bool:
        """Whether the correction lowered the DSC (by more than :data:`DICE_TOLERANCE`)."""
        return bool(self.dice_after < self.dice_before - DICE_TOLERANCE)

    def note(self) -> str:
        """What the correction did to the DSC, in words."""
        change = f"{self.dice_before:.4f} -> {self.dice_after:.4f}"
        if self.lowered:
            return (f"this correction lowered the DSC against the ground truth ({change}): undo it, or correct "
                    "another slice")
        return f"DSC against the ground truth {change}"

    def summary(self) -> str:
        return f"{super().summary()}; {self.note()}"

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, dice {self.dice_before:.4f} -> {self.dice_after:.4f})"


def _shifted(progress: SliceProgress | None, offset: int, total: int) -> SliceProgress | None:
    """``progress`` for one of two walks reported as one: its slices counted after ``offset``, of ``total``."""
    if progress is None:
        return None
    return lambda done, _total: progress(offset + done, total)


def _kept_range(record: PropagationRecord, k: int, lo: int, hi: int) -> tuple[int, int]:
    """The slices a correction's walk segmented: from where it stopped going down to where it
    stopped going up (``last`` of each direction). Slices past a stop keep what they had."""
    kept_lo = kept_hi = k
    for stop in record.stops:
        if stop.direction == "down":
            kept_lo = min(kept_lo, stop.last)
        else:  # up / forward
            kept_hi = max(kept_hi, stop.last)
    return max(lo, kept_lo), min(hi, kept_hi)


def _no_component_step(prompt: Prompt) -> Prompt:
    """Anchors may hold parts the largest-component step would drop: it is not applied to them."""
    if not prompt.info.get(LARGEST_COMPONENT):
        return prompt
    return dataclasses.replace(prompt, info={**prompt.info, LARGEST_COMPONENT: False})


def _native_prompt(prompt: Prompt, shape_hw: tuple[int, ...]) -> Prompt:
    """An absent anchor as a model with memory takes it: an empty mask prompt on that frame."""
    if not is_absent(prompt):
        return prompt
    return dataclasses.replace(prompt, mask=np.zeros(tuple(int(v) for v in shape_hw), dtype=bool))
