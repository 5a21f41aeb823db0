"""Scores of one target's prediction: the metric columns of a result row.

* Dice and IoU over the whole case (all slices/frames together).
* NSD and HD95 by the kind of case, as :func:`napari_medsam_eval.evaluation.metrics.score_pair`
  defines them (``medsam-eval score`` scores with it too): volumes and 2D images on
  their own spacing; videos per frame in 2D (the frame's ``y, x`` spacing), averaged
  over the frames where the prediction or the ground truth is present (a frame with
  exactly one of them empty scores NSD 0 and HD95 ``inf``).
* Per-slice Dice along axis 0 (NaN where both are empty).
* Why it missed: the error's parts (:mod:`.error_parts`), which add up to ``1 - Dice``.

Some valid results mean nothing, and :func:`result_notes` says so (the ``notes``
column of a row, a warning on the command line): an image with no intensity
variation (the model saw nothing to segment), a prompt that gave an empty mask.
"""
from __future__ import annotations

import json
import math
from typing import Sequence

import numpy as np

from ..core.case import Case
from .error_parts import ROW_COLUMNS
from .metrics import LITEMEDSAM_NSD_TOLERANCE_MM, compute_dice, compute_per_slice_dice, score_pair

#: NSD tolerance of every row (LiteMedSAM's compute_metrics.py: 2 mm for all modalities)
NSD_TOLERANCE_MM = LITEMEDSAM_NSD_TOLERANCE_MM


def slice_dice_json(values: Sequence[float] | np.ndarray) -> str:
    """Per-slice Dice as a compact JSON list: 4 decimals, ``null`` for NaN."""
    return json.dumps([None if not math.isfinite(float(v)) else round(float(v), 4) for v in values],
                      separators=(",", ":"))


def score_target(pred: np.ndarray, gt: np.ndarray, case: Case,
                 tolerance_mm: float = NSD_TOLERANCE_MM, prompt_slice: int | None = None) -> dict[str, object]:
    """The metric columns of a row for one binary prediction against one binary ground truth
    (:func:`~napari_medsam_eval.evaluation.metrics.score_pair`, the scorer ``medsam-eval score`` uses too),
    with the error parts (:data:`~.error_parts.ROW_COLUMNS`; the prompt slice's own DSC when given)."""
    pred = np.asarray(pred, dtype=bool)
    gt = np.asarray(gt, dtype=bool)
    spacing = tuple(case.spacing.values)
    scores = score_pair(pred, gt, case.kind, spacing[1:] if case.kind == "video" else spacing, tolerance_mm,
                        prompt_slice=None if case.kind == "image" else prompt_slice)
    per_slice = compute_per_slice_dice(pred, gt, axis=0) if case.kind != "image" else [compute_dice(pred, gt)]
    return {
        **{column: scores[column] for column in ROW_COLUMNS},
        "dice": scores["dice"],
        "iou": scores["iou"],
        "nsd": scores["nsd"],
        "hd95": scores["hd95"],
        "nsd_tolerance_mm": float(tolerance_mm),
        "gt_voxels": int(scores["gt_voxels"]),
        "pred_voxels": int(scores["pred_voxels"]),
        "slice_dice": slice_dice_json(per_slice),
    }


#: the notes of a result that is valid but means little (the ``notes`` column, CLI warnings)
NOTE_CONSTANT_IMAGE = "constant image: every voxel has the same intensity, so the model saw nothing to segment"
NOTE_EMPTY_PREDICTION = "the prompt gave an empty mask"


def result_notes(image: np.ndarray, prediction: np.ndarray) -> list[str]:
    """What makes a result of ``image`` (before intensity preparation) meaningless: see the module doc."""
    notes = []
    array = np.asarray(image)
    if array.size and array.min() == array.max():
        notes.append(NOTE_CONSTANT_IMAGE)
    if not np.asarray(prediction).any():
        notes.append(NOTE_EMPTY_PREDICTION)
    return notes


def lesion_overlap(truth: np.ndarray, prediction: np.ndarray, number: int) -> tuple[float, float]:
    """DSC and IoU of true lesion ``number`` (the ``number``-th connected component of the bool mask ``truth``,
    scan order, as :func:`~.lesion_maps.components` numbers them; or, when ``truth`` is an instance map, its value
    ``number``) with the predicted lesion (a component of ``prediction``) that overlaps it most by IoU;
    ``(0.0, 0.0)`` when no predicted voxel lies on it. What a matching rule saw of a lesion it counted missed."""
    from scipy import ndimage

    from .lesion_maps import components

    truth = np.asarray(truth)
    lesions = components(truth.astype(bool))[0] if truth.dtype == bool else truth
    lesion = lesions == int(number)
    box = ndimage.find_objects(lesion.astype(np.uint8))
    if not box or box[0] is None:
        return 0.0, 0.0
    predicted, _ = components(np.asarray(prediction, dtype=bool))
    touching = np.unique(predicted[lesion])
    touching = touching[touching > 0]
    if touching.size == 0:
        return 0.0, 0.0
    sizes = np.bincount(predicted.ravel())
    size = int(lesion.sum())
    best = (0.0, 0.0)
    for p in touching:
        shared = int(np.count_nonzero(predicted[lesion] == p))
        iou = shared / (size + int(sizes[p]) - shared)
        if iou > best[1]:
            best = (2.0 * shared / (size + int(sizes[p])), iou)
    return best


def missed_words(dice: float, iou: float, threshold: float = 0.5, match: str = "iou") -> str:
    """What the matching rule saw of a true lesion it counted missed: ``"found at DSC 0.54 (IoU 0.37), below the
    IoU 0.5 match"`` when a predicted lesion overlaps it, ``"missed: no predicted lesion touches it"`` when none
    does (the only way to miss under the ``overlap`` rule)."""
    if iou <= 0.0:
        return "missed: no predicted lesion touches it"
    def shown(value: float) -> str:  # two decimals; two significant digits below 0.01 (a lesion barely touched)
        return f"{value:.2f}" if value >= 0.01 else f"{value:.2g}"

    below = f"below the IoU {threshold:g} match" if match == "iou" else "not matched"
    return f"found at DSC {shown(dice)} (IoU {shown(iou)}), {below}"
