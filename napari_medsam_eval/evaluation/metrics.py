"""Segmentation metrics: Dice, IoU, normalised surface Dice (NSD), HD95.

Pure numpy/scipy; every function takes masks in array order and a spacing in
the same order (a :class:`~napari_medsam_eval.core.case.Spacing` or a plain
sequence, e.g. ``(z, y, x)`` in mm). Non-zero voxels are foreground. Aggregation
over cases lives in :mod:`napari_medsam_eval.evaluation.aggregate`.

Surface metrics reproduce DeepMind's ``surface_distance`` package (Nikolov et
al. 2021) to floating-point identity: surfaces are the marching-cubes surfels
(contour segments in 2D) of the 2x2x2 (2x2) corner neighbourhoods, each weighted
by its area in mm^2 (length in mm) under the given anisotropic spacing, and
distances come from scipy's exact Euclidean distance transform with
``sampling=spacing`` over the same corner grid (the union bounding box plus
one corner per axis; no wider margin is needed, since every surfel of both
masks lies inside it and the transform is exact). It is faster, not different:
one feature transform per surface with the distances evaluated only at the
other surface's surfels (same arithmetic, so bit-identical values), the area
table cached per spacing, and no sorting for NSD (that package sorts Python
tuples). The feature transform itself, which both share, is the floor.

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

import functools
import itertools
from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np


from .distance_transform import distances_both_ways
from ..core.case import Spacing

SpacingLike = Union[Spacing, Sequence[float]]

#: LiteMedSAM ``compute_metrics.py``: one NSD tolerance for every modality
LITEMEDSAM_NSD_TOLERANCE_MM = 2.0
#: LiteMedSAM computes NSD only where DSC exceeds this (NSD is 0 otherwise)
LITEMEDSAM_NSD_DICE_THRESHOLD = 0.2
#: IoU of two empty masks by default: an absent structure left absent is perfect
BOTH_EMPTY_IOU = 1.0
#: a score that is not a score (both masks empty, where the caller scores nothing)
NOT_SCORED = float("nan")


# --------------------------------------------------------------- validation
def _as_pair(pred: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both masks as bool arrays of one shape; ValueError names the culprit."""
    pred_arr, gt_arr = np.asarray(pred), np.asarray(gt)
    if pred_arr.shape != gt_arr.shape:
        raise ValueError(f"pred has shape {pred_arr.shape} but gt has shape {gt_arr.shape}; they must match")
    if pred_arr.ndim == 0:
        raise ValueError("pred and gt must be arrays with at least one dimension, got scalars")
    return pred_arr.astype(bool, copy=False), gt_arr.astype(bool, copy=False)


def _spacing_tuple(spacing: SpacingLike, ndim: int) -> tuple[float, ...]:
    values = tuple(float(v) for v in (spacing.values if isinstance(spacing, Spacing) else spacing))
    if len(values) != ndim:
        raise ValueError(f"spacing has {len(values)} values {values} for {ndim}D masks; give one per array axis")
    if any(not np.isfinite(v) or v <= 0 for v in values):
        raise ValueError(f"spacing must be positive and finite, got {values}")
    return values


def check_tolerance(tolerance_mm: float) -> float:
    """``tolerance_mm`` as a float; ValueError unless it is a finite number of mm, >= 0.

    A negative tolerance would score every surface 0 and NaN or infinity has
    no meaning. Zero is accepted, as ``surface_distance`` accepts it: only
    coinciding surfels count (the CLI, where 0 is a typo, asks for > 0).
    """
    try:
        value = float(tolerance_mm)
    except (TypeError, ValueError):
        raise ValueError(f"NSD tolerance must be a number of mm, got {tolerance_mm!r}") from None
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"NSD tolerance must be a finite, non-negative number of mm, got {value:g}")
    return value


# ---------------------------------------------------------- overlap metrics
def compute_dice(pred: np.ndarray, gt: np.ndarray) -> float:
    """Dice similarity coefficient ``2|A∩B| / (|A| + |B|)``; 1.0 when both are empty.

    The MedSAM2 evaluation card's code snippet divides ``2|A∩B|`` by the
    *union*, which is not Dice (it exceeds 1 for a perfect match); its formula
    text, implemented here, is right. Its "both empty -> 1.0" rule is kept.
    """
    p, g = _as_pair(pred, gt)
    total = np.count_nonzero(p) + np.count_nonzero(g)
    if total == 0:
        return 1.0
    return float(2.0 * np.count_nonzero(p & g) / total)


