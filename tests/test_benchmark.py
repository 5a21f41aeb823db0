"""The benchmark runner: rows, failures, seeds, workers, cancel, the CLI, and LiteMedSAM for real."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.propagation.rules import STOP_REASONS
from napari_medsam_eval.benchmark import COLUMNS, comparable, load_table, run_benchmark
from napari_medsam_eval.benchmark.timing import SegmentTimer
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.models import build_backend

from test_datasets import write_camus, write_sunseg_tree


@pytest.fixture()
def hippo3(tmp_path: Path, shared_data: Path) -> Path:
    """Three hippocampus pairs and dataset.json in tmp (the MSD layout)."""
    source, root = shared_data / "hippocampus_mri", tmp_path / "hippo3"
    (root / "imagesTr").mkdir(parents=True)
    (root / "labelsTr").mkdir()
    shutil.copy(source / "dataset.json", root)
    for case in ("hippocampus_001", "hippocampus_004", "hippocampus_007"):
        for folder in ("imagesTr", "labelsTr"):
            shutil.copy(source / folder / f"{case}.nii.gz", root / folder)
    return root


def test_rows_schema_and_run_folder(hippo3: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # the legacy rule (stop at an empty slice) keeps the oracle exact: the measured default also
    # stops where consecutive slices overlap little (IoU < 0.3), true ground truth included
    table = run_benchmark(hippo3, out, "oracle", save_predictions=True, propagation="legacy")
    assert list(table.columns) == list(COLUMNS)
    assert len(table) == 6 and (table["status"] == "ok").all() and (table["error"] == "").all()
    assert table["task"].tolist() == ["hippo3/anterior", "hippo3/posterior"] * 3
    keys = table[["case_id", "target_label"]]
    assert keys.equals(keys.sort_values(["case_id", "target_label"]))
    row = table.iloc[0]
    assert row["kind"] == "volume" and row["model"] == "oracle" and row["protocol"] == "medsam2"
    assert row["nsd_tolerance_mm"] == 2.0 and row["seed"] == 0 and json.loads(row["attributes"]) == {"split": "train"}
    slice_dice = json.loads(row["slice_dice"])
    assert len(slice_dice) == row["n_slices"] and None in slice_dice and 1.0 in slice_dice
    prompt = json.loads(row["prompt"])
    assert prompt[0]["slice_index"] == row["prompt_slice"] and prompt[0]["target_label"] == 1
    assert row["gt_voxels"] == row["pred_voxels"] > 0 and table["dice"].min() > 0.9
    # every propagated row says where each direction stopped, and why
    for _, each in table.iterrows():
        stops = json.loads(each["stops"])
        assert [s["direction"] for s in stops] == ["up", "down"]
        assert all(s["reason"] in ("empty", "end") and s["reason"] in STOP_REASONS for s in stops), stops
        assert all(s["at"] is None or s["at"] != each["prompt_slice"] for s in stops), stops
        scores = json.loads(each["slice_scores"])
        assert len(scores) == each["n_slices"]
    assert row["time_encoder_s"] == 0.0 and row["time_total_s"] > 0
    assert (out / row["prediction_path"]).is_file() and row["prediction_path"].startswith("predictions/")
    for name in ("results.jsonl", "results.csv", "results.parquet", "manifest.json", "run.log"):
        assert (out / name).is_file(), name
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), table)
    pd.testing.assert_frame_equal(load_table(out), table)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["model"]["name"] == "oracle"
    assert manifest["dataset"]["layout"] == "msd" and manifest["dataset"]["file_count"] == 6
    assert manifest["protocol"] == {"name": "medsam2", "options": {
        "seed": 0, "key_slice": "middle", "video_frame": "first-present", "margin": 0, "largest_component": True,
        "native_seed": "box", "video_prompt": "box"}}
    assert manifest["environment"]["python"] and manifest["counts"] == {"cases_done": 3, "rows": 6, "failed_rows": 0}
    assert "hippocampus_004 dice anterior=" in (out / "run.log").read_text()


def test_a_corrupt_case_fails_alone(hippo3: Path, tmp_path: Path) -> None:
    image = hippo3 / "imagesTr" / "hippocampus_004.nii.gz"
    image.write_bytes(image.read_bytes()[: image.stat().st_size // 2])
    table = run_benchmark(hippo3, tmp_path / "run", "oracle")
    failed = table[table["status"] == "failed"]
    assert failed["case_id"].tolist() == ["hippocampus_004"] * 2
    assert failed["task"].tolist() == ["hippo3/anterior", "hippo3/posterior"]
    assert all("hippocampus_004.nii.gz" in e and len(e) > 40 for e in failed["error"]), failed["error"].tolist()
    assert failed["dice"].isna().all()
    assert (table[table["status"] == "ok"]["case_id"].unique() == ["hippocampus_001", "hippocampus_007"]).all()
    assert "hippocampus_004 anterior failed" in (tmp_path / "run" / "run.log").read_text()


def test_same_seed_same_table_other_seed_other_prompts(shared_data: Path, tmp_path: Path) -> None:
    dataset = shared_data / "hippocampus_mri"
    runs = [run_benchmark(dataset, tmp_path / f"run{i}", "box", "box-jitter", seed=seed, limit=3)
            for i, seed in enumerate((7, 7, 8))]
    pd.testing.assert_frame_equal(comparable(runs[0]), comparable(runs[1]))
    assert (runs[0]["prompt"] != runs[2]["prompt"]).any()


@pytest.mark.slow
def test_two_workers_give_the_one_worker_table(shared_data: Path, tmp_path: Path) -> None:
    dataset = shared_data / "hippocampus_mri"
    serial = run_benchmark(dataset, tmp_path / "serial", "box", "box-jitter", seed=3, limit=5)
    assert main(["run", str(dataset), "--model", "box", "--protocol", "box-jitter", "--seed", "3", "--limit", "5",
                 "--workers", "2", "--out", str(tmp_path / "parallel"), "--quiet", "--no-report"]) == 0
    parallel = load_table(tmp_path / "parallel")
    pd.testing.assert_frame_equal(comparable(parallel), comparable(serial))
    manifest = json.loads((tmp_path / "parallel" / "manifest.json").read_text())
    assert manifest["config"]["workers"] == 2 and manifest["status"] == "completed"


def test_cancel_from_the_progress_callback_then_resume(hippo3: Path, tmp_path: Path) -> None:
    calls: list[tuple[int, int, list[str]]] = []

    def progress(done: int, total: int, rows: list[dict]) -> bool:
        calls.append((done, total, [row["case_id"] for row in rows]))
        return done < 1

    out = tmp_path / "run"
    partial = run_benchmark(hippo3, out, "oracle", progress=progress)
    # first the totals, before any case runs; then each case with its rows
    assert calls == [(0, 3, []), (1, 3, ["hippocampus_001"] * 2)]
    assert partial["case_id"].unique().tolist() == ["hippocampus_001"]
    assert json.loads((out / "manifest.json").read_text())["status"] == "cancelled"
    calls.clear()
    full = run_benchmark(hippo3, out, "oracle", resume=True, progress=lambda *args: calls.append(args[:2]))
    assert calls == [(1, 3), (2, 3), (3, 3)]  # the resumed run starts from the case already done
    assert full["case_id"].nunique() == 3 and len(full) == 6


def test_stop_at_the_first_progress_call_runs_no_case(hippo3: Path, tmp_path: Path) -> None:
    calls: list[tuple[int, int, int]] = []

    def progress(done: int, total: int, rows: list[dict]) -> bool:
        calls.append((done, total, len(rows)))
        return False

    out = tmp_path / "run"
    table = run_benchmark(hippo3, out, "box", limit=2, progress=progress)
    assert calls == [(0, 2, 0)] and len(table) == 0 and load_table(out).empty
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "cancelled" and manifest["counts"]["cases_done"] == 0
    assert run_benchmark(hippo3, out, "box", limit=2, resume=True)["case_id"].nunique() == 2


def test_camus_videos_and_an_absent_named_label(tmp_path: Path) -> None:
    import SimpleITK as sitk

    root = tmp_path / "camus"
    write_camus(root, patients=("patient0001",))
    gt_path = root / "patient0001" / "patient0001_4CH_half_sequence_gt.nii.gz"
    gt = sitk.ReadImage(str(gt_path))
    array = sitk.GetArrayFromImage(gt)
    array[array == 3] = 0
    new = sitk.GetImageFromArray(array)
    new.CopyInformation(gt)
    sitk.WriteImage(new, str(gt_path))
    table = run_benchmark(root, tmp_path / "run", "oracle")
    assert len(table) == 6 and (table["kind"] == "video").all()
    assert sorted(table["task"].unique()) == ["camus/left_atrium", "camus/lv_endocardium", "camus/myocardium"]
    absent = table[(table["case_id"] == "patient0001_4CH") & (table["target_label"] == 3)].iloc[0]
    assert math.isnan(absent["dice"]) and absent["gt_voxels"] == 0 and json.loads(absent["prompt"])[0]["info"]["empty"]
    # a target absent from the case is counted apart: neither ok (never in n) nor failed (never redone)
    assert absent["status"] == "empty_gt" and "no voxel of label 3" in absent["error"]
    assert (table.drop(index=absent.name)["status"] == "ok").all()
    from napari_medsam_eval.report import summarize_tasks

    atrium = summarize_tasks(table).set_index("task").loc["camus/left_atrium"]
    assert (atrium["n"], atrium["n_failed"], atrium["n_empty_gt"], atrium["dice_n"]) == (1, 0, 1, 1)
    present = table.dropna(subset=["dice"])
    assert (present["dice"] == 1.0).all() and (present["nsd"] == 1.0).all() and (present["hd95"] == 0.0).all()
    assert json.loads(present.iloc[0]["attributes"])["view"] == "2CH"


def test_sunseg_attributes_reach_the_rows(tmp_path: Path) -> None:
    write_sunseg_tree(tmp_path / "sun")
    table = run_benchmark(tmp_path / "sun", tmp_path / "run", "box")
    attributes = {r.case_id: json.loads(r.attributes) for r in table.itertuples()}
    assert attributes["case3_1"] == {"difficulty": "hard", "split": "seen", "group": "TestHardDataset/Seen"}
    assert (table["task"] == "sun/polyp").all() and (table["n_slices"] == 2).all()
    assert (table["prompt_slice"] == 0).all() and (table["dice"] > 0.5).all()


def test_cli_refuses_a_non_empty_folder_and_other_settings(hippo3: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["run", str(hippo3), "--model", "oracle", "--out", str(out), "--quiet"]) == 2
    assert "not empty; resume it with --resume" in capsys.readouterr().err
    out2 = tmp_path / "run2"
    assert main(["run", str(hippo3), "--model", "oracle", "--out", str(out2), "--quiet", "--limit", "1",
                 "--propagation", "legacy"]) == 0
    printed = capsys.readouterr().out
    assert "hippo3/anterior: median DSC 1.0000" in printed and "failed: 0" in printed
    assert main(["run", str(hippo3), "--model", "box", "--out", str(out2), "--quiet", "--resume"]) == 2
    assert "cannot resume" in capsys.readouterr().err
    assert main(["run", str(hippo3), "--model", "oracle", "--out", str(out2), "--quiet", "--resume",
                 "--propagation", "legacy"]) == 0
    assert load_table(out2)["case_id"].nunique() == 3
    assert main(["run", str(hippo3), "--model", "box", "--protocol", "litemedsam-3dbox", "--out",
                 str(tmp_path / "run3"), "--quiet"]) == 2
    assert "needs model 'litemedsam'" in capsys.readouterr().err and not (tmp_path / "run3").exists()
    # the intensity mode is a setting of the run: a resume with another one is refused
    assert main(["run", str(hippo3), "--model", "box", "--out", str(tmp_path / "run4"), "--quiet", "--limit", "1",
                 "--intensity", "raw"]) == 0
    assert main(["run", str(hippo3), "--model", "box", "--out", str(tmp_path / "run4"), "--quiet", "--resume"]) == 2
    assert "intensity: raw -> auto" in capsys.readouterr().err


def test_official_protocol_needs_litemedsam(hippo3: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs model 'litemedsam'"):
        run_benchmark(hippo3, tmp_path / "run", "box", "litemedsam-3dbox")
    with pytest.raises(DataError, match="no known dataset layout"):
        run_benchmark(tmp_path, tmp_path / "run2", "box")


def test_segment_timer_sums_and_restores() -> None:
    backend = build_backend("box")
    from napari_medsam_eval.core.prompt import Prompt

    with SegmentTimer(backend) as timer:
        for _ in range(3):
            backend.segment(np.zeros((8, 8)), Prompt(1, boxes=[(1, 1, 4, 4)]))
    assert timer.calls == 3 and timer.columns()["time_encoder_s"] == 0.0 and timer.columns()["time_total_s"] > 0
    assert "segment" not in backend.__dict__
    with SegmentTimer(backend) as idle:
        pass
    assert math.isnan(idle.columns()["time_encoder_s"])


@pytest.fixture()
def tiny_lesion(tmp_path: Path, shared_data: Path) -> Path:
    """Four slices of a real DeepLesion npz around its lesion's middle (few encoder passes)."""
    with np.load(shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz") as data:
        arrays = {k: data[k] for k in data.files}
    z = np.flatnonzero(arrays["gts"].reshape(len(arrays["gts"]), -1).any(axis=1))
    middle = int(z[0] + (z[-1] - z[0]) // 2)
    keep = slice(middle - 1, middle + 3)
    arrays["imgs"], arrays["gts"] = arrays["imgs"][keep], arrays["gts"][keep]
    root = tmp_path / "lesion"
    root.mkdir()
    np.savez_compressed(root / "CT_Lesion_000001_tiny.npz", **arrays)
    return root


@pytest.mark.slow
def test_litemedsam_on_real_volume_and_images(tiny_lesion: Path, shared_data: Path, tmp_path: Path) -> None:
    volume = run_benchmark(tiny_lesion, tmp_path / "vol", "litemedsam", model_options={"device": "cpu"},
                           save_predictions=True)
    row = volume.iloc[0]
    assert row["status"] == "ok" and row["task"] == "lesion/lesion" and row["dice"] > 0.7, row.to_dict()
    assert row["time_encoder_s"] > 0 and row["time_decoder_s"] > 0 and row["prediction_path"].endswith(".npz")
    manifest = json.loads((tmp_path / "vol" / "manifest.json").read_text())
    assert len(manifest["model"]["checkpoint_sha256"]) == 64 and manifest["environment"]["torch"]
    official = run_benchmark(tiny_lesion, tmp_path / "official", "litemedsam", "litemedsam-3dbox",
                             model_options={"device": "cpu"})
    assert official.iloc[0]["status"] == "ok" and official.iloc[0]["dice"] > 0.7
    images = run_benchmark(shared_data / "kvasir_seg_2d", tmp_path / "img", "litemedsam",
                           model_options={"device": "cpu"}, limit=2)
    assert (images["status"] == "ok").all() and (images["kind"] == "image").all()
    assert images["prompt_slice"].isna().all() and images["dice"].min() > 0.5
