"""The one way to segment an image by its kind: what the CLI, the benchmark and the session call.

:func:`segment_by_kind` takes an intensity-prepared image (see
:func:`napari_medsam_eval.core.intensity.prepare_image`), its kind and a prompt,
and returns a :class:`PropagationResult`: the bool mask of the image's
spatial shape and what happened (cancelled or not, slices done, seconds).

* ``image``: one ``segment`` call.
* ``volume``: :func:`~.slice_by_slice.propagate_volume` both ways from the prompted
  slice; ``how="slice"`` segments the prompted slice only; ``how="official"``
  runs the official LiteMedSAM 3D-box loop (:func:`~.litemedsam_3dbox.propagate_official_litemedsam`)
  on the prompt's ``info["box_3d"]`` (a one-slice box, which the official
  script refuses, is segmented on its slice).
* ``video``: :func:`~.slice_by_slice.propagate_video` forward from the prompted frame
  (``how="slice"``: that frame only).

A propagated volume keeps only its largest 3D connected component when the prompt's
``info`` asks for it (:mod:`napari_medsam_eval.core.postprocess`; the ``medsam2`` protocol does, as MedSAM2's
``medsam2_infer_3D_CT.py``); the record's ``rules["largest_component"]`` says how many
voxels that removed.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Iterator, Literal

import numpy as np

from ..core.case import KINDS
from ..core.reprs import html_facts, one_line, shape_words, values_words
from ..core.errors import Cancelled
from ..models.base import SegmentationBackend
from ..core.progress import SliceProgress
from ..core.prompt import Prompt, check_prompt_in_image, expect_prompt
from .litemedsam_3dbox import propagate_official_litemedsam
from ..core.anchor_prompts import painted_answer
from ..core.postprocess import largest_component, wants_largest_component
from .slice_by_slice import DirectionStop, PropagationRecord, propagate_video, propagate_volume
from ..core.errors import InputError

#: ways to segment a volume or video: propagate from the prompt, the prompted slice alone,
#: or the official LiteMedSAM 3D-box loop
HOW = ("propagate", "slice", "official")


@dataclass
class PropagationResult:
    """A segmentation's outcome: the bool mask (partial when ``cancelled``) and its facts;
    ``record`` says where each direction stopped and why, and the model's score per slice.

    It prints as one line (shape, voxels, slices segmented, seconds, stops); :meth:`summary` says the same in
    words and :meth:`slice_dice` gives the DSC of every slice against a truth.

    Example::

        result = session.propagate(prompt)     # PropagationResult(40x96x96, 1704 voxels, slices 17-27 (11), ...)
        result.mask, result.record.stops, result.cancelled
        result.slice_dice(case.label == 2)     # one DSC per slice, NaN where both masks are empty
    """

    mask: np.ndarray
    prompt: Prompt
    cancelled: bool = False
    done: int = 0
    total: int = 0
    seconds: float = 0.0
    record: PropagationRecord = field(default_factory=PropagationRecord)
    #: which model and precision made ``mask`` (:func:`~napari_medsam_eval.models.base.made_by`), when a
    #: session says it (``"litemedsam bf16 (first look)"``)
    made_by: str = ""

    def summary(self) -> str:
        """What was segmented and where each direction stopped, for a status line."""
        if self.mask.ndim < 3:
            return f"{int(self.mask.sum())} pixels"
        slices = np.flatnonzero(self.mask.reshape(self.mask.shape[0], -1).any(axis=1))
        unit = self.record.unit
        span = f"{unit}s {slices[0]}-{slices[-1]} ({len(slices)} with the target)" if len(slices) else "nothing"
        stops = self.record.summary()
        return f"segmented {span}" + ("" if stops == "no propagation" else f"; {stops}")

    def slice_dice(self, truth: np.ndarray) -> np.ndarray:
        """The DSC of every slice/frame against ``truth`` (a bool mask of the same shape; NaN where both are
        empty), as a run's ``slice_dice`` column holds it; a 2D image gives one value."""
        from ..evaluation.metrics import compute_per_slice_dice

        mask = np.asarray(self.mask, dtype=bool)
        truth = np.asarray(truth, dtype=bool)
        if mask.ndim < 3:
            return compute_per_slice_dice(mask[None], truth[None])
        return compute_per_slice_dice(mask, truth)

    def __repr__(self) -> str:
        """``PropagationResult(35x51x35, 1204 voxels, slices 12-20 (9), stops=[up: empty at 21, ...], 1.2 s)``:
        under 200 characters, never the mask."""
        named = {"stops": self._stops_words()} if self.record.stops else {}
        if self.cancelled:
            named["cancelled"] = f"after {self.done} of {self.total}"
        if self.made_by:
            named["made_by"] = repr(self.made_by)
        return one_line("PropagationResult", [shape_words(self.mask.shape), *self._mask_words(),
                                              f"{self.seconds:.1f} s"], named)

    def _repr_html_(self) -> str:
        facts = {"mask": shape_words(self.mask.shape), "segmented": ", ".join(self._mask_words()),
                 "prompt": f"label {self.prompt.target_label}, {self.record.unit} {self.prompt.slice_index}",
                 "stops": self.record.summary(), "cancelled": self.cancelled, "seconds": f"{self.seconds:.2f}"}
        if self.made_by:
            facts["made by"] = self.made_by
        return html_facts("PropagationResult", facts)

    def _mask_words(self) -> list[str]:
        mask = np.asarray(self.mask)
        words = [f"{int(np.count_nonzero(mask))} {'pixels' if mask.ndim < 3 else 'voxels'}"]
        if mask.ndim >= 3 and mask.shape[0]:
            slices = np.flatnonzero(mask.reshape(mask.shape[0], -1).any(axis=1))
            words.append(f"{self.record.unit}s {slices[0]}-{slices[-1]} ({len(slices)})" if len(slices)
                         else f"no {self.record.unit}")
        return words

    def _stops_words(self) -> str:
        stops = [f"{s.direction}: {s.reason}" + ("" if s.at is None else f" at {s.at}") for s in self.record.stops]
        return values_words(stops, limit=2)


