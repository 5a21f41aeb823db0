"""Metrics: hand-computed cases, empty-mask rules, errors, and agreement with
DeepMind's ``surface_distance`` on real volumes.

Only the agreement tests need ``surface_distance`` (a test extra): they take
the ``sd`` fixture, which skips them alone when it is missing; every
hand-computed test runs without it.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from scipy import ndimage

from napari_medsam_eval.core.case import Spacing
from napari_medsam_eval.evaluation.error_parts import ROW_COLUMNS
from napari_medsam_eval.evaluation.metrics import (
    LITEMEDSAM_NSD_DICE_THRESHOLD,
    NOT_SCORED,
    compute_dice,
    compute_hd95,
    compute_iou,
    compute_label_metrics,
    compute_per_slice_dice,
    compute_surface_dice,
    compute_surface_distances,
)



@pytest.fixture(scope="module")
def sd():
    """DeepMind's ``surface_distance``, the reference of the agreement tests (skipped without it)."""
    return pytest.importorskip("surface_distance")


def _square(shape, rows, cols):
    mask = np.zeros(shape, bool)
    mask[rows[0]:rows[1], cols[0]:cols[1]] = True
    return mask


# ------------------------------------------------------------- Dice and IoU
def test_dice_iou_two_overlapping_squares():
    gt = _square((10, 10), (2, 6), (2, 6))  # 16 pixels
    pred = _square((10, 10), (3, 7), (3, 7))  # 16 pixels, 3x3 = 9 shared
    assert compute_dice(pred, gt) == pytest.approx(2 * 9 / 32)
    assert compute_iou(pred, gt) == pytest.approx(9 / 23)


def test_dice_iou_3d_and_label_values_as_foreground():
    gt = np.zeros((4, 4, 4), np.uint8)
    gt[1:3, 1:3, 1:3] = 7  # 8 voxels, any non-zero value is foreground
    pred = np.zeros_like(gt)
    pred[1:3, 1:3, 1:2] = 1  # 4 voxels, all inside gt
    assert compute_dice(pred, gt) == pytest.approx(2 * 4 / 12)
    assert compute_iou(pred, gt) == pytest.approx(4 / 8)
    assert compute_dice(gt, gt) == 1.0 and compute_iou(gt, gt) == 1.0


def test_dice_is_not_the_evaluation_cards_snippet():
    # the MedSAM2 card's code divides 2|A∩B| by the union: 2.0 for a perfect match
    mask = _square((5, 5), (1, 4), (1, 4))
    assert compute_dice(mask, mask) == 1.0


def test_per_slice_dice_nan_where_both_empty():
    gt = np.zeros((3, 4, 4), bool)
    pred = np.zeros_like(gt)
    gt[0, :2, :2] = True
    pred[0, :2, :1] = True  # slice 0: 2*2/(4+2)
    pred[1, 0, 0] = True  # slice 1: gt empty -> 0; slice 2: both empty -> NaN
    dice = compute_per_slice_dice(pred, gt)
    assert dice[0] == pytest.approx(4 / 6) and dice[1] == 0.0 and np.isnan(dice[2])
    along_last = compute_per_slice_dice(pred, gt, axis=-1)
    assert along_last.shape == (4,) and along_last[0] == pytest.approx(2 * 2 / (2 + 3))  # x=0 also holds slice 1's voxel


# ------------------------------------------------------------ empty masks
@pytest.mark.parametrize("shape", [(6, 7), (5, 6, 7)])
def test_empty_mask_rules(shape):
    empty = np.zeros(shape, bool)
    full = np.zeros(shape, bool)
    full[(slice(1, 4),) * len(shape)] = True
    spacing = (1.0,) * len(shape)
    assert compute_dice(empty, empty) == 1.0 and compute_iou(empty, empty) == 1.0
    assert np.isnan(compute_iou(empty, empty, empty=NOT_SCORED))  # the prompt study's rule, by name
    assert compute_iou(full, full, empty=NOT_SCORED) == 1.0
    assert compute_surface_dice(empty, empty, spacing, 2.0) == 1.0
    assert compute_hd95(empty, empty, spacing) == 0.0
    for pred, gt in [(empty, full), (full, empty)]:
        assert compute_dice(pred, gt) == 0.0 and compute_iou(pred, gt) == 0.0
        assert compute_iou(pred, gt, empty=NOT_SCORED) == 0.0
        assert compute_surface_dice(pred, gt, spacing, 2.0) == 0.0
        assert compute_hd95(pred, gt, spacing) == math.inf


