"""The metric conformance table (issue 60): our scores beside surface-distance's and MONAI's on hard cases,
each convention reproducing its tool's numbers (docs/metrics.md, scripts/metric_conformance.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import metric_conformance as conformance  # noqa: E402

METRICS = ("dice", "iou", "nsd", "hd95")


@pytest.fixture(scope="module")
def results(shared_data):
    return conformance.table(shared_data)


def _same(a: float, b: float, tolerance: float = 1e-6) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b or abs(a - b) <= tolerance


def test_the_monai_convention_equals_monai_on_every_hard_case(results):
    assert len(results) == 10
    for case, by in results.items():
        for metric in METRICS:
            assert _same(by["convention monai"][metric], by["MONAI"][metric]), (case, metric)


def test_ours_equals_surface_distance_wherever_it_gives_a_number(results):
    compared = 0
    for case, by in results.items():
        if isinstance(by["surface-distance"], str):  # 0.1 fails on empty masks under numpy 2 (np.Inf, np.NaN)
            assert "empty" in case
            continue
        compared += 1
        for metric in METRICS:
            assert _same(by["medsam-eval"][metric], by["surface-distance"][metric], 1e-9), (case, metric)
    assert compared == 7


def test_the_conventions_differ_where_the_docs_say(results):
    anisotropic = results["anisotropic 3 x 0.7 x 0.7 mm: a sphere against an ellipsoid"]
    assert anisotropic["MONAI"]["nsd"] < anisotropic["medsam-eval"]["nsd"] - 0.05  # voxels counted, not areas
    assert anisotropic["MONAI"]["hd95"] > anisotropic["medsam-eval"]["hd95"] + 0.1
    both = results["both empty"]
    assert both["medsam-eval"]["dice"] == 1.0 and np.isnan(both["MONAI"]["dice"])
    thin = results["one voxel thin, shifted 1"]
    assert thin["medsam-eval"]["nsd"] == 1.0 and thin["convention cvpr25"]["nsd"] == 0.0  # DSC 0 <= 0.2


def test_the_docs_table_is_the_scripts_output(results):
    page = (REPO / "docs" / "metrics.md").read_text()
    assert conformance.markdown(results) in page


def test_score_takes_a_metrics_convention(tmp_path):
    import SimpleITK as sitk

    pred, gt, spacing = conformance.hard_cases()["anisotropic 3 x 0.7 x 0.7 mm: a sphere against an ellipsoid"]
    for name, mask in (("pred", pred), ("gt", gt)):
        image = sitk.GetImageFromArray(mask.astype(np.uint8))
        image.SetSpacing(tuple(reversed(spacing)))
        sitk.WriteImage(image, str(tmp_path / f"{name}.nii.gz"))
    cli = str(Path(sys.executable).with_name("medsam-eval"))
    scores = {}
    for convention in ("medsam-eval", "monai"):
        done = subprocess.run([cli, "score", str(tmp_path / "pred.nii.gz"), str(tmp_path / "gt.nii.gz"), "--json",
                               "--metrics-convention", convention], check=True, capture_output=True, text=True)
        scores[convention] = json.loads(done.stdout)["labels"][0]
    monai = conformance.monai_library_scores(pred, gt, spacing)
    assert scores["monai"]["nsd"] == pytest.approx(monai["nsd"], abs=1e-6)
    assert scores["monai"]["hd95"] == pytest.approx(monai["hd95"], abs=1e-5)
    assert scores["medsam-eval"]["nsd"] == pytest.approx(conformance.surface_distance_scores(pred, gt, spacing)["nsd"])
