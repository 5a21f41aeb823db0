"""Opening a row of a real run again: its case, the prediction the run saved, the prompt it gave."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.benchmark import load_table, run_benchmark
from napari_medsam_eval.benchmark.manifest import MANIFEST_FILE
from napari_medsam_eval.benchmark.open_row import RunCase, load_run_case
from napari_medsam_eval.datasets import get_layout
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.io import read_label
from napari_medsam_eval.evaluation.error_parts import error_parts, parse_where, part_masks
from napari_medsam_eval.evaluation.metrics import compute_dice
from napari_medsam_eval.core.prompt import prompts_from_json

CASES = ("hippocampus_001", "hippocampus_004")


@pytest.fixture(scope="module")
def hippo2(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """Two hippocampus pairs and dataset.json (the MSD layout), in a folder the tests may break."""
    source, root = shared_data / "hippocampus_mri", tmp_path_factory.mktemp("data") / "hippo2"
    (root / "imagesTr").mkdir(parents=True)
    (root / "labelsTr").mkdir()
    shutil.copy(source / "dataset.json", root)
    for case in CASES:
        for folder in ("imagesTr", "labelsTr"):
            shutil.copy(source / folder / f"{case}.nii.gz", root / folder)
    return root


@pytest.fixture(scope="module")
def box_run(tmp_path_factory: pytest.TempPathFactory, hippo2: Path) -> tuple[Path, pd.DataFrame]:
    out = tmp_path_factory.mktemp("runs") / "box"
    return out, run_benchmark(hippo2, out, "box", save_predictions=True)


def test_every_row_opens_with_its_case_prediction_and_prompt(box_run: tuple[Path, pd.DataFrame],
                                                             hippo2: Path) -> None:
    out, table = box_run
    assert len(table) == 4 and (table["status"] == "ok").all()
    layout = get_layout("msd")
    refs = {ref.case_id: ref for ref in layout.list_cases(hippo2)}
    for row in table.to_dict("records"):
        loaded = load_run_case(out, row)
        assert isinstance(loaded, RunCase) and loaded.note == "" and loaded.row == row
        case = layout.load(refs[row["case_id"]])
        assert loaded.case.case_id == row["case_id"]
        np.testing.assert_array_equal(loaded.case.image, case.image)
        np.testing.assert_array_equal(loaded.case.label, case.label)
        saved = read_label(out / row["prediction_path"]).array
        assert loaded.prediction is not None and loaded.prediction.shape == case.spatial_shape
        np.testing.assert_array_equal(loaded.prediction, saved)
        (expected,) = prompts_from_json(row["prompt"])
        assert loaded.prompt == expected and loaded.prompt.target_label == row["target_label"]
        assert loaded.prompt.slice_index == row["prompt_slice"] and loaded.prompt.boxes
        # the slice to show: where the saved prediction's dominant error part (why it missed) is largest
        truth, predicted = case.label == row["target_label"], saved == row["target_label"]
        parts = error_parts(predicted, truth)
        assert parts.dominant != "ok"
        dominant = part_masks(predicted, truth)[parts.dominant]
        per_slice = dominant.sum(axis=(1, 2))
        assert per_slice.max() > 0 and per_slice[loaded.view_slice] == per_slice.max()
        if row["target_label"] == 2:  # the last label wins overlaps in the saved map: its DSC is exact
            dice = compute_dice(loaded.prediction == 2, case.label == 2)
            assert dice == pytest.approx(row["dice"], abs=1e-9)


def test_a_missing_prediction_is_a_note_naming_the_file(box_run: tuple[Path, pd.DataFrame],
                                                        tmp_path: Path) -> None:
    out, table = box_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    row = table.iloc[0].to_dict()
    (copy / row["prediction_path"]).unlink()
    loaded = load_run_case(copy, row)
    assert loaded.prediction is None and loaded.case.case_id == row["case_id"] and loaded.prompt is not None
    assert "not found" in loaded.note and str(copy / row["prediction_path"]) in loaded.note
    # without a prediction: where the row says its dominant part is largest; a row without parts: the prompt's slice
    assert loaded.view_slice == parse_where(row["error_slices"])[row["dominant_error"]]["largest"]
    old_row = {**row, "dominant_error": "", "error_slices": ""}
    assert load_run_case(copy, old_row).view_slice == row["prompt_slice"]
    unsaved = load_run_case(copy, {**row, "prediction_path": ""})
    assert unsaved.prediction is None and "no prediction saved" in unsaved.note


def test_errors_name_the_file_or_folder(box_run: tuple[Path, pd.DataFrame], hippo2: Path, tmp_path: Path) -> None:
    out, table = box_run
    row = table.iloc[0].to_dict()
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    manifest = json.loads((copy / MANIFEST_FILE).read_text())

    with pytest.raises(DataError, match=f"no {MANIFEST_FILE}") as error:
        load_run_case(tmp_path, row)
    assert error.value.path == tmp_path

    (copy / MANIFEST_FILE).write_text(json.dumps({k: v for k, v in manifest.items() if k != "config"}))
    with pytest.raises(DataError, match="names no dataset") as error:
        load_run_case(copy, row)
    assert error.value.path == copy / MANIFEST_FILE

    moved = {**manifest, "config": {**manifest["config"], "dataset_path": str(tmp_path / "moved")}}
    (copy / MANIFEST_FILE).write_text(json.dumps(moved))
    with pytest.raises(DataError, match="dataset folder is not found") as error:
        load_run_case(copy, row)
    assert error.value.path == tmp_path / "moved"

    (copy / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="'hippocampus_999' is no longer in the dataset") as error:
        load_run_case(copy, {**row, "case_id": "hippocampus_999"})
    assert error.value.path == hippo2
    # the untouched folder still opens the row
    assert load_run_case(copy, row).prediction is not None
    assert len(load_table(copy)) == len(table)