def compute_iou(pred: np.ndarray, gt: np.ndarray, empty: float = BOTH_EMPTY_IOU) -> float:
    """Intersection over union (Jaccard index) ``|A∩B| / |A∪B|``; ``empty`` when both are empty.

    ``empty`` defaults to 1.0 (:data:`BOTH_EMPTY_IOU`, the table of the module
    docstring); pass :data:`NOT_SCORED` (NaN) where an empty pair is no score.
    """
    p, g = _as_pair(pred, gt)
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
    p, g = _as_pair(pred, gt)
    if not -p.ndim <= axis < p.ndim:
        raise ValueError(f"axis {axis} is out of range for {p.ndim}D masks")
    axis %= p.ndim
    other = tuple(i for i in range(p.ndim) if i != axis)
    inter = np.count_nonzero(p & g, axis=other).astype(float)
    total = (np.count_nonzero(p, axis=other) + np.count_nonzero(g, axis=other)).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, 2.0 * inter / total, np.nan)


# ---------------------------------------------------------- surfel geometry
def _code_bit(offset: Sequence[int]) -> int:
    """Bit of a corner in the neighbour code: the first corner is the highest bit."""
    ndim = len(offset)
    index = int("".join(str(o) for o in offset), 2)
    return (1 << ndim) - 1 - index


@functools.lru_cache(maxsize=1)
def _unit_triangle_normals() -> tuple[np.ndarray, np.ndarray]:
    """Area vectors (unit spacing) of the marching-cubes triangles of all 256 cubes.

    ``surface_distance`` ships these as a table; here they are derived from
    scikit-image's Lorensen marching cubes, which gives the same triangles for
    codes with at most four inside corners. Its table is symmetric under
    complement (a code and its inverse have one surface), so codes with more
    than four inside corners use their complement. Returns (normals, codes).
    """
    from skimage.measure import marching_cubes  # local: only surface metrics need it

    normals, codes = [], []
    for code in range(1, 255):
        use = code if bin(code).count("1") <= 4 else 255 - code
        cube = np.zeros((2, 2, 2), np.float32)
        for offset in itertools.product((0, 1), repeat=3):
            cube[offset] = (use >> _code_bit(offset)) & 1
        verts, faces, _, _ = marching_cubes(cube, 0.5, method="lorensen")
        tri = verts.astype(np.float64)[faces]
        normals.append(0.5 * np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]))
        codes.append(np.full(len(faces), code))
    return np.concatenate(normals), np.concatenate(codes)


@functools.lru_cache(maxsize=64)
def _surfel_area_table(spacing: tuple[float, ...]) -> np.ndarray:
    """Surfel area (3D, mm^2) or contour length (2D, mm) for every neighbour code."""
    if len(spacing) == 3:
        normals, codes = _unit_triangle_normals()
        s0, s1, s2 = spacing
        # scaling the vertices by diag(s) scales an area vector by its cofactor
        areas = np.linalg.norm(normals * np.array([s1 * s2, s0 * s2, s0 * s1]), axis=1)
        return np.bincount(codes, weights=areas, minlength=256)
    vertical, horizontal = spacing
    half_diag = 0.5 * float(np.hypot(vertical, horizontal))
    table = np.zeros(16)
    for code in range(1, 15):
        on = [offset for offset in itertools.product((0, 1), repeat=2) if (code >> _code_bit(offset)) & 1]
        if len(on) != 2:  # one corner in or one out: a single diagonal cut
            table[code] = half_diag
        elif on[0][0] == on[1][0]:  # a row in: the contour runs horizontally
            table[code] = horizontal
        elif on[0][1] == on[1][1]:  # a column in
            table[code] = vertical
        else:  # opposite corners (saddle): two diagonal cuts
            table[code] = 2 * half_diag
    return table


