"""Slice-to-slice propagation of one target around a per-slice backend (volumes and videos).

* :func:`propagate_volume` - the MedSAM2-style evaluation of a per-slice model:
  segment the prompted slice, then walk up and down, prompting each next
  slice with the last good mask's tight box widened by the rules' margin;
  a direction stops where a stop rule fires (:mod:`.rules`) or at ``z_limits``.
* :func:`propagate_video` - forward only from the prompted frame; by default
  each frame's box is found from image features (``locate="similarity"``,
  :mod:`.similarity`) rather than from the last mask.

What happened goes into a :class:`PropagationRecord` when one is given: per
direction the last slice kept, the slice where it stopped and the rule that
stopped it (:class:`DirectionStop`), and the model's own score per slice.

A backend with its own memory (``propagates_natively``, e.g. SAM2/MedSAM2)
is handed the whole stack through :meth:`SegmentationBackend.propagate`
instead, unless ``use_native=False``; it predicts absence itself (the record
says ``model``).

Progress goes through a :data:`~napari_medsam_eval.core.progress.SliceProgress`
callback ``progress(done, total)``, called after every slice. Returning
``False`` cancels: the function raises :class:`~napari_medsam_eval.core.errors.Cancelled`,
whose ``partial`` attribute holds what was segmented so far (same shape and
dtype as a complete result). ``total`` is the number of slices the run could
visit at most; a run that stops early reports ``(total, total)`` at the end,
so a progress bar always completes.
"""
from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any, Hashable

import numpy as np

from ..core.errors import Cancelled
from ..models.base import SegmentationBackend
from ..core.progress import SliceProgress
from ..core.prompt import Prompt
from ..core.anchor_prompts import painted_answer
from ..protocols.geometry import interior_point
from .similarity import SimilarityLocator
from ..core.postprocess import seed_of
from .rules import PropagationRules, Reference, next_box, reference_from, resolve_rules, stop_finding, widen_box
from .stop_words import stop_text
from ..core.errors import InputError

#: pixels a propagated box is widened by at least (the volume default's ``margin``)
DEFAULT_MARGIN = PropagationRules().margin


@dataclass(frozen=True)
class DirectionStop:
    """How one direction of a propagation ended.

    ``last`` is the last slice kept (the prompted one when no other was),
    ``at`` the slice where ``reason`` fired (dropped; None when the stack or
    the limits ended, reason ``end``).
    """

    direction: str
    last: int
    at: int | None
    reason: str
    #: what the rule measured at ``at`` and the limit it crossed (:class:`.rules.StopFinding`)
    measured: float | None = None
    limit: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def text(self, unit: str = "slice") -> str:
        """In words, with the rule explained (:func:`.stop_words.stop_text`)."""
        return stop_text(self.direction, self.last, self.at, self.reason, self.measured, self.limit, unit)

    def __str__(self) -> str:
        return self.text()


@dataclass
class PropagationRecord:
    """What a propagation did: the rules it ran with, where each direction stopped, per-slice scores."""

    rules: dict[str, Any] | None = None
    stops: list[DirectionStop] = field(default_factory=list)
    scores: dict[int, float] = field(default_factory=dict)
    #: what one step is called: ``slice`` (volumes) or ``frame`` (videos)
    unit: str = "slice"

    def summary(self) -> str:
        """One line for a status bar: each direction's stop in words (and what the largest-component step
        removed)."""
        text = "; ".join(stop.text(self.unit) for stop in self.stops) or "no propagation"
        removed = (self.rules or {}).get("largest_component")
        if removed is not None and not isinstance(removed, bool):
            text += f"; largest 3D component kept ({removed} voxels removed)"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"rules": self.rules, "stops": [s.to_dict() for s in self.stops],
                "scores": {int(k): (None if v is None or not np.isfinite(v) else round(float(v), 4))
                           for k, v in sorted(self.scores.items())}}


class _Progress:
    """Counts slices, calls the callback, raises Cancelled when it returns False."""

    def __init__(self, callback: SliceProgress | None, total: int, result: np.ndarray) -> None:
        self.callback = callback
        self.total = total
        self.done = 0
        self.result = result

    def _report(self, done: int) -> None:
        if self.callback is None:
            return
        if self.callback(done, self.total) is False:
            raise Cancelled(self.result, self.done, self.total)

    def step(self) -> None:
        self.done += 1
        self._report(min(self.done, self.total))

    def finish(self) -> None:
        if self.callback is not None and self.done < self.total:
            self.done = self.total
            self.callback(self.total, self.total)