def segment_by_kind(
    backend: SegmentationBackend,
    image: np.ndarray,
    kind: str,
    prompt: Prompt,
    *,
    how: Literal["propagate", "slice", "official"] = "propagate",
    margin: float | None = None,
    progress: SliceProgress | None = None,
    case_id: Hashable = None,
    **options: Any,
) -> PropagationResult:
    """Segment ``image`` (prepared; ``kind`` one of volume / video / image) from ``prompt``.

    ``options`` go to the propagation (``rules``, ``z_limits``,
    ``stop_when_empty``, ``min_iou``, ``end_frame``, ``use_native``); ``margin``
    None keeps the rules' own. Slices are cached in the
    backend under ``(case_id, index)``. ``progress`` returning False cancels:
    the result then holds the partial mask and ``cancelled=True``.
    """
    if kind not in KINDS:
        raise InputError(f"kind must be one of {KINDS}, got {kind!r}")
    if how not in HOW:
        raise InputError(f"how must be one of {HOW}, got {how!r}")
    state = {"done": 0, "total": 0}

    def report(done: int, total: int) -> bool | None:
        state["done"], state["total"] = done, total
        return None if progress is None else progress(done, total)

    prompt = expect_prompt(prompt, "segment_by_kind")
    if prompt.is_empty and prompt.info.get("empty"):
        raise InputError(f"the prompt for label {prompt.target_label} is empty: its protocol found nothing of that "
                         "target to prompt (a label the case does not hold, or no foreground where the protocol "
                         "looks); nothing to segment")
    image = np.asarray(image)
    check_prompt_in_image(prompt, image.shape[:2] if kind == "image" else image.shape[1:3],
                          None if kind == "image" else image.shape[0], clip=False)  # a named error, not an empty mask
    start = time.perf_counter()
    record = PropagationRecord(unit="frame" if kind == "video" else "slice")
    try:
        mask = _dispatch(backend, np.asarray(image), kind, prompt, how, margin, report, case_id,
                         {**options, "record": record})
    except Cancelled as stop:
        return PropagationResult(np.asarray(stop.partial, dtype=bool), prompt, True, stop.done, stop.total,
                                 time.perf_counter() - start, record)
    return PropagationResult(mask, prompt, False, state["done"], state["total"], time.perf_counter() - start,
                             record)


