"""The CVPR 2025 interactive protocol (issue 60): boxes, clicks and per-step scores equal the challenge
script's own on the shared 3D cases (tests/data/cvpr25_reference/PROVENANCE.md), and a run reports them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.ndimage import binary_erosion, label

from figures import scales, subset
from napari_medsam_eval.api import read_case
from napari_medsam_eval.evaluation import cvpr25
from napari_medsam_eval.protocols import build_protocol
from napari_medsam_eval.protocols.cvpr25 import challenge_click

FIXTURE = Path(__file__).parent / "data" / "cvpr25_reference" / "script_outputs.json"
CASES = json.loads(FIXTURE.read_text())["cases"]


def _case(shared: Path, name: str):
    if name.startswith("CT_Lesion"):
        return read_case(shared / "deeplesion_ct_npz" / f"{name}.npz")
    root = shared / "hippocampus_mri"
    return read_case(root / "imagesTr" / f"{name}.nii.gz", root / "labelsTr" / f"{name}.nii.gz")


def first_prediction(gt: np.ndarray, box: dict) -> np.ndarray:
    """The fixture's stand-in model, step 0 (PROVENANCE.md): the truth in the box's z-range eroded by a pixel,
    a 3-pixel false-positive band right of it on the middle slice."""
    pred = np.zeros_like(gt, dtype=bool)
    for z in range(box["z_min"], box["z_max"] + 1):
        pred[z] = binary_erosion(gt[z], iterations=1)
    z = box["z_mid"]
    ys, xs = np.nonzero(gt[z])
    x0 = int(xs.max()) + 2
    if x0 + 3 <= gt.shape[2]:
        pred[z, int(ys.min()):int(ys.max()) + 1, x0:x0 + 3] = True
    return pred


def corrected(pred: np.ndarray, gt: np.ndarray, click: tuple[int, int, int]) -> np.ndarray:
    z, y, x = click
    regions, _ = label(pred[z] != gt[z], structure=np.ones((3, 3), bool))
    region = regions == regions[y, x]
    out = pred.copy()
    out[z][region] = gt[z][region]
    return out


def _label_map(preds: dict[int, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    segs = np.zeros(shape, np.uint8)
    for value, pred in preds.items():  # in label order: a later class over an earlier one
        segs[pred] = value
    return segs


@pytest.mark.parametrize("expected", CASES, ids=[c["case"] for c in CASES])
def test_boxes_clicks_and_scores_equal_the_challenge_script(shared_data, expected):
    case = _case(shared_data, expected["case"])
    protocol = build_protocol("cvpr25-interactive")
    spacing = cvpr25.scoring_spacing(case, protocol.nsd_spacing)
    assert np.allclose(spacing, expected["spacing"])
    classes = sorted(int(c) for c in expected["classes"])
    prompts = {int(p.target_label): p for p in protocol.prompts(case)}
    assert sorted(prompts) == classes
    preds = {}
    for value in classes:
        box = prompts[value].info["cvpr25_box"]
        assert box == expected["classes"][str(value)]["box"]
        assert prompts[value].slice_index == box["z_mid"]
        assert list(prompts[value].boxes[0]) == [box["z_mid_x_min"], box["z_mid_y_min"], box["z_mid_x_max"],
                                                 box["z_mid_y_max"]]
        preds[value] = first_prediction(case.label == value, box)
    dice_steps, nsd_steps = {v: [] for v in classes}, {v: [] for v in classes}
    for step in range(6):
        if step:
            segs = _label_map(preds, case.label.shape)
            for value in classes:
                click = challenge_click(segs == value, case.label == value)
                wanted = expected["classes"][str(value)]["clicks"][step - 1]
                if wanted is None:
                    assert click is None
                    continue
                (z, y, x), foreground = click
                assert [z, y, x] == wanted["zyx"] and ("fg" if foreground else "bg") == wanted["kind"]
                preds[value] = corrected(preds[value], case.label == value, (z, y, x))
        segs = cvpr25.class_map(preds)  # the case's one map, as the script scores it
        assert np.array_equal(segs, _label_map(preds, case.label.shape))
        scores = cvpr25.case_scores(segs, {v: case.label == v for v in classes}, spacing)
        for value in classes:
            dice_steps[value].append(scores["classes"][value]["dice"])
            nsd_steps[value].append(scores["classes"][value]["nsd"])
        assert scores["dice"] == pytest.approx(expected["dice"][step], abs=1e-12)
        assert scores["nsd"] == pytest.approx(expected["nsd"][step], abs=1e-12)
    for value in classes:
        wanted = expected["classes"][str(value)]
        assert dice_steps[value] == pytest.approx(wanted["dice"], abs=1e-12)
        assert nsd_steps[value] == pytest.approx(wanted["nsd"], abs=1e-12)
        columns = cvpr25.columns(dice_steps[value], nsd_steps[value])
        assert columns["dsc_auc"] == pytest.approx(wanted["dsc_auc"], abs=1e-12)
        assert columns["nsd_auc"] == pytest.approx(wanted["nsd_auc"], abs=1e-12)
    if len(classes) == 1:
        assert cvpr25.auc(expected["dice"]) == pytest.approx(expected["dsc_auc"], abs=1e-12)


def test_the_auc_leaves_the_box_step_out_and_a_perfect_curve_scores_four():
    assert cvpr25.auc([0.0, 1, 1, 1, 1, 1]) == 4.0
    assert cvpr25.auc([0.5, 0.5, 0.6, 0.7, 0.8, 0.9]) == pytest.approx((0.5 + 0.9) / 2 + 0.6 + 0.7 + 0.8)


def test_nsd_is_taken_as_zero_at_a_low_dice():
    gt = np.zeros((4, 20, 20), bool)
    gt[1:3, 5:15, 5:15] = True
    pred = np.zeros_like(gt)
    pred[1, 5:7, 5:7] = True
    assert cvpr25.step_scores(pred, gt, (1.0, 1.0, 1.0))["nsd"] == 0.0


def test_a_click_on_an_exact_prediction_is_none_and_over_segmentation_gets_a_background_click():
    gt = np.zeros((5, 16, 16), bool)
    gt[1:4, 4:10, 4:10] = True
    assert challenge_click(gt, gt) is None
    over = gt.copy()
    over[1:4, 4:10, 10:14] = True
    (z, y, x), foreground = challenge_click(over, gt)
    assert not foreground and over[z, y, x] and not gt[z, y, x]


@pytest.mark.slow
@scales("cases", ["CT_Lesion_000001_02_01_008-023"], None, small_id="1-case", full_id="6-cases")
def test_a_litemedsam_run_prints_and_reports_the_challenge_scores(tmp_path, shared_data, cases, figure):
    dataset = shared_data / "deeplesion_ct_npz"
    if cases is not None:
        dataset = subset(dataset, tmp_path / "few", cases)
    cli = str(Path(sys.executable).with_name("medsam-eval"))
    done = subprocess.run([cli, "run", str(dataset), "--protocol", "cvpr25-interactive", "--quiet",
                           "--out", str(tmp_path / "run")], check=True, capture_output=True, text=True)
    assert "deeplesion_ct_npz/lesion: CVPR 2025 interactive: DSC-AUC" in done.stdout
    table = pd.read_csv(tmp_path / "run" / "results.csv")
    for _, row in table.iterrows():
        steps = json.loads(row["dice_after"])
        assert len(steps) == 6 and row["dsc_auc"] == pytest.approx(cvpr25.auc(steps), abs=1e-3)
        assert 0.0 <= row["dsc_auc"] <= 4.0
    assert "CVPR 2025 interactive scores" in (tmp_path / "run" / "report.md").read_text()
    if cases is None:
        figure("cvpr25_deeplesion_dsc_auc", float(table["dsc_auc"].mean()))
        figure("cvpr25_deeplesion_final_dsc", float(table["dsc_final"].mean()))
        figure.assert_all_match()


def test_a_challenge_npz_is_read_with_its_boxes_and_clicks_and_its_boxes_are_the_prompts(tmp_path):
    """The challenge's npz keeps its prompts as pickled dictionaries: read safely, and its stored box (not
    one made again) is what the protocol gives the model."""
    gts = np.zeros((6, 40, 40), np.uint8)
    gts[1:5, 10:20, 12:22] = 1
    stored = {"z_min": 1, "z_max": 4, "z_mid": 3, "z_mid_x_min": 9, "z_mid_y_min": 8, "z_mid_x_max": 25,
              "z_mid_y_max": 23}
    path = tmp_path / "CT_case.npz"
    np.savez_compressed(path, imgs=np.zeros_like(gts), gts=gts, spacing=np.array([0.8, 0.8, 2.5]),
                        boxes=[{k: np.int64(v) for k, v in stored.items()}], clicks=[{"fg": [[3, 15, 15]], "bg": []}])
    case = read_case(path)
    assert case.metadata["cvpr25_boxes"] == [stored]
    assert case.metadata["clicks"] == [{"fg": [[3, 15, 15]], "bg": []}]
    (prompt,) = build_protocol("cvpr25-interactive").prompts(case)
    assert prompt.slice_index == 3 and list(prompt.boxes[0]) == [9, 8, 25, 23]
    assert cvpr25.scoring_spacing(case) == (0.8, 0.8, 2.5)  # as stored, as the script passes it


def test_an_npz_pickle_that_is_not_plain_data_is_refused(tmp_path):
    import os

    class Runs:
        def __reduce__(self):
            return (os.system, ("echo never",))

    path = tmp_path / "bad.npz"
    np.savez(path, imgs=np.zeros((3, 8, 8), np.uint8), boxes=np.array([Runs()], dtype=object))
    with pytest.raises(Exception, match="does not unpickle"):
        read_case(path)
    np.savez(path, imgs=np.zeros((3, 8, 8), np.uint8), notes=np.array([{"a": 1}], dtype=object))
    with pytest.raises(Exception, match="'notes' holds pickled Python objects"):
        read_case(path)


def test_run_takes_the_engine_as_an_option_of_its_own(tmp_path, capsys):
    from napari_medsam_eval.cli import main

    dataset = Path(__file__).resolve().parents[1] / "sample_data" / "phantom_2d"
    assert main(["run", str(dataset), "--model", "box", "--engine", "torch", "--out", str(tmp_path / "a"),
                 "--quiet", "--no-report"]) == 2
    assert "--engine torch applies to --model litemedsam only" in capsys.readouterr().err
    assert main(["run", str(dataset), "--engine", "torch", "--model-options", '{"engine": "openvino"}',
                 "--out", str(tmp_path / "b"), "--quiet", "--no-report"]) == 2
    assert "disagree" in capsys.readouterr().err


def test_the_official_script_mode_runs_the_script_s_engine_unless_told():
    from napari_medsam_eval.benchmark.config import RunConfig
    from napari_medsam_eval.benchmark.runner import official_engine

    official = RunConfig("data", "out", protocol="litemedsam-3dbox")
    assert official_engine(official).model_options == {"engine": "torch"}
    told = official.replace(model_options={"engine": "openvino"})
    assert official_engine(told).model_options == {"engine": "openvino"}
    assert official_engine(RunConfig("data", "out")).model_options == {}
