"""Metric conventions: the same DSC, IoU, NSD and HD95 as other tools compute them, to match a paper's number.

``medsam-eval`` (the default) is surface-distance's (DeepMind): surfaces are the faces between object and
background voxels, each weighted by its area (surfels of a marching-cubes table), distances from each
surfel to the other surface; HD95 is the larger of the two directions' area-weighted 95th percentiles; NSD
the share of both surfaces' area within the tolerance. Two empty masks score DSC, IoU and NSD 1 here (a
correct "nothing there"; surface-distance gives NaN for NSD), HD95 0; one empty mask scores DSC 0 and HD95
infinite.

``monai`` is MONAI's (``monai.metrics``, 1.6): the surface is the *boundary voxels*, ``mask XOR
binary_erosion(mask)`` (6-connected erosion, the image's outside counted as background), each voxel
counted once whatever its faces' areas; distances are exact Euclidean distances between voxel centres
(scaled by the spacing); HD95 is the larger of the two directions' 95th percentiles with linear
interpolation (``torch.quantile``) of those unweighted distances; NSD (``compute_surface_dice``, no
sub-voxels) the count of boundary voxels within the tolerance over all boundary voxels. Both empty: NaN for
every metric (its DiceMetric ignores an empty ground truth); one empty: HD95 infinite, NSD 0.

``cvpr25`` is the CVPR 2024/2025 challenge scripts': surface-distance's DSC and NSD, NSD taken as 0 where
DSC <= 0.2 (:mod:`.cvpr25`); the spacing as the npz stores it is the caller's to pass.

The differences on hard cases are measured by ``scripts/metric_conformance.py`` (docs/metrics.md).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .metrics import compute_dice, compute_iou
from .surface_distance import compute_hd95, compute_surface_dice

#: the conventions ``medsam-eval score --metrics-convention`` takes
CONVENTIONS = ("medsam-eval", "monai", "cvpr25")
METRICS = ("dice", "iou", "nsd", "hd95")


def boundary_voxels(mask: np.ndarray) -> np.ndarray:
    """MONAI's edges: the voxels of ``mask`` with a 6-connected neighbour outside it (or at the image's edge)."""
    from scipy.ndimage import binary_erosion

    mask = np.asarray(mask, bool)
    return mask ^ binary_erosion(mask)


def _directed(from_edges: np.ndarray, to_edges: np.ndarray, spacing: Sequence[float]) -> np.ndarray:
    """MONAI's ``get_surface_distance``: each ``from`` boundary voxel's distance to the nearest ``to`` one."""
    from scipy.spatial import KDTree

    if not to_edges.any():
        return np.full(int(from_edges.sum()), np.inf, dtype=np.float32)
    if not from_edges.any():  # as MONAI: infinite, one per voxel of the other boundary
        return np.full(int(to_edges.sum()), np.inf, dtype=np.float32)
    scale = np.asarray(spacing, dtype=np.float64)
    to_points = np.argwhere(to_edges).astype(np.float64) * scale
    from_points = np.argwhere(from_edges).astype(np.float64) * scale
    return KDTree(to_points, leafsize=32).query(from_points, k=1)[0].astype(np.float32)


def _quantile(distances: np.ndarray, percent: float) -> float:
    if distances.size == 0:
        return float("nan")
    import torch  # the same float32 linear interpolation as MONAI's torch.quantile

    return float(torch.quantile(torch.from_numpy(distances), percent / 100.0))


def monai_scores(pred: np.ndarray, gt: np.ndarray, spacing: Sequence[float], tolerance_mm: float) -> dict[str, float]:
    """DSC, IoU, NSD and HD95 by MONAI's conventions (module doc)."""
    pred, gt = np.asarray(pred, bool), np.asarray(gt, bool)
    if not pred.any() and not gt.any():
        return {metric: float("nan") for metric in METRICS}
    edges_pred, edges_gt = boundary_voxels(pred), boundary_voxels(gt)
    to_gt, to_pred = _directed(edges_pred, edges_gt, spacing), _directed(edges_gt, edges_pred, spacing)
    counted = len(to_gt) + len(to_pred)
    nsd = float((np.sum(to_gt <= tolerance_mm) + np.sum(to_pred <= tolerance_mm)) / counted) if counted else float("nan")
    hd95 = float(np.max([_quantile(d, 95.0) for d in (to_gt, to_pred)]))  # a NaN wins, as in torch.max
    dice = float(compute_dice(pred, gt)) if gt.any() else float("nan")
    return {"dice": dice, "iou": float(compute_iou(pred, gt)) if gt.any() else float("nan"), "nsd": nsd,
            "hd95": float(hd95)}


def convention_scores(pred: np.ndarray, gt: np.ndarray, spacing: Sequence[float], tolerance_mm: float,
                      convention: str = "medsam-eval") -> dict[str, float]:
    """DSC, IoU, NSD at ``tolerance_mm`` and HD95 of a binary pair by ``convention`` (:data:`CONVENTIONS`)."""
    if convention not in CONVENTIONS:
        raise ValueError(f"metrics convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    if convention == "monai":
        return monai_scores(pred, gt, spacing, tolerance_mm)
    pred, gt = np.asarray(pred, bool), np.asarray(gt, bool)
    dice = float(compute_dice(pred, gt))
    nsd = float(compute_surface_dice(pred, gt, tuple(spacing), tolerance_mm))
    if convention == "cvpr25" and dice <= 0.2:
        nsd = 0.0
    return {"dice": dice, "iou": float(compute_iou(pred, gt)), "nsd": nsd,
            "hd95": float(compute_hd95(pred, gt, tuple(spacing)))}


__all__ = ["CONVENTIONS", "METRICS", "boundary_voxels", "convention_scores", "monai_scores"]