def _check_stack(stack: np.ndarray, what: str) -> np.ndarray:
    stack = np.asarray(stack)
    if stack.ndim not in (3, 4) or (stack.ndim == 4 and stack.shape[-1] not in (3, 4)):
        raise InputError(f"{what} must be (N, H, W) or (N, H, W, 3), got shape {stack.shape}")
    if stack.shape[0] == 0:
        raise InputError(f"{what} has no slices")
    return stack


def _resolve_limits(z_limits: tuple[int, int] | None, n: int) -> tuple[int, int]:
    if z_limits is None:
        return 0, n - 1
    lo, hi = int(z_limits[0]), int(z_limits[1])
    if lo > hi:
        raise InputError(f"z_limits must be (low, high) with low <= high, got {z_limits}")
    return max(0, lo), min(n - 1, hi)


def _start_index(prompt: Prompt, n: int, what: str) -> int:
    if prompt.slice_index is None:
        raise InputError(f"the prompt needs a slice_index to propagate through a {what}")
    z = int(prompt.slice_index)
    if not 0 <= z < n:
        raise InputError(f"prompt slice_index {z} is outside the {what} (0..{n - 1})")
    return z


def _walk(
    backend: SegmentationBackend,
    stack: np.ndarray,
    result: np.ndarray,
    first: np.ndarray,
    indices: range,
    direction: str,
    *,
    prompt: Prompt,
    reference: Reference,
    rules: PropagationRules,
    case_id: Hashable,
    progress: _Progress,
    record: PropagationRecord,
    locator: SimilarityLocator | None = None,
) -> None:
    """Propagate from ``first`` (the prompted slice's mask) through ``indices``, writing into ``result``.

    Each slice's box comes from ``locator`` when given, else from the last good mask."""
    shape = stack.shape[1:3]
    last_kept, good, misses = int(prompt.slice_index), first, 0
    for z in indices:
        if locator is not None:
            box = widen_box(locator.box(backend.feature_grid(stack[z], cache_key=(case_id, z))), shape, rules)
        else:
            box = next_box(good, shape, rules)
        if box is None:  # nothing to prompt with yet (an empty prompted slice, stop_when_empty off)
            progress.step()
            continue
        slice_prompt = _next_prompt(prompt, z, box, good, rules)
        answer = backend.segment(stack[z], slice_prompt, cache_key=(case_id, z))
        mask = np.asarray(answer.mask, dtype=bool)
        record.scores[z] = float("nan") if answer.score is None else float(answer.score)
        finding = stop_finding(rules, reference, good, mask, answer.score, stack[z], box)
        stop = False
        if finding is None:
            result[z], good, last_kept, misses = mask, mask, z, 0
        elif finding.reason == "lost" or rules.hold is None or misses < rules.hold:
            misses += 1  # left empty; the last good box is tried again on the next slice
        else:
            record.stops.append(DirectionStop(direction, last_kept, z, finding.reason, finding.measured,
                                              finding.limit))
            stop = True
        progress.step()  # after the slice is written: a cancel here keeps it in the partial result
        if stop:
            return
    record.stops.append(DirectionStop(direction, last_kept, None, _ended(indices, stack.shape[0])))


def _ended(indices: range, n: int) -> str:
    """Why a direction that ran out of slices ended: ``end`` at the stack's end (or with none to walk at its
    edge), ``limit`` where the range asked stopped short of it (the next anchor of a correction, ``z_limits``)."""
    if not len(indices):
        return "end" if indices.start in (-1, n) else "limit"
    return "end" if indices[-1] in (0, n - 1) else "limit"


def _next_prompt(prompt: Prompt, z: int, box: tuple[float, ...], good: np.ndarray,
                 rules: PropagationRules) -> Prompt:
    """Slice ``z``'s prompt: the box, plus the last good mask's interior point and/or the mask itself."""
    points, labels = [], []
    if rules.interior_point:
        point = interior_point(good)
        if point is not None:
            points, labels = [(float(point[0]), float(point[1]))], [1]
    return Prompt(target_label=prompt.target_label, slice_index=z, boxes=[box], points=points, point_labels=labels,
                  mask=good if rules.mask_prompt else None, protocol="propagation",
                  info={"lesion": prompt.info["lesion"]} if "lesion" in prompt.info else {})  # whose it is


