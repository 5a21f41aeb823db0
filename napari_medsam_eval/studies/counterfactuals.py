"""What would fix a result: the same case run again with one stage made perfect, and the DSC it gains.

A benchmark row says *where* its result lost DSC (:mod:`napari_medsam_eval.evaluation.error_parts`). To
say *what to change*, the target is segmented again by the run's own model, prompts and propagation
rules with one stage replaced by the ground truth's answer (a counterfactual); the gain over the run is
that stage's cost:

* ``oracle_extent`` - propagation kept to exactly the object's first and last slice/frame, no stop rule
  in between (a slice where the model finds nothing is left empty and the last good box tried on the
  next): the cost of the stop rules, both ways (stopping early, leaking past the end);
* ``oracle_prompt_slice`` - the protocol's own prompt, made on the slice/frame where the object is largest
  instead of the protocol's key slice, then propagated as in the run: the cost of the key-slice choice
  (for a video, propagated forward as the run is, so the frames before it stay empty);
* ``oracle_box`` - every slice/frame holding the object segmented alone from its tight box (widened by the
  protocol's ``margin``, as its key-slice box was): no propagation, so its DSC is the model's ceiling with
  box prompts. Its boxes are on the object's slices only, so it has the true extent too: the stage it
  measures, carrying the box from slice to slice, costs what it gains beyond the true extent (:data:`INCLUDES`).

A target taken lesion by lesion is explained lesion by lesion (each lesion's extent, largest slice and
boxes), the lesions' masks united. A variant that does not apply says why (:attr:`Counterfactual.reason`):
a 2D image has no extent or key slice; the official 3D-box protocol's extent is its box; the corrections
protocol's result is the corrected one. The model, its embedding cache (``case_id``) and the persistent
embedding store of the run's backend are reused: each slice is encoded once for all the variants.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Hashable

import numpy as np

from ..core.case import Case
from ..core.errors import Cancelled
from ..core.progress import SliceProgress
from ..core.prompt import Prompt
from ..core.targets import Target, with_keys
from ..evaluation.error_parts import ErrorParts, error_parts
from ..evaluation.lesion_maps import components
from ..evaluation.metrics import compute_dice
from ..models.base import SegmentationBackend
from ..propagation.rules import resolve_rules
from ..propagation.segment import segment_prompts
from ..protocols.corrections import CorrectionsProtocol
from ..protocols.cvpr25 import CVPR25Protocol
from ..protocols.geometry import expand_box, tight_box
from ..protocols.litemedsam import LiteMedSAM3DBoxProtocol

#: the counterfactual variants, in the order of the staircase from the run to the model's ceiling
VARIANTS = ("oracle_extent", "oracle_prompt_slice", "oracle_box")
#: what each variant makes perfect, in a sentence's words
VARIANT_WORDS = {"oracle_extent": "the true extent", "oracle_prompt_slice": "the best prompt slice",
                 "oracle_box": "the true box on every slice"}
#: the stage whose cost each variant measures, in a clinician's words (they read in "what X costs" and
#: "X costs most"; a video's say frame)
STAGE_WORDS = {"oracle_extent": "stopping too early or too late",
               "oracle_prompt_slice": "the choice of the prompted slice",
               "oracle_box": "carrying the box from slice to slice"}
#: the variant whose fix includes another's: the true box on every slice is given only on the object's slices,
#: so it has the true extent too; its stage costs what it gains beyond the true extent
INCLUDES = {"oracle_box": "oracle_extent"}
#: protocols whose result is not one propagation of one prompt (their registry names, from their classes)
OFFICIAL_3D = LiteMedSAM3DBoxProtocol.name
CORRECTIONS = CorrectionsProtocol.name
#: the protocols whose result is the corrected one (the simulated user's, the CVPR 2025 clicks')
CORRECTING = (CorrectionsProtocol.name, CVPR25Protocol.name)
#: the stop rules a perfect extent switches off (``hold=None``: a lost slice is skipped, the walk goes on)
_NO_STOPS = {"intensity_k": None, "min_score": None, "score_ratio": None, "min_iou": None, "max_area_growth": None,
             "max_box_fill": None, "hold": None}


@dataclass
class Counterfactual:
    """One variant's outcome: its mask, DSC and error parts, or the reason it does not apply."""

    variant: str
    mask: np.ndarray | None = None
    dice: float = float("nan")
    parts: ErrorParts | None = None
    #: the slice/frame the variant prompted (``oracle_prompt_slice``)
    prompt_slice: int | None = None
    #: why the variant does not apply ("" when it ran)
    reason: str = ""
    #: the variant asks what the run did (the protocol's key slice is already the largest): not run again,
    #: its DSC is the run's (``mask`` None)
    same_as_run: bool = False

    def __repr__(self) -> str:
        told = f"not applicable: {self.reason}" if self.reason else \
            "the run's own prompt slice" if self.same_as_run else f"DSC {self.dice:.4f}"
        return f"Counterfactual({self.variant}, {told})"