def _dispatch(backend: SegmentationBackend, image: np.ndarray, kind: str, prompt: Prompt, how: str,
              margin: float | None, progress: SliceProgress, case_id: Hashable, options: dict[str, Any]) -> np.ndarray:
    if kind == "image":
        mask = np.asarray(backend.segment(image, prompt, cache_key=(case_id, 0)).mask, dtype=bool)
        if progress(1, 1) is False:
            raise Cancelled(mask, 1, 1)
        return mask
    if how == "slice":
        return _segment_one_slice(backend, image, prompt, progress, case_id)
    if how == "official":
        if kind != "volume" or "box_3d" not in prompt.info:
            raise InputError("the official LiteMedSAM loop needs a volume and a prompt with info['box_3d']")
        (mask,) = segment_official(backend, image, [prompt], case_id=case_id, progress=progress)
        record_official(options["record"], prompt)
        return mask
    walk = propagate_volume if kind == "volume" else propagate_video
    mask = walk(backend, image, prompt, margin=margin, progress=progress, case_id=case_id, **options)
    if kind == "volume" and wants_largest_component(prompt.info):
        kept = largest_component(mask)
        record = options["record"]
        record.rules = {**(record.rules or {}), "largest_component": int(mask.sum() - kept.sum())}
        mask = kept
    return mask


def segment_official(backend: SegmentationBackend, image: np.ndarray, prompts: list[Prompt], *,
                     case_id: Hashable = None, progress: SliceProgress | None = None) -> Iterator[np.ndarray]:
    """One bool mask per prompt from the official LiteMedSAM loop on the prompts' ``info["box_3d"]``, in
    the prompts' order, each made when it is asked for (a case of thousands of boxes holds the loop's label
    map and one mask, not a mask a box).

    The boxes run together, in the order given, as the official script runs a case's boxes: box
    ``i`` is written as ``i + 1`` into one label map, which the script resizes with INTER_AREA
    before re-boxing the next slice, so a later box's masks depend on that value and differ from
    the same box run alone; a later box overwrites an earlier one. A box on one slice (which the
    script refuses: it asserts ``z_min < z_max``) is segmented on its slice, after the loop.
    """
    several = [i for i, prompt in enumerate(prompts) if not _one_slice_box(prompt)]
    segs = propagate_official_litemedsam(backend, image, [prompts[i].info["box_3d"] for i in several],
                                         progress=progress, case_id=case_id) if several else None
    value_of = {i: value for value, i in enumerate(several, start=1)}
    for i, prompt in enumerate(prompts):
        if i in value_of:
            yield segs == value_of[i]
        else:
            yield _segment_one_slice(backend, image, prompt, lambda _done, _total: None, case_id)


