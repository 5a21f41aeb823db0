"""Scores of one target's prediction: the metric columns of a result row.

* Dice and IoU over the whole case (all slices/frames together).
* Volumes and 2D images: NSD at the tolerance and HD95 on the case's own
  spacing (mm; 2D images without spacing: pixels), as
  :func:`napari_medsam_eval.metrics.compute_surface_distances` defines them.
* Videos: time is not a length, so NSD and HD95 are computed per frame in 2D
  (the frame's ``y, x`` spacing) and averaged over the frames where the
  prediction or the ground truth is present. A frame with exactly one of them
  empty scores NSD 0 and HD95 ``inf``, so a lost or spurious object makes the
  case's HD95 ``inf``, as a whole-volume HD95 would.
* Per-slice Dice along axis 0 (NaN where both are empty).

Some valid results mean nothing, and :func:`result_notes` says so (the ``notes``
column of a row, a warning on the command line): an image with no intensity
variation (the model saw nothing to segment), a prompt that gave an empty mask.
"""
from __future__ import annotations

import numpy as np

from ..case import Case
from ..metrics import (LITEMEDSAM_NSD_TOLERANCE_MM, compute_dice, compute_iou, compute_per_slice_dice,
                       compute_surface_distances)
from .schema import slice_dice_json

#: NSD tolerance of every row (LiteMedSAM's compute_metrics.py: 2 mm for all modalities)
NSD_TOLERANCE_MM = LITEMEDSAM_NSD_TOLERANCE_MM


def _surface_scores(pred: np.ndarray, gt: np.ndarray, spacing: tuple[float, ...],
                    tolerance_mm: float) -> tuple[float, float]:
    surfaces = compute_surface_distances(pred, gt, spacing)
    return surfaces.surface_dice(tolerance_mm), surfaces.robust_hausdorff(95.0)


def _video_surface_scores(pred: np.ndarray, gt: np.ndarray, spacing: tuple[float, ...],
                          tolerance_mm: float) -> tuple[float, float]:
    frames = np.flatnonzero(pred.reshape(len(pred), -1).any(axis=1) | gt.reshape(len(gt), -1).any(axis=1))
    if frames.size == 0:  # nothing anywhere: both empty, the "perfect" rule of metrics.py
        return 1.0, 0.0
    scores = np.array([_surface_scores(pred[t], gt[t], spacing, tolerance_mm) for t in frames])
    with np.errstate(invalid="ignore"):
        return float(np.mean(scores[:, 0])), float(np.mean(scores[:, 1]))


def score_target(pred: np.ndarray, gt: np.ndarray, case: Case,
                 tolerance_mm: float = NSD_TOLERANCE_MM) -> dict[str, object]:
    """The metric columns of a row for one binary prediction against one binary ground truth."""
    pred = np.asarray(pred, dtype=bool)
    gt = np.asarray(gt, dtype=bool)
    spacing = tuple(case.spacing.values)
    if case.kind == "video":
        nsd, hd95 = _video_surface_scores(pred, gt, spacing[1:], tolerance_mm)
    else:
        nsd, hd95 = _surface_scores(pred, gt, spacing, tolerance_mm)
    per_slice = compute_per_slice_dice(pred, gt, axis=0) if case.kind != "image" else [compute_dice(pred, gt)]
    return {
        "dice": compute_dice(pred, gt),
        "iou": compute_iou(pred, gt),
        "nsd": nsd,
        "hd95": hd95,
        "nsd_tolerance_mm": float(tolerance_mm),
        "gt_voxels": int(np.count_nonzero(gt)),
        "pred_voxels": int(np.count_nonzero(pred)),
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