def not_applicable(case: Case, protocol_name: str, prompts: list[Prompt]) -> dict[str, str]:
    """The variants that do not apply to this result, each with why (see the module doc)."""
    why: dict[str, str] = {}
    if case.kind == "image":
        why["oracle_extent"] = why["oracle_prompt_slice"] = "a 2D image has no extent or prompt slice"
    elif protocol_name == OFFICIAL_3D:
        why["oracle_extent"] = "the official 3D-box loop's extent is its box's z-range (the ground truth's)"
        why["oracle_prompt_slice"] = "the official 3D-box loop starts from its box's middle slice"
    elif protocol_name in CORRECTING:
        why["oracle_extent"] = why["oracle_prompt_slice"] = "the run's result is after its corrections"
    elif any(p.info.get("operation") == "slice" for p in prompts):
        why["oracle_extent"] = why["oracle_prompt_slice"] = "the run segmented one slice, not a propagation"
    return why


def object_masks(target_mask: np.ndarray, prompts: list[Prompt]) -> list[np.ndarray]:
    """The object each prompt stands for: its lesion (``info["lesion"]``, in :func:`components`' order)
    or the whole target."""
    labelled, count = (None, 0)
    masks = []
    for prompt in prompts:
        lesion = prompt.info.get("lesion")
        if lesion is None:
            masks.append(target_mask)
            continue
        if labelled is None:
            labelled, count = components(target_mask)
        masks.append(labelled == int(lesion) if 1 <= int(lesion) <= count else np.zeros_like(target_mask))
    return masks


def present_slices(mask: np.ndarray) -> np.ndarray:
    """The slices/frames (axis 0) where ``mask`` holds a voxel."""
    return np.flatnonzero(mask.reshape(mask.shape[0], -1).any(axis=1))


def largest_slice(mask: np.ndarray) -> int | None:
    """The slice/frame where ``mask`` has the most voxels (the lowest on a tie); None when empty."""
    areas = mask.reshape(mask.shape[0], -1).sum(axis=1)
    return int(np.argmax(areas)) if areas.any() else None


def _asked(prompts: list[Prompt]) -> list[Prompt]:
    return [p for p in prompts if not p.is_empty and not p.info.get("empty")]


def extent_mask(backend: SegmentationBackend, image: np.ndarray, case: Case, prompts: list[Prompt],
                objects: list[np.ndarray], rules: Any, case_id: Hashable,
                progress: SliceProgress | None = None) -> np.ndarray:
    """``oracle_extent``: each prompt propagated with no stop rule, kept to its object's slices."""
    rules = resolve_rules(case.kind, rules).replace(**_NO_STOPS)
    mask = np.zeros(case.spatial_shape, dtype=bool)
    for prompt, obj in zip(prompts, objects):
        slices = present_slices(obj)
        if not len(slices):
            continue
        lo, hi = int(slices[0]), int(slices[-1])
        start = int(prompt.slice_index if prompt.slice_index is not None else lo)
        if case.kind == "volume":
            limits = {"z_limits": (min(lo, start), max(hi, start))}
        else:
            limits = {"end_frame": max(hi, start)}
        one = segment_prompts(backend, image, case.kind, [prompt], case_id=case_id, progress=progress, rules=rules,
                              **limits).mask
        one[:lo] = False
        one[hi + 1:] = False
        mask |= one
    return mask