def segment_prompts(backend: SegmentationBackend, image: np.ndarray, kind: str, prompts: Iterable[Prompt], *,
                    case_id: Hashable = None, progress: SliceProgress | None = None,
                    each: Callable[[Prompt, np.ndarray], None] | None = None,
                    stops: Callable[[list[DirectionStop]], None] | None = None,
                    **options: Any) -> PropagationResult:
    """One target's prompts segmented as a benchmark run does: a prompt replayed on one slice
    (``info["operation"] == "slice"``) on that slice, any other propagated; several prompts (a target's
    lesions) each on its own, their results united as they come (:func:`united_result`'s rules: one running
    mask, so thousands of lesions hold one mask, not one each). ``prompts`` may be made as they are asked
    for (a generator). ``each(prompt, mask)`` sees every prompt's own mask before it is dropped (an instance
    target numbers its lesions so); ``stops(stops)`` every prompt's stops, which the united record then
    leaves out (a run writes them as they come). Empty prompts are skipped.
    ``options`` go to :func:`segment_by_kind` (``rules``, ``z_limits``, ``end_frame``). A cancel raises
    :class:`Cancelled` with the partial mask."""
    united: PropagationResult | None = None
    count = 0
    for prompt in prompts:
        if prompt.is_empty or prompt.info.get("empty"):
            continue
        how = "slice" if prompt.info.get("operation") == "slice" else "propagate"
        result = segment_by_kind(backend, image, kind, prompt, case_id=case_id, how=how, progress=progress,
                                 **options)
        if result.cancelled:
            raise Cancelled(result.mask if united is None else united.mask | result.mask, result.done, result.total)
        if each is not None:
            each(prompt, result.mask)
        if stops is not None:
            stops(result.record.stops)
            result.record.stops = []
        count += 1
        if united is None:
            united = result
            continue
        if count == 2:  # several: a copy of the first (its own record) to unite the others into
            united = united_result([united])
        _unite_into(united, result)
    if united is None:
        raise InputError("the target has no prompt to segment")
    return united


def _unite_into(united: PropagationResult, result: PropagationResult) -> None:
    """``result`` united into ``united`` in place (:func:`united_result`'s rules)."""
    united.mask |= np.asarray(result.mask, dtype=bool)
    united.record.stops.extend(result.record.stops)
    for z, value in result.record.scores.items():
        united.record.scores[z] = max(value, united.record.scores.get(z, value))


def united_result(results: list[PropagationResult]) -> PropagationResult:
    """Several results of one target as one (its lesions, each prompted on its own): their masks united,
    every direction's stop (result by result, in order), each slice's highest model score; the first
    result's prompt and rules."""
    record = PropagationRecord(rules=results[0].record.rules, unit=results[0].record.unit)
    for result in results:
        record.stops.extend(result.record.stops)
        for z, value in result.record.scores.items():
            record.scores[z] = max(value, record.scores.get(z, value))
    mask = np.array(results[0].mask, dtype=bool)  # a copy: the running union of segment_prompts writes in it
    for result in results[1:]:
        mask |= np.asarray(result.mask, dtype=bool)
    return PropagationResult(mask, results[0].prompt, record=record, made_by=results[0].made_by)


def official_result(mask: np.ndarray, prompt: Prompt) -> PropagationResult:
    """A :func:`segment_official` mask as a result whose record says where the official loop stopped."""
    record = PropagationRecord()
    record_official(record, prompt)
    return PropagationResult(mask, prompt, record=record)


def record_official(record: PropagationRecord, prompt: Prompt) -> None:
    """The official loop's stops: its box's z-range, both ways from the middle slice (no rule)."""
    _x0, _y0, z_min, _x1, _y1, z_max = (int(v) for v in prompt.info["box_3d"])
    record.rules = {"official": "litemedsam-3dbox"}
    record.stops = [DirectionStop("up", z_max, None, "box_3d"), DirectionStop("down", z_min, None, "box_3d")]


def _one_slice_box(prompt: Prompt) -> bool:
    box = prompt.info.get("box_3d")
    return box is not None and not box[2] < box[5]  # the official script asserts z_min < z_max


def _segment_one_slice(backend: SegmentationBackend, image: np.ndarray, prompt: Prompt, progress: SliceProgress,
                       case_id: Hashable) -> np.ndarray:
    if prompt.slice_index is None:
        raise InputError("the prompt needs a slice_index to segment one slice of a stack")
    z = int(prompt.slice_index)
    if not 0 <= z < image.shape[0]:
        raise InputError(f"prompt slice_index {z} is outside the stack (0..{image.shape[0] - 1})")
    mask = np.zeros(image.shape[:3], dtype=bool)
    painted = painted_answer(prompt, image.shape[1:3])  # a painted slice is its own answer
    mask[z] = painted if painted is not None else np.asarray(
        backend.segment(image[z], prompt, cache_key=(case_id, z)).mask, dtype=bool)
    if progress(1, 1) is False:
        raise Cancelled(mask, 1, 1)
    return mask