def _segment_prompted(backend: SegmentationBackend, stack: np.ndarray, prompt: Prompt, result: np.ndarray,
                      case_id: Hashable, tracker: _Progress, record: PropagationRecord) -> np.ndarray:
    z0 = int(prompt.slice_index)
    painted = painted_answer(prompt, stack.shape[1:3])  # a painted slice is kept as painted: no model call
    answer = backend.segment(stack[z0], prompt, cache_key=(case_id, z0)) if painted is None else None
    first = painted if answer is None else np.asarray(answer.mask, dtype=bool)
    result[z0] = first
    record.scores[z0] = float("nan") if answer is None or answer.score is None else float(answer.score)
    tracker.step()
    return first


def _native(backend: SegmentationBackend, stack: np.ndarray, prompt: Prompt, reverse: bool, lo: int, hi: int,
            progress: SliceProgress | None, record: PropagationRecord) -> np.ndarray:
    """A model with its own memory propagates; the record says where its mask ends (reason ``model``)."""
    result = np.zeros(stack.shape[:3], dtype=bool)
    seed = seed_of(prompt.info)
    if seed != "box" and "mask" not in backend.accepts:
        raise InputError(f"a propagation seeded with the key slice's mask needs a model that takes mask prompts; "
                         f"{getattr(backend, 'name', backend)!s} takes {', '.join(sorted(backend.accepts))}")
    options = {} if seed == "box" else {"seed": seed}  # a backend's own default is the prompt itself
    native = np.asarray(backend.propagate(stack, prompt, reverse=reverse, progress=progress, **options), dtype=bool)
    painted = painted_answer(prompt, stack.shape[1:3])  # the model took the paint as its mask prompt
    if painted is not None:
        native[int(prompt.slice_index)] = painted  # and the painted slice stays as painted
    result[lo : hi + 1] = native[lo : hi + 1]
    z0, present = int(prompt.slice_index), result.reshape(result.shape[0], -1).any(axis=1)
    ways = [("up", range(z0 + 1, hi + 1)), ("down", range(z0 - 1, lo - 1, -1))] if reverse else \
        [("forward", range(z0 + 1, hi + 1))]
    for direction, indices in ways:
        last = z0
        for z in indices:
            if not present[z]:
                record.stops.append(DirectionStop(direction, last, z, "model"))
                break
            last = z
        else:
            record.stops.append(DirectionStop(direction, last, None, "end"))
    return result


def propagate_volume(
    backend: SegmentationBackend,
    volume: np.ndarray,
    prompt: Prompt,
    *,
    rules: PropagationRules | str | dict | None = None,
    margin: float | None = None,
    z_limits: tuple[int, int] | None = None,
    stop_when_empty: bool | None = None,
    min_iou: float | None = None,
    progress: SliceProgress | None = None,
    case_id: Hashable = None,
    use_native: bool = True,
    record: PropagationRecord | None = None,
) -> np.ndarray:
    """Segment one target through a volume from a prompt on ``prompt.slice_index``.

    ``volume`` is ``(Z, H, W)`` (or ``(Z, H, W, 3)``), intensity-prepared (uint8
    for the SAM family). The prompted slice is segmented with ``prompt`` as
    given; every other slice gets a box prompt from the last good mask
    (:func:`.rules.next_box`), and each direction stops where a stop rule
    fires or at ``z_limits`` = ``(z_low, z_high)``, inclusive. ``rules``: a
    :class:`~.rules.PropagationRules`, a preset name or a dict of options
    (default :data:`~.rules.VOLUME_RULES`); ``margin``, ``stop_when_empty``
    and ``min_iou`` override single options. Returns a bool ``(Z, H, W)``
    mask; ``record`` (when given) receives the stops and per-slice scores.
    Slices are cached in the backend as ``(case_id, z)``: give a ``case_id``
    to share embeddings between targets of one case.

    A backend that ``propagates_natively`` gets the stack instead (forward and
    reverse from the prompt); ``z_limits`` then clears the slices outside.
    Raises :class:`Cancelled` when ``progress`` returns False.
    """
    volume = _check_stack(volume, "volume")
    rules = resolve_rules("volume", rules, margin=margin, stop_when_empty=stop_when_empty, min_iou=min_iou)
    n = volume.shape[0]
    z0 = _start_index(prompt, n, "volume")
    lo, hi = _resolve_limits(z_limits, n)
    if not lo <= z0 <= hi:
        raise InputError(f"prompt slice_index {z0} is outside z_limits ({lo}, {hi})")
    ways = (("up", range(z0 + 1, hi + 1)), ("down", range(z0 - 1, lo - 1, -1)))
    return _run(backend, volume, prompt, rules, (lo, hi), ways, progress=progress, case_id=case_id,
                use_native=use_native, record=record)