def _neighbour_codes(crop: np.ndarray) -> np.ndarray:
    """Neighbour code of every voxel corner of ``crop`` (shape + 1 on each axis).

    Corner ``q`` sees voxels ``q - 1`` and ``q`` on each axis, outside voxels
    being background; the bits are those of ``surface_distance``'s correlation
    kernel (first corner highest). Built one axis at a time, last axis first,
    so each step doubles the bits: 3 shifts instead of 8.
    """
    codes = np.pad(crop.astype(np.uint8), 1)
    for step, axis in enumerate(reversed(range(crop.ndim))):
        low = [slice(None)] * crop.ndim
        high = list(low)
        low[axis], high[axis] = slice(None, -1), slice(1, None)
        codes = (codes[tuple(low)] << np.uint8(1 << step)) | codes[tuple(high)]
    return codes


@dataclass(frozen=True)
class SurfaceDistances:
    """Each surfel's distance (mm) to the other surface, and its area (mm^2 / mm).

    Unsorted, unlike ``surface_distance``'s dict (NSD needs no order). An empty
    mask has no surfels, and the other mask's distances are then ``inf``.
    """

    distances_gt_to_pred: np.ndarray
    distances_pred_to_gt: np.ndarray
    surfel_areas_gt: np.ndarray
    surfel_areas_pred: np.ndarray

    def surface_dice(self, tolerance_mm: float) -> float:
        """NSD at ``tolerance_mm`` (>= 0); the empty-mask rules of the module docstring."""
        tolerance_mm = check_tolerance(tolerance_mm)
        total = self.surfel_areas_gt.sum() + self.surfel_areas_pred.sum()
        if self.surfel_areas_gt.size == 0 and self.surfel_areas_pred.size == 0:
            return 1.0
        overlap = (self.surfel_areas_gt[self.distances_gt_to_pred <= tolerance_mm].sum()
                   + self.surfel_areas_pred[self.distances_pred_to_gt <= tolerance_mm].sum())
        return float(overlap / total)

    def robust_hausdorff(self, percent: float = 95.0) -> float:
        """Symmetric surfel-area-weighted ``percent`` percentile of distances (mm).

        Same definition as ``surface_distance.compute_robust_hausdorff``: in each
        direction, the distance of the first surfel (by increasing distance)
        where the cumulative area fraction reaches ``percent``; the max of both.
        """
        if not 0.0 <= percent <= 100.0:
            raise ValueError(f"percent must be in [0, 100], got {percent}")
        gt_n, pred_n = self.surfel_areas_gt.size, self.surfel_areas_pred.size
        if gt_n == 0 and pred_n == 0:
            return 0.0
        if gt_n == 0 or pred_n == 0:
            return float("inf")
        return float(max(_weighted_percentile(self.distances_gt_to_pred, self.surfel_areas_gt, percent),
                         _weighted_percentile(self.distances_pred_to_gt, self.surfel_areas_pred, percent)))


def _weighted_percentile(distances: np.ndarray, areas: np.ndarray, percent: float) -> float:
    order = np.lexsort((areas, distances))  # (distance, area) order, as the reference sorts
    cumulative = np.cumsum(areas[order]) / areas.sum()
    idx = min(int(np.searchsorted(cumulative, percent / 100.0)), distances.size - 1)
    return float(distances[order[idx]])


def _bounding_box(mask: np.ndarray) -> tuple[slice, ...] | None:
    """Slices of the smallest box holding ``mask``'s True voxels; None when empty.

    The first axis is found on the whole array, the others only inside that
    range: one pass over a large volume with a small object instead of ndim.
    """
    first = np.flatnonzero(mask.reshape(mask.shape[0], -1).any(axis=1))
    if first.size == 0:
        return None
    box = [slice(int(first[0]), int(first[-1]) + 1)]
    inner = mask[box[0]]
    for axis in range(1, mask.ndim):
        hits = np.flatnonzero(np.any(inner, axis=tuple(i for i in range(mask.ndim) if i != axis)))
        box.append(slice(int(hits[0]), int(hits[-1]) + 1))
    return tuple(box)