# ------------------------------------------------------------------ errors
def test_shape_and_spacing_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"pred has shape \(4, 4\) but gt has shape \(4, 5\)"):
        compute_dice(np.zeros((4, 4)), np.zeros((4, 5)))
    with pytest.raises(ValueError, match="pred has shape"):
        compute_iou(np.zeros((2, 4, 4)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="spacing has 2 values"):
        compute_surface_dice(np.zeros((3, 4, 4)), np.zeros((3, 4, 4)), (1.0, 1.0), 1.0)
    with pytest.raises(ValueError, match="spacing must be positive"):
        compute_hd95(np.zeros((4, 4)), np.zeros((4, 4)), (1.0, 0.0))
    with pytest.raises(ValueError, match="2D or 3D"):
        compute_hd95(np.zeros((2, 2, 2, 2)), np.zeros((2, 2, 2, 2)), (1.0,) * 4)
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        compute_per_slice_dice(np.zeros((2, 2, 2)), np.zeros((2, 2, 2)), axis=3)


# ------------------------------------------------------ surfaces by hand
def test_surface_dice_and_hd95_of_a_shifted_square_by_hand():
    """6x6 square shifted one row; rows 3 mm apart, columns 1 mm.

    gt contour: corners on the left/right sides are 3 mm long (5 each side),
    top/bottom ones 1 mm (5 each), the 4 box corners 0.5*sqrt(10) each; total
    40 + 2*sqrt(10). Distances to the shifted contour: sides 0, bottom two box
    corners 0, top edge and top box corners 3, bottom edge 1, 2, 3, 2, 1 (the
    in-plane distance to a side, capped by the 3 mm row step). The shift is a
    mirror image of itself, so pred -> gt is the same.
    """
    gt = _square((12, 12), (2, 8), (2, 8))
    pred = _square((12, 12), (3, 9), (2, 8))
    spacing, root10 = (3.0, 1.0), math.sqrt(10)
    total = 40 + 2 * root10
    assert compute_surface_dice(pred, gt, spacing, 2.0) == pytest.approx((34 + root10) / total)
    assert compute_surface_dice(pred, gt, spacing, 1.0) == pytest.approx((32 + root10) / total)
    assert compute_surface_dice(pred, gt, spacing, 0.5) == pytest.approx((30 + root10) / total)
    assert compute_surface_dice(pred, gt, spacing, 3.0) == 1.0
    surfaces = compute_surface_distances(pred, gt, spacing)
    assert surfaces.surfel_areas_gt.sum() == pytest.approx(total)
    # cumulative length: 0 mm up to 0.716, 1 mm to 0.759, 2 mm to 0.802, then 3 mm
    assert compute_hd95(pred, gt, spacing) == 3.0
    assert surfaces.robust_hausdorff(75) == 1.0 and surfaces.robust_hausdorff(78) == 2.0
    # the same shift with the spacing reversed is a 1 mm step
    assert compute_hd95(pred, gt, spacing[::-1]) == 1.0


def test_cube_surface_area_by_hand():
    """Marching-cubes surface of a k^3 box: flat faces inset by half a voxel,
    45-degree strips along the edges, a triangle at each vertex."""
    k, (sz, sy, sx) = 5, (3.0, 1.0, 0.5)
    cube = np.zeros((9, 9, 9), bool)
    cube[2:2 + k, 2:2 + k, 2:2 + k] = True
    faces = 2 * (k - 1) ** 2 * (sy * sx + sz * sx + sz * sy)
    edges = 4 * (k - 1) * 0.5 * (sx * math.hypot(sz, sy) + sy * math.hypot(sz, sx) + sz * math.hypot(sy, sx))
    vertices = 8 * math.sqrt((sy * sx) ** 2 + (sz * sx) ** 2 + (sz * sy) ** 2) / 8
    area = compute_surface_distances(cube, cube, (sz, sy, sx)).surfel_areas_gt.sum()
    assert area == pytest.approx(faces + edges + vertices)


def test_shifted_cube_honours_anisotropic_spacing():
    gt = np.zeros((10, 10, 10), bool)
    gt[2:8, 2:8, 2:8] = True
    along_z = np.roll(gt, 1, axis=0)
    spacing = Spacing.from_array_order((3.0, 1.0, 0.5), "zyx")
    # every surfel is within one z step (3 mm) and the flat bottom face, more
    # than 5% of the area, is exactly 3 mm away
    assert compute_hd95(along_z, gt, spacing) == 3.0
    assert compute_hd95(along_z, gt, spacing, percent=100) == 3.0
    assert compute_surface_dice(along_z, gt, spacing, 3.0) == 1.0
    assert compute_surface_dice(along_z, gt, spacing, 2.9) < 1.0
    along_x = np.roll(gt, 1, axis=2)
    assert compute_hd95(along_x, gt, spacing) == 0.5
    assert compute_surface_dice(along_x, gt, spacing, 0.5) == 1.0
    assert compute_surface_dice(along_x, gt, spacing, 0.49) < 1.0
    # a Spacing and a plain sequence in array order are the same thing
    assert compute_hd95(along_z, gt, (3.0, 1.0, 0.5)) == compute_hd95(along_z, gt, spacing)
    assert compute_surface_dice(gt, gt, spacing, 0.0) == 1.0 and compute_hd95(gt, gt, spacing) == 0.0


def test_area_tables_match_surface_distance(sd):
    from surface_distance import lookup_tables

    from napari_medsam_eval.evaluation.surface_distance import _surfel_area_table

    for spacing in [(1.0, 1.0, 1.0), (5.0, 0.3144, 0.3144), (0.7, 2.5, 1.3)]:
        ref = lookup_tables.create_table_neighbour_code_to_surface_area(spacing)
        np.testing.assert_allclose(_surfel_area_table(spacing), ref, rtol=0, atol=1e-12)
    for spacing in [(1.0, 1.0), (3.0, 0.7)]:
        ref = lookup_tables.create_table_neighbour_code_to_contour_length(spacing)
        np.testing.assert_allclose(_surfel_area_table(spacing), ref, rtol=0, atol=1e-12)


# ------------------------------------------------------------- per label
def test_label_metrics():
    gt = np.zeros((6, 10, 10), np.uint8)
    gt[1:5, 1:5, 1:5] = 1
    gt[1:5, 6:9, 6:9] = 2
    pred = np.zeros_like(gt)
    pred[1:5, 1:5, 2:5] = 1  # 48 of gt's 64
    pred[0, 0, 9] = 3  # a label only in the prediction
    spacing = (2.0, 1.0, 1.0)
    result = compute_label_metrics(pred, gt, spacing)
    assert sorted(result) == [1, 2, 3]
    one = result[1]
    assert one["dice"] == pytest.approx(2 * 48 / 112) and one["iou"] == pytest.approx(48 / 64)
    assert one["gt_voxels"] == 64 and one["pred_voxels"] == 48
    assert one["nsd"] == pytest.approx(compute_surface_dice(pred == 1, gt == 1, spacing, 2.0))
    assert one["hd95"] == compute_hd95(pred == 1, gt == 1, spacing) == 1.0
    assert result[2]["dice"] == 0.0 and result[2]["nsd"] == 0.0 and result[2]["hd95"] == math.inf
    assert result[3]["gt_voxels"] == 0 and result[3]["pred_voxels"] == 1
    assert compute_label_metrics(pred, gt, spacing, labels=[4])[4]["dice"] == 1.0
    assert set(compute_label_metrics(pred, gt, spacing, labels=[1])[1]) == {
        "dice", "iou", "nsd", "hd95", "gt_voxels", "pred_voxels", *ROW_COLUMNS}
    assert one["dominant_error"] == "under" and one["error_under"] == pytest.approx(16 / 112)


def test_label_metrics_litemedsam_nsd_rule():
    gt = np.zeros((8, 8), np.uint8)
    gt[1:7, 1:7] = 1
    pred = np.zeros_like(gt)
    pred[1:2, 1:4] = 1  # Dice 6/39 < 0.2, but its contour touches gt's
    loose = compute_label_metrics(pred, gt, (1.0, 1.0), tolerance_mm=2.0)[1]
    strict = compute_label_metrics(pred, gt, (1.0, 1.0), tolerance_mm=2.0,
                                   nsd_dice_threshold=LITEMEDSAM_NSD_DICE_THRESHOLD)[1]
    assert loose["dice"] < 0.2 < loose["nsd"]
    assert strict["nsd"] == 0.0 and strict["hd95"] == loose["hd95"]


# ------------------------------------- agreement with surface_distance
def _reference(sd, pred, gt, spacing, tolerances):
    dists = sd.compute_surface_distances(gt.astype(bool), pred.astype(bool), tuple(spacing))
    nsd = [sd.compute_surface_dice_at_tolerance(dists, t) for t in tolerances]
    return nsd, sd.compute_robust_hausdorff(dists, 95), dists


def _assert_agrees(sd, pred, gt, spacing, tolerances=(1.0, 2.0)):
    ref_nsd, ref_hd95, ref = _reference(sd, pred, gt, spacing, tolerances)
    ours = compute_surface_distances(pred, gt, spacing)
    for tol, expected in zip(tolerances, ref_nsd):
        assert abs(ours.surface_dice(tol) - expected) < 1e-6
    assert 0.0 < min(ref_nsd) < 1.0  # a real test, not a trivial one
    assert abs(ours.robust_hausdorff(95) - ref_hd95) < 1e-6
    for percent in (50, 100):
        assert abs(ours.robust_hausdorff(percent) - sd.compute_robust_hausdorff(ref, percent)) < 1e-6
    # the same surfels with the same distances (the reference sorts them)
    np.testing.assert_array_equal(np.sort(ours.distances_gt_to_pred), ref["distances_gt_to_pred"])
    np.testing.assert_allclose(np.sort(ours.surfel_areas_gt).sum(), ref["surfel_areas_gt"].sum(), rtol=1e-12)
    np.testing.assert_array_equal(np.sort(ours.distances_pred_to_gt), ref["distances_pred_to_gt"])


def _hippocampus(shared_data: Path, name: str) -> tuple[np.ndarray, tuple[float, ...]]:
    image = sitk.ReadImage(str(shared_data / "hippocampus_mri" / "labelsTr" / f"{name}.nii.gz"))
    return sitk.GetArrayFromImage(image).astype(np.uint8), image.GetSpacing()[::-1]


def test_agrees_with_surface_distance_on_hippocampus(sd, shared_data):
    labels, spacing = _hippocampus(shared_data, "hippocampus_001")
    other, _ = _hippocampus(shared_data, "hippocampus_004")
    gt = labels == 1
    crop = tuple(slice(0, min(a, b)) for a, b in zip(labels.shape, other.shape))
    another_case = np.zeros_like(gt)
    another_case[crop] = (other == 1)[crop]
    for pred in [np.roll(ndimage.binary_dilation(gt), 1, axis=1), ndimage.binary_erosion(gt), another_case]:
        _assert_agrees(sd, pred, gt, spacing)
    # 2D: one slice, with the in-plane spacing made anisotropic
    z = int(np.argmax(gt.sum(axis=(1, 2))))
    _assert_agrees(sd, np.roll(gt[z], 2, axis=1), gt[z], (0.8, 1.7))


def test_agrees_with_surface_distance_on_deeplesion_ct(sd, shared_data):
    paths = sorted((shared_data / "deeplesion_ct_npz").glob("*.npz"))
    assert paths
    for path in paths[:3]:
        with np.load(path) as npz:
            gt = npz["gts"] == 1
            spacing = tuple(float(v) for v in npz["spacing"][::-1])  # stored x, y, z
        assert spacing[0] == 5.0 and spacing[1] < 1.0
        _assert_agrees(sd, np.roll(ndimage.binary_erosion(gt, iterations=2), 3, axis=2), gt, spacing)
        _assert_agrees(sd, ndimage.binary_dilation(gt, iterations=2), gt, spacing, tolerances=(1.0, 2.0, 5.0))