def _run(backend: SegmentationBackend, stack: np.ndarray, prompt: Prompt, rules: PropagationRules,
         limits: tuple[int, int], ways: tuple[tuple[str, range], ...], *, progress: SliceProgress | None,
         case_id: Hashable, use_native: bool, record: PropagationRecord | None) -> np.ndarray:
    """The prompted slice, then each way in ``ways`` (or the backend's own propagation)."""
    record = PropagationRecord() if record is None else record
    record.rules = rules.to_dict()
    if rules.mask_prompt and "mask" not in getattr(backend, "accepts", ()):
        raise InputError(f"propagation option mask_prompt needs a model that takes mask prompts; "
                         f"{getattr(backend, 'name', backend)!s} takes {', '.join(sorted(backend.accepts))}")
    lo, hi = limits
    if use_native and backend.propagates_natively:
        return _native(backend, stack, prompt, len(ways) > 1, lo, hi, progress, record)
    result = np.zeros(stack.shape[:3], dtype=bool)
    tracker = _Progress(progress, hi - lo + 1, result)
    first = _segment_prompted(backend, stack, prompt, result, case_id, tracker, record)
    if first.any() or not rules.stop_when_empty:
        z0 = int(prompt.slice_index)
        reference = reference_from(first, stack[z0], record.scores.get(z0))  # once, for both directions
        locator = _locator(backend, stack, z0, first, rules, case_id, record)
        for direction, indices in ways:
            _walk(backend, stack, result, first, indices, direction, prompt=prompt, reference=reference, rules=rules,
                  case_id=case_id, progress=tracker, record=record, locator=locator)
    else:
        z0 = int(prompt.slice_index)
        record.stops.extend(DirectionStop(direction, z0, z0, "empty") for direction, _ in ways)
    tracker.finish()
    return result


def _locator(backend: SegmentationBackend, stack: np.ndarray, z0: int, first: np.ndarray, rules: PropagationRules,
             case_id: Hashable, record: PropagationRecord) -> SimilarityLocator | None:
    """The similarity locator the rules ask for; None (the last mask's box, recorded) when the model
    gives no image features or the prompted prediction is empty."""
    if rules.locate != "similarity":
        return None
    grid = backend.feature_grid(stack[z0], cache_key=(case_id, z0))
    locator = None if grid is None else SimilarityLocator.from_prompted(grid, first)
    if locator is None:
        if grid is None:
            warnings.warn(f"model {getattr(backend, 'name', backend)!s} gives no image features: each next "
                          "box comes from the last mask (locate=None)", stacklevel=3)
        record.rules = {**record.rules, "locate": None}
    return locator


def propagate_video(
    backend: SegmentationBackend,
    frames: np.ndarray,
    prompt: Prompt,
    *,
    rules: PropagationRules | str | dict | None = None,
    margin: float | None = None,
    stop_when_empty: bool | None = None,
    min_iou: float | None = None,
    end_frame: int | None = None,
    progress: SliceProgress | None = None,
    case_id: Hashable = None,
    use_native: bool = True,
    record: PropagationRecord | None = None,
) -> np.ndarray:
    """Segment one target forward through a video from ``prompt.slice_index`` (default 0).

    ``frames`` is ``(T, H, W)`` or ``(T, H, W, 3)``. Each frame after the
    prompted one is prompted from the last good frame's mask (per-slice
    models), up to ``end_frame`` inclusive (default the last). Frames before
    the prompted one stay empty, as in MedSAM2's video evaluation. ``rules``
    as in :func:`propagate_volume`, by default :data:`~.rules.VIDEO_RULES`: each
    frame's box is found from image features (:mod:`.similarity`; the last mask's
    box for a model without them), and a frame where the object is lost is
    left empty. A backend that ``propagates_natively`` runs forward only on its own.
    """
    frames = _check_stack(frames, "video")
    rules = resolve_rules("video", rules, margin=margin, stop_when_empty=stop_when_empty, min_iou=min_iou)
    n = frames.shape[0]
    if prompt.slice_index is None:
        prompt = dataclasses.replace(prompt, slice_index=0)
    t0 = _start_index(prompt, n, "video")
    t_end = n - 1 if end_frame is None else min(n - 1, int(end_frame))
    if t_end < t0:
        raise InputError(f"end_frame {end_frame} is before the prompted frame {t0}")
    return _run(backend, frames, prompt, rules, (t0, t_end), (("forward", range(t0 + 1, t_end + 1)),),
                progress=progress, case_id=case_id, use_native=use_native, record=record)
