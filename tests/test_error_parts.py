"""The error split into parts (evaluation/error_parts.py): each part known by construction, the parts adding up
to 1 - DSC on random and on real masks, the empty-mask rules of the metrics."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from scipy import ndimage

from napari_medsam_eval.cli import main
from napari_medsam_eval.evaluation.error_parts import (
    OK, OK_DICE, PART_COLUMNS, PARTS, ROW_COLUMNS, error_parts, parse_where, parts_text, slice_ranges)
from napari_medsam_eval.evaluation.metrics import compute_dice
from napari_medsam_eval.io import read_label
from napari_medsam_eval.benchmark.store import load_table

SHAPE = (20, 40, 40)
REPO = Path(__file__).resolve().parents[1]


def cylinder(first: int, last: int, radius: float = 8.0, centre: tuple[float, float] = (20, 20)) -> np.ndarray:
    """A cylinder along the slices ``first``..``last`` (inclusive)."""
    yy, xx = np.mgrid[:SHAPE[1], :SHAPE[2]]
    disc = (yy - centre[0]) ** 2 + (xx - centre[1]) ** 2 <= radius ** 2
    volume = np.zeros(SHAPE, dtype=bool)
    volume[first:last + 1] = disc
    return volume


def only(parts, name: str) -> None:
    """Every part but ``name`` is empty, and ``name`` holds the whole error."""
    assert {p: v for p, v in parts.voxels.items() if p != name} == {p: 0 for p in PARTS if p != name}
    assert parts.shares[name] == pytest.approx(1 - parts.dice, abs=1e-12) and parts.shares[name] > 0


def test_a_prediction_two_slices_too_long_is_leak_only():
    truth, pred = cylinder(5, 9), cylinder(5, 11)
    parts = error_parts(pred, truth)
    only(parts, "leak")
    area = int(truth[5].sum())
    assert parts.voxels["leak"] == 2 * area and parts.shares["leak"] == pytest.approx(2 / 12)
    assert parts.slices["leak"] == [(10, 11)] and parts.dominant == "leak"


def test_a_prediction_stopping_three_slices_early_is_missed_slices_only():
    truth, pred = cylinder(5, 14), cylinder(5, 11)
    parts = error_parts(pred, truth, prompt_slice=8)
    only(parts, "missed_slices")
    assert parts.shares["missed_slices"] == pytest.approx(3 / 17)
    assert parts.slices["missed_slices"] == [(12, 14)] and parts.prompt_slice_dice == 1.0


def test_a_second_blob_on_a_slice_is_off_target():
    truth = cylinder(5, 14)
    pred = truth | cylinder(9, 9, radius=3, centre=(5, 33))
    parts = error_parts(pred, truth)
    only(parts, "off_target")
    assert parts.slices["off_target"] == [(9, 9)] and parts.largest_slice["off_target"] == 9


def test_eroded_is_under_and_dilated_is_over():
    truth = cylinder(5, 14)
    in_slice = np.zeros((3, 3, 3), dtype=bool)
    in_slice[1] = ndimage.generate_binary_structure(2, 1)
    eroded = ndimage.binary_erosion(truth, in_slice, iterations=2)
    dilated = ndimage.binary_dilation(truth, in_slice, iterations=2)
    only(error_parts(eroded, truth), "under")
    only(error_parts(dilated, truth), "over")
    assert error_parts(dilated, truth).slices["over"] == [(5, 14)]


def test_a_piece_touching_the_truth_stays_over_and_the_dominant_part_is_the_largest():
    truth = cylinder(5, 14)
    pred = cylinder(5, 14, radius=10) | cylinder(15, 15)  # a border too wide everywhere, one slice too long
    parts = error_parts(pred, truth)
    assert parts.voxels["off_target"] == 0 and parts.voxels["over"] > parts.voxels["leak"] > 0
    assert parts.dominant == "over" and parts.dice < OK_DICE


def test_a_good_result_is_ok():
    truth = cylinder(5, 14)
    parts = error_parts(cylinder(5, 14, radius=8.3), truth)
    assert parts.dice >= OK_DICE and parts.dominant == OK


@pytest.mark.parametrize("seed", range(5))
def test_the_parts_add_up_to_one_minus_dice_on_random_masks(seed):
    rng = np.random.default_rng(seed)
    smooth = lambda: ndimage.gaussian_filter(rng.random(SHAPE), 2) > 0.5  # noqa: E731 - blobs, gaps, strays
    pred, truth = smooth(), smooth()
    truth[:3] = False  # slices with only prediction
    pred[-3:] = False  # slices with only truth
    parts = error_parts(pred, truth)
    assert sum(parts.shares.values()) == pytest.approx(1 - compute_dice(pred, truth), abs=1e-9)
    assert parts.dice == pytest.approx(compute_dice(pred, truth), abs=1e-12)
    fp, fn = int((pred & ~truth).sum()), int((truth & ~pred).sum())
    assert parts.voxels["leak"] + parts.voxels["off_target"] + parts.voxels["over"] == fp
    assert parts.voxels["missed_slices"] + parts.voxels["under"] == fn
    assert all(parts.voxels[p] > 0 for p in PARTS)  # every rule met on these masks


def test_the_parts_add_up_on_real_masks(shared_data):
    """Hippocampus MRI: the anterior label taken as a prediction of the posterior one, and a shifted truth."""
    path = sorted((shared_data / "hippocampus_mri" / "labelsTr").glob("*.nii.gz"))[0]
    labels = read_label(path).array
    anterior, posterior = labels == 1, labels == 2
    for pred, truth in ((anterior, posterior), (np.roll(posterior, 2, axis=1), posterior),
                        (posterior[:, :, :], np.roll(posterior, 3, axis=0))):
        parts = error_parts(pred, truth)
        assert sum(parts.shares.values()) == pytest.approx(1 - compute_dice(pred, truth), abs=1e-9)
    assert error_parts(anterior, posterior).dominant != OK


def test_a_2d_image_is_one_slice():
    truth = cylinder(0, 0)[0]
    assert error_parts(np.zeros_like(truth), truth).shares["missed_slices"] == 1.0
    two_blobs = truth | cylinder(0, 0, radius=3, centre=(5, 33))[0]
    only(error_parts(two_blobs, truth), "off_target")
    assert error_parts(two_blobs, truth).slices["off_target"] == [(0, 0)]


def test_empty_masks_follow_the_metrics_rules():
    empty, truth = np.zeros(SHAPE, dtype=bool), cylinder(5, 14)
    both = error_parts(empty, empty)
    assert both.dice == 1.0 and sum(both.shares.values()) == 0 and both.dominant == OK
    assert error_parts(empty, truth).shares["missed_slices"] == 1.0  # DSC 0: all missed
    assert error_parts(truth, empty).shares["leak"] == 1.0  # DSC 0: all leak
    assert error_parts(empty, truth).dominant == "missed_slices"


def test_columns_and_refusals():
    columns = error_parts(cylinder(5, 11), cylinder(5, 9), prompt_slice=7).columns()
    assert tuple(columns) == ROW_COLUMNS == tuple(f"error_{p}" for p in PARTS) + (
        "dominant_error", "prompt_slice_dice", "error_slices")
    assert columns["dominant_error"] == "leak" and columns["prompt_slice_dice"] == 1.0
    assert parse_where(columns["error_slices"]) == {"leak": {"largest": 10, "ranges": [[10, 11]]}}
    assert parse_where("") == {} and parse_where("not json") == {}
    with pytest.raises(ValueError, match="differs"):
        error_parts(np.zeros((3, 4, 4)), np.zeros((3, 4, 5)))
    with pytest.raises(ValueError, match="outside"):
        error_parts(np.zeros((3, 4, 4)), np.zeros((3, 4, 4)), prompt_slice=3)
    assert slice_ranges(np.array([2, 3, 4, 9])) == [(2, 4), (9, 9)] and slice_ranges(np.array([])) == []


def test_score_prints_why_each_label_missed(tmp_path, capsys):
    """`medsam-eval score PRED GT`: the parts of each label after its metrics, in words and as CSV columns."""
    gt_path = REPO / "sample_data" / "phantom_ct" / "label.nii.gz"
    truth = sitk.ReadImage(str(gt_path))
    labels = sitk.GetArrayFromImage(truth)
    kidney = labels == 2
    pred = np.where(kidney, 0, labels)
    kept = np.zeros_like(kidney)
    kept[24:] = ndimage.binary_erosion(kidney)[24:]
    pred[kept] = 2
    pred_path = tmp_path / "pred.nii.gz"
    image = sitk.GetImageFromArray(pred.astype(labels.dtype))
    image.CopyInformation(truth)
    sitk.WriteImage(image, str(pred_path))
    assert main(["score", str(pred_path), str(gt_path), "--labels", "2"]) == 0
    printed = capsys.readouterr().out
    parts = error_parts(pred == 2, kidney)
    assert parts.dominant == "missed_slices" and parts.shares["under"] > 0
    assert f"missed slices {parts.shares['missed_slices']:.3f} (slices " in printed
    assert "dominant: missed slices" in printed
    assert main(["score", str(pred_path), str(gt_path), "--labels", "2", "--csv"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()[:2]
    assert set(PART_COLUMNS) | {"dominant_error", "error_slices"} <= set(header.split(","))
    assert ",missed_slices," in row


def test_every_row_of_a_real_run_has_parts_adding_up(shared_data, tmp_path):
    """A box-model run over three hippocampus cases: each scored row's parts add up to 1 - dice (1e-9), its
    dominant part is the largest share, and the words say so; an old row without the columns reads n/a."""
    out = tmp_path / "run"
    assert main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "3", "--out", str(out),
                 "--no-report", "--quiet"]) == 0
    table = load_table(out)
    scored = table[table["status"] == "ok"]
    assert len(scored) == 6
    for _, row in scored.iterrows():
        assert sum(row[c] for c in PART_COLUMNS) == pytest.approx(1 - row["dice"], abs=1e-9)
        largest = max(PARTS, key=lambda p: row[f"error_{p}"])
        assert row["dominant_error"] in (OK, largest)
        assert row["prompt_slice_dice"] == row["prompt_slice_dice"]  # a volume's prompt slice is scored
        assert parse_where(row["error_slices"]) or row["dice"] == 1.0
        assert "dominant: " in parts_text(row.to_dict())
    assert parts_text({"dice": 0.5}) == "n/a"