def extent_from_run(backend: SegmentationBackend, image: np.ndarray, case: Case, prompt: Prompt, obj: np.ndarray,
                    run_mask: np.ndarray, run_stops: list[dict], rules: Any, case_id: Hashable,
                    progress: SliceProgress | None = None) -> np.ndarray | None:
    """``oracle_extent`` from the run's own result: with no stop rule the walk is the run's up to where a rule
    ended it (the same boxes from the same masks), so the run's mask is kept on the object's slices and each
    direction that stopped early goes on from its last kept slice (its mask as a painted anchor) to the
    object's end; a direction that ran past the end is cut there, with no model call. None where this does
    not hold (a model with its own memory, a direction the run does not record): then the walk is made
    again (:func:`extent_mask`). Exact when the run kept every voxel it segmented (its largest-component
    step removed nothing on a direction's last slice, as a run's ``stops`` and saved prediction say)."""
    from ..core.anchor_prompts import painted_prompt
    from ..core.postprocess import largest_component, wants_largest_component
    from ..propagation.segment import segment_by_kind

    slices = present_slices(obj)
    if getattr(backend, "propagates_natively", False) or not len(slices) or not run_stops:
        return None
    lo, hi = int(slices[0]), int(slices[-1])
    no_stops = resolve_rules(case.kind, rules).replace(**_NO_STOPS)
    result = np.asarray(run_mask, dtype=bool).copy()
    result[:lo] = False
    result[hi + 1:] = False
    for stop in run_stops:
        direction, last = stop.get("direction"), stop.get("last")
        if direction not in ("up", "down", "forward") or last is None:
            return None
        last = int(last)
        ahead = last < hi if direction != "down" else last > lo
        if not ahead:
            continue  # ran to the object's end or past it: cut above
        anchor = painted_prompt(int(prompt.target_label), last, result[last] if lo <= last <= hi else run_mask[last],
                                protocol="oracle_extent")
        if case.kind == "video":
            limits: dict[str, Any] = {"end_frame": hi}
        else:
            limits = {"z_limits": (last, hi) if direction == "up" else (lo, last)}
        walked = segment_by_kind(backend, image, case.kind, anchor, case_id=case_id, rules=no_stops,
                                 progress=progress, **limits).mask
        span = slice(last + 1, hi + 1) if direction != "down" else slice(lo, last)
        result[span] = walked[span]
    if case.kind == "volume" and wants_largest_component(prompt.info):
        result = largest_component(result)
    return result


def moved_prompt(protocol: Any, case: Case, prompt: Prompt, obj: np.ndarray, slice_index: int) -> Prompt:
    """The protocol's prompt for ``obj`` as it would make it were ``obj`` only on ``slice_index``: its own
    rule (box, points, margin, jitter) on that slice; the run prompt's target and lesion number kept."""
    label = np.zeros(obj.shape, dtype=np.uint8)
    label[slice_index] = obj[slice_index]
    alone = dataclasses.replace(case, label=label)
    made = protocol.prompts(alone, targets=with_keys([Target("object", (1,))]))
    moved = next(p for p in made if not p.is_empty)
    info = {**moved.info, **({"lesion": prompt.info["lesion"]} if "lesion" in prompt.info else {})}
    return dataclasses.replace(moved, target_label=prompt.target_label, info=info)


def box_mask(backend: SegmentationBackend, image: np.ndarray, case: Case, prompts: list[Prompt],
             objects: list[np.ndarray], margin: float, case_id: Hashable,
             progress: SliceProgress | None = None) -> np.ndarray:
    """``oracle_box``: every slice/frame of each object segmented alone from its tight box + ``margin``."""
    mask = np.zeros(case.spatial_shape, dtype=bool)
    if case.kind == "image":
        for prompt, obj in zip(prompts, objects):
            box = tight_box(obj)
            if box is not None:
                asked = Prompt(target_label=prompt.target_label, boxes=[expand_box(box, margin, obj.shape)])
                mask |= np.asarray(backend.segment(image, asked, cache_key=(case_id, 0)).mask, dtype=bool)
        return mask
    work = [(prompt, obj, int(z)) for prompt, obj in zip(prompts, objects) for z in present_slices(obj)]
    for done, (prompt, obj, z) in enumerate(work, start=1):
        box = expand_box(tight_box(obj[z]), margin, obj.shape[1:3])
        asked = Prompt(target_label=prompt.target_label, slice_index=z, boxes=[box], protocol="oracle_box")
        mask[z] |= np.asarray(backend.segment(image[z], asked, cache_key=(case_id, z)).mask, dtype=bool)
        if progress is not None and progress(done, len(work)) is False:
            raise Cancelled(mask, done, len(work))
    return mask


