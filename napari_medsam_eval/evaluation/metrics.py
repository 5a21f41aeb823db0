"""Segmentation metrics: Dice, IoU, normalised surface Dice (NSD), HD95.

Pure numpy/scipy; every function takes masks in array order and a spacing in
the same order (a :class:`~napari_medsam_eval.core.case.Spacing` or a plain
sequence, e.g. ``(z, y, x)`` in mm). Non-zero voxels are foreground. Aggregation
over cases lives in :mod:`napari_medsam_eval.evaluation.aggregate`.

Surface distances (NSD, HD95) come from :mod:`.surface_distance`.

Empty-mask rules (``A`` = prediction, ``B`` = ground truth), chosen so that an
empty prediction of an absent structure counts as perfect and any mismatch of
presence as worst:

=================  =====  =====  =====  ======
case               DSC    IoU    NSD    HD95
=================  =====  =====  =====  ======
both empty         1.0    1.0    1.0    0.0
exactly one empty  0.0    0.0    0.0    inf
=================  =====  =====  =====  ======

``surface_distance`` itself gives NaN for NSD and DSC when both are empty; for
one empty mask it gives NSD 0 and HD95 inf, as here. Per-slice Dice is NaN on
slices where both masks are empty (nothing to score there), see
:func:`compute_per_slice_dice`. :func:`compute_iou` names its both-empty value
``empty`` (default :data:`BOTH_EMPTY_IOU`, 1.0): the 2D prompt-mode study
passes ``empty=NOT_SCORED`` (NaN), since it never prompts an absent structure
and leaves such rows out of its means, as Mazurowski et al.'s ``np.nanmean``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..core.case import SPATIAL_AXES, Spacing
from .error_parts import error_parts
from .surface_distance import (  # noqa: F401 - the surface metrics are re-exported: callers score from here
    LITEMEDSAM_NSD_TOLERANCE_MM, SpacingLike, SurfaceDistances, spacing_tuple, as_mask_pair,
    check_tolerance, compute_hd95, compute_surface_dice, compute_surface_distances)
from ..core.errors import InputError
#: LiteMedSAM computes NSD only where DSC exceeds this (NSD is 0 otherwise)
LITEMEDSAM_NSD_DICE_THRESHOLD = 0.2
#: IoU of two empty masks by default: an absent structure left absent is perfect
BOTH_EMPTY_IOU = 1.0
#: a score that is not a score (both masks empty, where the caller scores nothing)
NOT_SCORED = float("nan")


# ---------------------------------------------------------- overlap metrics
def compute_dice(pred: np.ndarray, gt: np.ndarray) -> float:
    """Dice similarity coefficient ``2|A∩B| / (|A| + |B|)``; 1.0 when both are empty.

    The MedSAM2 evaluation card's code snippet divides ``2|A∩B|`` by the
    *union*, which is not Dice (it exceeds 1 for a perfect match); its formula
    text, implemented here, is right. Its "both empty -> 1.0" rule is kept.
    """
    p, g = as_mask_pair(pred, gt)
    total = np.count_nonzero(p) + np.count_nonzero(g)
    if total == 0:
        return 1.0
    return float(2.0 * np.count_nonzero(p & g) / total)


def compute_iou(pred: np.ndarray, gt: np.ndarray, empty: float = BOTH_EMPTY_IOU) -> float:
    """Intersection over union (Jaccard index) ``|A∩B| / |A∪B|``; ``empty`` when both are empty.

    ``empty`` defaults to 1.0 (:data:`BOTH_EMPTY_IOU`, the table of the module
    docstring); pass :data:`NOT_SCORED` (NaN) where an empty pair is no score.
    """
    p, g = as_mask_pair(pred, gt)
    union = np.count_nonzero(p | g)
    if union == 0:
        return float(empty)
    return float(np.count_nonzero(p & g) / union)


def compute_per_slice_dice(pred: np.ndarray, gt: np.ndarray, axis: int = 0) -> np.ndarray:
    """Dice of every slice along ``axis`` (float array of that axis' length).

    A slice where both masks are empty holds NaN rather than 1.0: a volume's
    background slices would otherwise swamp any per-slice summary. Use
    ``np.nan_to_num(d, nan=1.0)`` for the whole-mask convention.
    """
    p, g = as_mask_pair(pred, gt)
    if not -p.ndim <= axis < p.ndim:
        raise InputError(f"axis {axis} is out of range for {p.ndim}D masks")
    axis %= p.ndim
    other = tuple(i for i in range(p.ndim) if i != axis)
    inter = np.count_nonzero(p & g, axis=other).astype(float)
    total = (np.count_nonzero(p, axis=other) + np.count_nonzero(g, axis=other)).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, 2.0 * inter / total, np.nan)


# ---------------------------------------------------------------- per label
#: how a prediction-truth pair is scored, by the kind of case (:func:`score_pair`)
KINDS = ("volume", "video", "image")


def _video_surfaces(pred: np.ndarray, gt: np.ndarray, spacing: SpacingLike, tolerance_mm: float
                    ) -> tuple[float, float]:
    """NSD and HD95 of a video: per frame in 2D, averaged over the frames where either mask is present."""
    frames = np.flatnonzero(pred.reshape(len(pred), -1).any(axis=1) | gt.reshape(len(gt), -1).any(axis=1))
    if frames.size == 0:  # nothing anywhere: both empty, the "perfect" rule above
        return 1.0, 0.0
    scores = []
    for t in frames:
        surfaces = compute_surface_distances(pred[t], gt[t], spacing)
        scores.append((surfaces.surface_dice(tolerance_mm), surfaces.robust_hausdorff(95.0)))
    with np.errstate(invalid="ignore"):
        values = np.array(scores)
        return float(np.mean(values[:, 0])), float(np.mean(values[:, 1]))


def score_pair(pred: np.ndarray, gt: np.ndarray, kind: str, spacing: SpacingLike,
               tolerance_mm: float = LITEMEDSAM_NSD_TOLERANCE_MM, prompt_slice: int | None = None,
               ) -> dict[str, float | str]:
    """The one scorer of a binary prediction against a binary truth (``medsam-eval score`` and ``run``
    give these numbers, the widgets and studies too): Dice and IoU over the whole case; NSD at
    ``tolerance_mm`` and HD95 on the case's spacing for a volume (3D) and a 2D image; for a video
    (``T, H, W``, ``spacing`` the frame's ``y, x``) NSD and HD95 per frame in 2D, averaged over the frames
    where the prediction or the truth is present (time is not a length: a lost or spurious object makes
    that frame's NSD 0 and HD95 ``inf``). Voxel counts of both. And why it missed: the error split into
    parts that add up to ``1 - Dice`` (:func:`~.error_parts.error_parts`: ``error_<part>``,
    ``dominant_error``, ``error_slices``; ``prompt_slice_dice`` when ``prompt_slice`` is given)."""
    if kind not in KINDS:
        raise InputError(f"kind must be one of {KINDS}, got {kind!r}")
    pred, gt = as_mask_pair(np.asarray(pred, dtype=bool), np.asarray(gt, dtype=bool))
    tolerance_mm = check_tolerance(tolerance_mm)
    if kind == "video":
        nsd, hd95 = _video_surfaces(pred, gt, spacing, tolerance_mm)
    else:
        surfaces = compute_surface_distances(pred, gt, spacing)
        nsd, hd95 = surfaces.surface_dice(tolerance_mm), surfaces.robust_hausdorff(95.0)
        del surfaces  # (a surfel's distances and area: not held while the error parts are made)
    return {"dice": compute_dice(pred, gt), "iou": compute_iou(pred, gt), "nsd": nsd, "hd95": hd95,
            "gt_voxels": float(np.count_nonzero(gt)), "pred_voxels": float(np.count_nonzero(pred)),
            **error_parts(pred, gt, prompt_slice).columns()}


def binary_mask(mask: np.ndarray, role: str) -> np.ndarray:
    """``mask`` as bool when it is one: a bool array, or numbers that are each 0 or 1; an InputError naming
    ``role`` (``prediction``, ``ground truth``) for NaN or infinity, other values (0.5), or a label map of
    several labels (a mask is one target: ``labels == 2``). The API's check: its callers hand arrays, not files."""
    array = np.asarray(mask)
    if array.dtype == bool:
        return array
    if not (np.issubdtype(array.dtype, np.number)):
        raise InputError(f"{role} must be a numeric or bool mask, got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array).all():
        bad = int(np.count_nonzero(~np.isfinite(array)))
        raise InputError(f"{role} holds {bad} NaN or infinite value{'s' if bad > 1 else ''}: a mask holds 0 and 1 "
                         "only (a probability map must be thresholded first)")
    values = np.unique(array)
    if not set(values.tolist()) <= {0, 1}:
        shown = ", ".join(f"{v:g}" for v in values[:6].tolist()) + (", ..." if values.size > 6 else "")
        hint = (f"; it looks like a label map: take one target, e.g. ({role.replace(' ', '_')} == {int(values[-1])})"
                if np.all(values == np.round(values)) and values.size > 2 else
                " (a probability map must be thresholded first)")
        raise InputError(f"{role} holds values {shown}: a binary mask holds 0 and 1 only{hint}")
    return array.astype(bool)


def array_spacing(spacing: Any, kind: str, ndim: int) -> tuple[float, ...]:
    """The spacing of masks of ``kind`` in array order (a video's frames: ``y, x``), from a
    :class:`~napari_medsam_eval.core.case.Spacing` (which says its order) or, only where order cannot matter,
    a bare sequence of equal values; an InputError for a bare sequence of unequal values: SimpleITK and NIfTI
    give ``x, y, z`` where arrays are ``z, y, x``, and a reversed spacing scores NSD and HD95 silently wrong."""
    if isinstance(spacing, Spacing):
        expected = SPATIAL_AXES.get(kind)
        if expected is not None and spacing.axes != expected:
            raise InputError(f"spacing {spacing!r} is for {spacing.axes!r} axes, a {kind} has {expected!r}")
        values = tuple(spacing.values)
    else:
        values = tuple(float(v) for v in spacing)
        if len(set(values)) > 1:
            raise InputError(f"spacing {values} is a bare sequence whose order is unknown (SimpleITK and NIfTI "
                             "give x, y, z; arrays are z, y, x): pass case.spacing, Spacing.from_array_order(values, "
                             "'zyx') or Spacing.from_xyz(values)")
    if kind == "video" and len(values) == 3:
        values = values[1:]
    return spacing_tuple(values, ndim - (1 if kind == "video" else 0))


def compute_label_metrics(
    pred_labels: np.ndarray,
    gt_labels: np.ndarray,
    spacing: SpacingLike,
    labels: Sequence[int] | None = None,
    tolerance_mm: float = LITEMEDSAM_NSD_TOLERANCE_MM,
    nsd_dice_threshold: float | None = None,
    kind: str | None = None,
) -> dict[int, dict[str, float]]:
    """:func:`score_pair` of every label of two label maps.

    ``labels`` defaults to every non-zero value in either map (a label only in
    the prediction scores 0 / inf). ``kind``: how the maps are scored (default:
    ``image`` for 2D, ``volume`` for 3D; a video must be named); a video's
    ``spacing`` is its frames' ``y, x``. ``nsd_dice_threshold`` reproduces
    LiteMedSAM's ``compute_metrics.py`` when set to
    :data:`LITEMEDSAM_NSD_DICE_THRESHOLD` (0.2): NSD is then 0.0 wherever Dice
    is not above it. Other shapes than 2D and 3D give NaN for NSD and HD95.
    """
    pred_arr, gt_arr = np.asarray(pred_labels), np.asarray(gt_labels)
    as_mask_pair(pred_arr, gt_arr)  # shape check with argument names
    if labels is None:
        labels = sorted((set(np.unique(pred_arr).tolist()) | set(np.unique(gt_arr).tolist())) - {0})
    tolerance_mm = check_tolerance(tolerance_mm)
    kind = kind or ("image" if pred_arr.ndim == 2 else "volume")
    surface_ok = pred_arr.ndim in (2, 3)
    if surface_ok:
        spacing_tuple(spacing, pred_arr.ndim - (1 if kind == "video" else 0))
    results: dict[int, dict[str, float]] = {}
    for label in labels:
        p, g = pred_arr == label, gt_arr == label
        if surface_ok:
            row = score_pair(p, g, kind, spacing, tolerance_mm)
        else:
            row = {"dice": compute_dice(p, g), "iou": compute_iou(p, g), "nsd": float("nan"), "hd95": float("nan"),
                   "gt_voxels": float(np.count_nonzero(g)), "pred_voxels": float(np.count_nonzero(p))}
        if nsd_dice_threshold is not None and row["dice"] <= nsd_dice_threshold:
            row["nsd"] = 0.0
        results[int(label)] = row
    return results
