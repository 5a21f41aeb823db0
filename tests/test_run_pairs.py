"""Two runs side by side, the core (no napari): pairs, unpaired rows, the A/B map and its slice.

Two real ``box`` runs (the prompt box itself, instant) with margins 0 and 10
on 4 hippocampus cases, made with the real CLI; the widget test
(tests/test_widgets_two_runs.py) does the same with LiteMedSAM.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.benchmark import ResultStore, load_table, write_tables
from napari_medsam_eval.evaluation.mask_comparison import binary_target
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.io import read_label
from napari_medsam_eval.report import compare_runs
from napari_medsam_eval.evaluation.mask_comparison import AB_A_ONLY, AB_B_ONLY, AB_BOTH, AB_NONE, ab_overlay, most_different_slice
from napari_medsam_eval.evaluation.mask_comparison import largest_error_slice, middle_slice
from napari_medsam_eval.report.run_pairs import load_case_pair, open_run_pair
from margin_runs import margin_runs


def drop_case(run, case_id: str) -> None:
    """Remove ``case_id``'s rows from a run folder (its JSONL and tables)."""
    store = ResultStore(run)
    store.drop_cases({case_id})
    write_tables(run, store.recover())


@pytest.fixture(scope="module")
def runs(shared_data, tmp_path_factory):
    return margin_runs(shared_data / "hippocampus_mri", tmp_path_factory.mktemp("box-runs"), "box", 4)


def test_ab_overlay_values_and_slice():
    a = np.zeros((4, 5, 5), bool)
    b = np.zeros((4, 5, 5), bool)
    a[1, 1:3, 1:3] = True         # slice 1: same in both
    b[1, 1:3, 1:3] = True
    a[2, 0, :] = True             # slice 2: A has 4 voxels B does not, B 2 A does not, 1 shared
    b[2, 0, 0] = True
    b[2, 4, 3:] = True
    b[3, 0, 0] = True             # slice 3: one voxel only in B
    overlay = ab_overlay(a, b)
    assert overlay.dtype == np.uint8
    np.testing.assert_array_equal(overlay == AB_BOTH, a & b)
    np.testing.assert_array_equal(overlay == AB_A_ONLY, a & ~b)
    np.testing.assert_array_equal(overlay == AB_B_ONLY, b & ~a)
    np.testing.assert_array_equal(overlay == AB_NONE, ~a & ~b)
    assert most_different_slice(a, b) == 2  # 4 + 2 voxels differ there, 1 on slice 3, 0 elsewhere
    assert most_different_slice(a, a) == 2  # no difference: the slice with most foreground (5 voxels, 4 on 1)
    assert most_different_slice(np.zeros_like(a), np.zeros_like(a)) is None
    assert most_different_slice(a[2], b[2]) is None  # 2D: no slice to choose
    with pytest.raises(ValueError, match="shape"):
        ab_overlay(a, b[:3])


def test_the_slice_shown_is_on_the_target():
    """A run filling whole slices away from the target (the box baseline propagated) differs most there, but
    the slice shown is the target's slice where A and B differ most (the issue: slice 0, no target in view)."""
    truth = np.zeros((7, 4, 4), bool)
    truth[2:5, 1:3, 1:3] = True        # the target: slices 2-4, middle 3
    a, b = truth.copy(), np.zeros_like(truth)
    b[[0, 1, 5, 6]] = True             # B: whole slices without the target (16 voxels each, A has none)
    b[2:5, 1:3, 1:] = True             # and a bit more than the target on its slices (2 voxels each)
    b[4, 0, 0] = True                  # one more on slice 4
    assert most_different_slice(a, b) == 0  # without the truth: the first of the largest (what the view showed)
    assert most_different_slice(a, b, truth) == 4
    b[4, 0, 0] = False                 # a tie on the target's slices: the one nearest its middle
    assert most_different_slice(a, b, truth) == 3
    assert most_different_slice(a, a, truth) == 3  # no difference: the most foreground, nearest the middle
    with pytest.raises(ValueError, match="shape"):
        most_different_slice(a, b, truth[:3])

    assert largest_error_slice(b, truth) == 3  # FP + FN: 2 on each target slice, 16 on the others
    pred = truth.copy()
    pred[4, 0, :] = True               # 4 FP on slice 4, 3 FN on slice 2
    pred[2, 1, 1:] = False
    pred[0] = True                     # 16 FP away from the target: the target's slices come first
    assert largest_error_slice(pred, truth) == 4
    assert largest_error_slice(truth, truth) == 3 and largest_error_slice(pred[:, 0], truth[:, 0]) is None
    assert largest_error_slice(pred, np.zeros_like(truth)) == 0  # no target: the largest error anywhere
    assert middle_slice(truth) == 3 and middle_slice(np.zeros_like(truth)) is None and middle_slice(truth[3]) is None
    split = np.zeros((9, 2, 2), bool)
    split[[1, 2, 7]] = True            # the median slice holding it (never an empty one between)
    assert middle_slice(split) == 2