def score(variant: str, mask: np.ndarray, gt: np.ndarray, kind: str, prompt_slice: int | None = None,
          ) -> Counterfactual:
    """A variant's mask scored against the target: DSC and, for stacks, the error parts."""
    if kind == "image":
        return Counterfactual(variant, mask, float(compute_dice(mask, gt)), prompt_slice=prompt_slice)
    parts = error_parts(mask, gt)
    return Counterfactual(variant, mask, float(parts.dice), parts, prompt_slice=prompt_slice)


def counterfactuals(backend: SegmentationBackend, image: np.ndarray, case: Case, target_mask: np.ndarray,
                    prompts: list[Prompt], protocol: Any, *, rules: Any = None, variants: tuple[str, ...] = VARIANTS,
                    progress: SliceProgress | None = None, run_mask: np.ndarray | None = None,
                    run_stops: list[dict] | None = None) -> dict[str, Counterfactual]:
    """Each of ``variants`` for one target (``target_mask``, bool) whose run gave ``prompts``.

    ``image``: the case prepared as the run prepared it; ``protocol``: the run's built protocol (its
    prompts are remade on another slice, its ``margin`` widens the boxes); ``rules``: the run's
    propagation rules (None: each kind's default). Slices are cached in ``backend`` under
    ``(case.case_id, z)``, so the variants share each slice's embedding. ``progress`` answering False
    raises :class:`Cancelled`. ``run_mask`` and ``run_stops`` (the run's saved mask of the target and its
    ``stops``): the true extent goes on from them instead of walking again (:func:`extent_from_run`; a target
    of one prompt)."""
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise ValueError(f"unknown counterfactual variant(s) {unknown}; choose from {list(VARIANTS)}")
    prompts = _asked(prompts)
    target_mask = np.asarray(target_mask, dtype=bool)
    objects = object_masks(target_mask, prompts)
    skipped = not_applicable(case, getattr(protocol, "name", ""), prompts)
    found: dict[str, Counterfactual] = {}
    for variant in variants:
        if variant in skipped:
            found[variant] = Counterfactual(variant, reason=skipped[variant])
        elif not prompts:
            found[variant] = Counterfactual(variant, reason="the run had no prompt for this target")
        else:
            found[variant] = _run_variant(variant, backend, image, case, target_mask, prompts, objects, protocol,
                                          rules, progress, run_mask, run_stops)
    return found


def _run_variant(variant: str, backend: SegmentationBackend, image: np.ndarray, case: Case, gt: np.ndarray,
                 prompts: list[Prompt], objects: list[np.ndarray], protocol: Any, rules: Any,
                 progress: SliceProgress | None, run_mask: np.ndarray | None = None,
                 run_stops: list[dict] | None = None) -> Counterfactual:
    case_id = case.case_id
    if variant == "oracle_extent":
        mask = None
        if run_mask is not None and len(prompts) == 1:
            mask = extent_from_run(backend, image, case, prompts[0], objects[0], run_mask, run_stops or [], rules,
                                   case_id, progress)
        if mask is None:
            mask = extent_mask(backend, image, case, prompts, objects, rules, case_id, progress)
        return score(variant, mask, gt, case.kind)
    if variant == "oracle_box":
        margin = float(getattr(protocol, "margin", 0) or 0)
        return score(variant, box_mask(backend, image, case, prompts, objects, margin, case_id, progress), gt,
                     case.kind)
    moved = []
    for prompt, obj in zip(prompts, objects):
        best = largest_slice(obj)
        moved.append(prompt if best is None or best == prompt.slice_index else
                     moved_prompt(protocol, case, prompt, obj, best))
    if all(m is p for m, p in zip(moved, prompts)):
        return Counterfactual(variant, prompt_slice=prompts[0].slice_index, same_as_run=True)
    mask = segment_prompts(backend, image, case.kind, moved, case_id=case_id, progress=progress, rules=rules).mask
    return score(variant, mask, gt, case.kind, moved[0].slice_index)


__all__ = ["CORRECTING", "CORRECTIONS", "INCLUDES", "OFFICIAL_3D", "STAGE_WORDS", "VARIANTS", "VARIANT_WORDS", "Counterfactual",
           "box_mask", "counterfactuals", "extent_from_run", "extent_mask", "largest_slice", "moved_prompt", "not_applicable",
           "object_masks", "present_slices", "score"]