def compute_surface_distances(pred: np.ndarray, gt: np.ndarray, spacing: SpacingLike) -> SurfaceDistances:
    """Surfel distances between two 2D or 3D masks, for NSD and HD at any tolerance.

    Compute once and call :meth:`SurfaceDistances.surface_dice` for several
    tolerances, or :meth:`SurfaceDistances.robust_hausdorff`.
    """
    p, g = _as_pair(pred, gt)
    if p.ndim not in (2, 3):
        raise ValueError(f"surface metrics need 2D or 3D masks, got pred and gt of shape {p.shape}")
    sampling = _spacing_tuple(spacing, p.ndim)
    empty = np.zeros(0)
    box = _bounding_box(p | g)
    if box is None:
        return SurfaceDistances(empty, empty, empty, empty)
    table = _surfel_area_table(sampling)
    codes_g, codes_p = _neighbour_codes(g[box]), _neighbour_codes(p[box])
    full = (1 << (1 << p.ndim)) - 1
    border_g = (codes_g != 0) & (codes_g != full)
    border_p = (codes_p != 0) & (codes_p != full)
    gt_to_pred, pred_to_gt = distances_both_ways(border_g, border_p, sampling)
    return SurfaceDistances(
        distances_gt_to_pred=gt_to_pred,
        distances_pred_to_gt=pred_to_gt,
        surfel_areas_gt=table[codes_g[border_g]],
        surfel_areas_pred=table[codes_p[border_p]],
    )


def compute_surface_dice(pred: np.ndarray, gt: np.ndarray, spacing: SpacingLike,
                         tolerance_mm: float = LITEMEDSAM_NSD_TOLERANCE_MM) -> float:
    """Normalised surface Dice at ``tolerance_mm``: the fraction of both surfaces
    (by area) lying within the tolerance of the other surface.

    Equals ``surface_distance.compute_surface_dice_at_tolerance`` except that
    two empty masks score 1.0 (it gives NaN). ``tolerance_mm`` must be finite
    and not negative (:func:`check_tolerance`).
    """
    tolerance_mm = check_tolerance(tolerance_mm)
    return compute_surface_distances(pred, gt, spacing).surface_dice(tolerance_mm)


def compute_hd95(pred: np.ndarray, gt: np.ndarray, spacing: SpacingLike, percent: float = 95.0) -> float:
    """95th-percentile symmetric Hausdorff distance in mm, surfel-area weighted.

    Equals ``surface_distance.compute_robust_hausdorff(..., 95)``; 0.0 when
    both masks are empty, ``inf`` when exactly one is.
    """
    return compute_surface_distances(pred, gt, spacing).robust_hausdorff(percent)


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
               tolerance_mm: float = LITEMEDSAM_NSD_TOLERANCE_MM) -> dict[str, float]:
    """The one scorer of a binary prediction against a binary truth (``medsam-eval score`` and ``run``
    give these numbers, the widgets and studies too): Dice and IoU over the whole case; NSD at
    ``tolerance_mm`` and HD95 on the case's spacing for a volume (3D) and a 2D image; for a video
    (``T, H, W``, ``spacing`` the frame's ``y, x``) NSD and HD95 per frame in 2D, averaged over the frames
    where the prediction or the truth is present (time is not a length: a lost or spurious object makes
    that frame's NSD 0 and HD95 ``inf``). Voxel counts of both."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    pred, gt = _as_pair(np.asarray(pred, dtype=bool), np.asarray(gt, dtype=bool))
    tolerance_mm = check_tolerance(tolerance_mm)
    if kind == "video":
        nsd, hd95 = _video_surfaces(pred, gt, spacing, tolerance_mm)
    else:
        surfaces = compute_surface_distances(pred, gt, spacing)
        nsd, hd95 = surfaces.surface_dice(tolerance_mm), surfaces.robust_hausdorff(95.0)
    return {"dice": compute_dice(pred, gt), "iou": compute_iou(pred, gt), "nsd": nsd, "hd95": hd95,
            "gt_voxels": float(np.count_nonzero(gt)), "pred_voxels": float(np.count_nonzero(pred))}


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
    _as_pair(pred_arr, gt_arr)  # shape check with argument names
    if labels is None:
        labels = sorted((set(np.unique(pred_arr).tolist()) | set(np.unique(gt_arr).tolist())) - {0})
    tolerance_mm = check_tolerance(tolerance_mm)
    kind = kind or ("image" if pred_arr.ndim == 2 else "volume")
    surface_ok = pred_arr.ndim in (2, 3)
    if surface_ok:
        _spacing_tuple(spacing, pred_arr.ndim - (1 if kind == "video" else 0))
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