def test_pairs_are_the_compare_numbers_sorted_by_difference(runs):
    run_a, run_b = runs
    pair = open_run_pair(run_a, run_b)
    expected = compare_runs(run_a, run_b)  # what `medsam-eval compare A B` prints (its defaults)
    pd.testing.assert_frame_equal(pair.comparison, expected)
    a, b = load_table(run_a), load_table(run_b)
    assert len(pair.pairs) == len(a) == len(b) == 8 and pair.unpaired.empty
    assert pair.pairs["diff"].is_monotonic_increasing
    for row in pair.pairs.itertuples():
        dice_a = a.loc[(a.case_id == row.case_id) & (a.target_label == row.target_label), "dice"].item()
        dice_b = b.loc[(b.case_id == row.case_id) & (b.target_label == row.target_label), "dice"].item()
        assert (row.a, row.b) == (pytest.approx(dice_a), pytest.approx(dice_b))
        assert row.diff == pytest.approx(dice_b - dice_a)
        assert row.label_name in ("Anterior", "Posterior", "anterior", "posterior")
    described_a, described_b = pair.describe
    assert "box" in described_a and '"margin": 0' in described_a and '"margin": 10' in described_b


def test_unpaired_rows_are_listed_with_why(runs, tmp_path):
    run_a, run_b = runs
    copy = tmp_path / "B-missing"
    shutil.copytree(run_b, copy)
    dropped = sorted(load_table(copy)["case_id"])[0]
    drop_case(copy, dropped)
    pair = open_run_pair(run_a, copy)
    assert len(pair.pairs) == 6 and len(pair.unpaired) == 2
    assert set(pair.unpaired["case_id"]) == {dropped}
    assert set(pair.unpaired["reason"]) == {"only in A (no row in B)"}
    assert pair.comparison.iloc[-1]["n_only_a"] == 2
    pd.testing.assert_frame_equal(pair.comparison, compare_runs(run_a, copy))
    row_a, row_b = pair.rows((dropped, pair.unpaired["task"][0], pair.unpaired["target_label"][0]))
    assert row_a is not None and row_b is None
    opened = load_case_pair(run_a, copy, row_a, row_b)
    assert opened.overlay is None and opened.prediction_a is not None
    assert opened.notes == ["run B has no row for this case and target"]


def test_different_datasets_are_refused_naming_both(runs, shared_data, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(runs[1], other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["config"]["dataset_path"] = str(shared_data / "brats2021_flair")  # as if run there
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="different datasets") as error:
        open_run_pair(runs[0], other)
    assert "hippocampus_mri" in str(error.value) and "brats2021_flair" in str(error.value)
    assert str(runs[0]) in str(error.value) and str(other) in str(error.value)


def test_a_case_pair_opens_with_its_map_and_missing_predictions_are_said(runs, tmp_path):
    run_a, run_b = runs
    pair = open_run_pair(run_a, run_b)
    key = tuple(pair.pairs.iloc[0][["case_id", "task", "target_label"]])  # the largest drop B - A
    row_a, row_b = pair.rows(key)
    opened = load_case_pair(run_a, run_b, row_a, row_b)
    assert opened.notes == []
    target = int(key[2])
    mask_a = binary_target(read_label(run_a / row_a["prediction_path"]).array, target, binary_fallback=True)
    mask_b = binary_target(read_label(run_b / row_b["prediction_path"]).array, target, binary_fallback=True)
    np.testing.assert_array_equal(opened.overlay, ab_overlay(mask_a, mask_b))
    differ = (mask_a ^ mask_b).sum(axis=(1, 2))
    assert differ.max() > 0 and opened.slice_index == int(np.argmax(differ))
    assert opened.run_case().prediction is opened.prediction_a and opened.run_case().case.case_id == key[0]

    copy = tmp_path / "B-no-prediction"
    shutil.copytree(run_b, copy)
    (copy / row_b["prediction_path"]).unlink()
    opened = load_case_pair(run_a, copy, row_a, row_b)
    assert opened.overlay is None and opened.prediction_b is None and opened.prediction_a is not None
    (note,) = opened.notes
    assert note.startswith("run B: prediction file not found") and row_b["prediction_path"] in note
