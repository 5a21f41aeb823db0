"""One number for one pair: ``medsam-eval score`` and ``medsam-eval run`` score a prediction alike, by the
case's kind (a video's NSD and HD95 per frame), through one scorer (``metrics.score_pair``)."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval.benchmark import run_benchmark
from napari_medsam_eval.evaluation.scoring import score_target
from napari_medsam_eval.core.case import Case, Spacing
from napari_medsam_eval.cli import main

METRICS = ("dice", "iou", "nsd", "hd95")


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _scored(capsys, pred: Path, gt: Path, label: int, *extra: str) -> dict:
    assert main(["score", str(pred), str(gt), "--labels", str(label), "--json", *extra]) == 0
    (row,) = json.loads(capsys.readouterr().out)["labels"]
    return row


def _assert_equal(scored: dict, row) -> None:
    for key in METRICS:
        assert _same(float(scored[key]), float(row[key])), (key, scored[key], row[key])


def _dataset(shared_data: Path, name: str, root: Path, keep) -> Path:
    """A copy of one case of ``name`` (``keep(path)`` picks its files), so a run holds that case alone."""
    source, target = shared_data / name, root / name
    for path in sorted(source.rglob("*")):
        if path.is_file() and keep(path.relative_to(source)):
            (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target / path.relative_to(source))
    return target


def test_a_volume_scores_alike(shared_data, tmp_path, capsys):
    dataset = _dataset(shared_data, "hippocampus_mri", tmp_path, lambda p: "hippocampus_001" in p.name or
                       p.name == "dataset.json")
    table = run_benchmark(dataset, tmp_path / "run", "box", save_predictions=True)
    row = table[table["target_label"] == 2].iloc[0]  # label 2 wins overlaps in the saved map: its mask is exact
    scored = _scored(capsys, tmp_path / "run" / row["prediction_path"],
                     dataset / "labelsTr" / "hippocampus_001.nii.gz", 2)
    _assert_equal(scored, row)


def test_a_video_scores_per_frame_alike(shared_data, tmp_path, capsys):
    """A colonoscopy clip's saved prediction (one NIfTI of frames) against its ground-truth frame folder:
    ``score`` knows the pair is a video from the frame folder and scores per frame, as ``run`` does."""
    dataset = _dataset(shared_data, "cvc_clinicdb_video", tmp_path, lambda p: p.parts[1:2] == ("seq01",))
    table = run_benchmark(dataset, tmp_path / "run", "box", save_predictions=True)
    row = table.iloc[0]
    prediction = tmp_path / "run" / row["prediction_path"]
    label = int(np.unique(sitk.GetArrayFromImage(sitk.ReadImage(str(prediction))))[-1])
    scored = _scored(capsys, prediction, dataset / "GT" / "seq01", label if label == 1 else 1)
    _assert_equal(scored, row)
    # a frame lost: NSD 0 and HD95 inf on that frame, as the run scores it (the whole-array rule said 0.98 / 2)
    array = sitk.GetArrayFromImage(sitk.ReadImage(str(prediction)))
    truth = np.stack([np.asarray(__import__("imageio").v3.imread(p)) > 0
                      for p in sorted((dataset / "GT" / "seq01").glob("*.png"))])
    lost = (array > 0).copy()
    lost[3] = False
    image = sitk.GetImageFromArray(lost.astype(np.uint8))
    sitk.WriteImage(image, str(tmp_path / "lost.nii.gz"))
    case = Case(np.zeros(truth.shape, np.uint8), truth.astype(np.uint8), Spacing.isotropic("tyx"), "video", "seq01")
    run_scores = score_target(lost, truth, case)
    scored = _scored(capsys, tmp_path / "lost.nii.gz", dataset / "GT" / "seq01", 1)
    assert math.isinf(run_scores["hd95"]) and run_scores["nsd"] < 1
    _assert_equal(scored, run_scores)
    # the same pair given as two files of frames: --kind video says what the files cannot
    sitk.WriteImage(sitk.GetImageFromArray(truth.astype(np.uint8)), str(tmp_path / "truth.nii.gz"))
    _assert_equal(_scored(capsys, tmp_path / "lost.nii.gz", tmp_path / "truth.nii.gz", 1, "--kind", "video"),
                  run_scores)


def test_a_2d_image_scores_alike(shared_data, tmp_path, capsys):
    first = sorted((shared_data / "kvasir_seg_2d" / "images").iterdir())[0].stem
    dataset = _dataset(shared_data, "kvasir_seg_2d", tmp_path, lambda p: p.stem == first)
    table = run_benchmark(dataset, tmp_path / "run", "box", save_predictions=True)
    row = table.iloc[0]
    (mask,) = (dataset / "masks").glob(f"{first}.*")
    scored = _scored(capsys, tmp_path / "run" / row["prediction_path"], mask, 1)
    _assert_equal(scored, row)


@pytest.mark.parametrize("empty", ["prediction", "truth"])
def test_an_empty_mask_scores_alike(tmp_path, capsys, empty):
    """An empty prediction, or a prediction where the truth is empty: the same numbers both ways."""
    truth = np.zeros((5, 24, 24), np.uint8)
    truth[1:4, 6:14, 6:14] = 1
    pred = np.zeros_like(truth) if empty == "prediction" else truth.copy()
    if empty == "truth":
        truth = np.zeros_like(truth)
    for name, array in (("pred", pred), ("truth", truth)):
        image = sitk.GetImageFromArray(array)
        image.SetSpacing((0.8, 0.8, 2.5))
        sitk.WriteImage(image, str(tmp_path / f"{name}.nii.gz"))
    case = Case(np.zeros_like(truth), truth, Spacing.from_xyz((0.8, 0.8, 2.5), "zyx"), "volume", "c")
    run_scores = score_target(pred > 0, truth > 0, case)
    _assert_equal(_scored(capsys, tmp_path / "pred.nii.gz", tmp_path / "truth.nii.gz", 1), run_scores)
