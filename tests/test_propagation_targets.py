"""The propagation defaults on real data, through the benchmark runner (LiteMedSAM, shipped weights, CPU).

Issue 12's targets, measured with the defaults chosen by the propagation study
(docs/propagation.md): the demo kidney, DeepLesion, the first 20
hippocampus cases (the 80-case figure is in docs/propagation.md), the colonoscopy clips,
and the official-script mode reproducing the official LiteMedSAM script's
per-case DSC (``../shared/reference/official_litemedsam_dsc.csv``).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.benchmark import run_benchmark
from napari_medsam_eval.core.intensity import prepare_image
from napari_medsam_eval.io import read_case
from napari_medsam_eval.evaluation.metrics import compute_dice
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.propagation import segment_by_kind
from napari_medsam_eval.propagation.rules import STOP_REASONS

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def litemedsam():
    from napari_medsam_eval.models import build_backend

    return build_backend("litemedsam", device="cpu")


def _stops(table: pd.DataFrame) -> list[list[dict]]:
    return [json.loads(cell) for cell in table["stops"]]


def test_demo_kidney(litemedsam):
    """``make demo``'s kidney: a box on slice 22 propagated through the CT phantom stops at the kidney's ends."""
    case = read_case(REPO / "sample_data" / "phantom_ct" / "image.nii.gz",
                     REPO / "sample_data" / "phantom_ct" / "label.nii.gz")
    case.modality = "CT"
    prompt = Prompt(target_label=2, slice_index=22, boxes=[(63, 50, 75, 69)], protocol="manual")
    result = segment_by_kind(litemedsam, prepare_image(case.image, "volume", "CT"), "volume", prompt,
                             case_id="kidney")
    dice = compute_dice(result.mask, case.label == 2)
    print(f"\nphantom kidney DSC {dice:.4f}; {result.summary()}")
    assert dice >= 0.85
    assert {s.direction for s in result.record.stops} == {"up", "down"}
    assert all(s.reason != "end" for s in result.record.stops)  # it stopped at the kidney, not at the volume's end


def test_deeplesion_median_and_case_000001(shared_data: Path, tmp_path: Path, shared_embeddings: str):
    table = run_benchmark(shared_data / "deeplesion_ct_npz", tmp_path / "run", "litemedsam", "medsam2",
                          model_options={"embeddings": shared_embeddings})
    dice = dict(zip(table["case_id"], table["dice"]))
    print("\nDeepLesion DSC:", {k[10:23]: round(v, 3) for k, v in dice.items()})
    assert len(dice) == 6 and (table["status"] == "ok").all()
    assert np.median(list(dice.values())) >= 0.80
    assert dice["CT_Lesion_000001_02_01_008-023"] >= 0.88
    for stops in _stops(table):
        assert [s["direction"] for s in stops] == ["up", "down"] and all(s["reason"] in STOP_REASONS for s in stops)


@pytest.fixture(scope="module")
def hippocampus20(shared_data: Path, tmp_path_factory) -> Path:
    """The first 20 hippocampus cases (the official reference's cases) in the MSD layout."""
    source, root = shared_data / "hippocampus_mri", tmp_path_factory.mktemp("hippo20") / "hippocampus_mri"
    (root / "imagesTr").mkdir(parents=True)
    (root / "labelsTr").mkdir()
    shutil.copy(source / "dataset.json", root)
    for path in sorted((source / "imagesTr").glob("*.nii.gz"))[:20]:
        for folder in ("imagesTr", "labelsTr"):
            shutil.copy(source / folder / path.name, root / folder)
    return root


def test_official_script_mode_reproduces_the_official_figures(hippocampus20: Path, tmp_path: Path,
                                                              shared_embeddings: str):
    """All 40 (case, label) pairs within 0.01 of the official LiteMedSAM 3D script (uint8 MR prepared by
    modality; the case's boxes run together, as the script runs them)."""
    reference = pd.read_csv(REPO.parent / "shared" / "reference" / "official_litemedsam_dsc.csv", comment="#")
    reference = reference[reference["dataset"] == "hippocampus_mri"]
    table = run_benchmark(hippocampus20, tmp_path / "run", "litemedsam", "litemedsam-3dbox",
                          model_options={"embeddings": shared_embeddings})
    merged = reference.merge(table, left_on=["case", "label"], right_on=["case_id", "target_label"])
    gaps = (merged["dice_y"] - merged["dice_x"]).abs()
    print(f"\nofficial-script mode: {int((gaps <= 0.01).sum())}/{len(merged)} within 0.01 (max gap {gaps.max():.5f})")
    assert len(merged) == 40 and (gaps <= 0.01).all(), merged.loc[gaps > 0.01, ["case", "label", "dice_x", "dice_y"]]
    assert all(s["reason"] == "box_3d" for stops in _stops(table) for s in stops)


def test_hippocampus_first_20_with_the_default_rules(hippocampus20: Path, tmp_path: Path, shared_embeddings: str):
    table = run_benchmark(hippocampus20, tmp_path / "run", "litemedsam", "medsam2",
                          model_options={"embeddings": shared_embeddings})
    medians = table.groupby("label_name")["dice"].median()
    print(f"\nhippocampus first 20, medsam2 protocol: {medians.round(4).to_dict()}")
    assert medians["anterior"] >= 0.40 and medians["posterior"] >= 0.28
    reasons = {s["reason"] for stops in _stops(table) for s in stops}
    assert reasons <= set(STOP_REASONS) and reasons & {"intensity", "iou"}  # the stop rules do the work


def test_demo_video(tmp_path: Path):
    """``make demo``'s video phantom: the default video rule tracks the moving blob (0.82 with the legacy rule,
    0.943 with the last mask's box held, 0.971 with boxes located by similarity)."""
    table = run_benchmark(REPO / "sample_data" / "phantom_video", tmp_path / "run", "litemedsam", "medsam2")
    print(f"\nphantom video DSC {table['dice'].iloc[0]:.4f}")
    assert table["dice"].iloc[0] >= 0.95


def test_colonoscopy_clips_are_tracked_to_the_end(shared_data: Path, tmp_path: Path):
    """Each frame's box is located by feature similarity to the prompted frame's polyp: every clip is followed
    to its last frame, median DSC >= 0.60 (the issue's target; measured 0.735, against 0.130 with the last
    mask's box held and 0.103 with the legacy rule)."""
    table = run_benchmark(shared_data / "cvc_clinicdb_video", tmp_path / "run", "litemedsam", "medsam2")
    print(f"\ncolonoscopy median DSC {table['dice'].median():.4f}")
    assert len(table) == 10 and table["dice"].median() >= 0.60
    for stops in _stops(table):
        assert stops == [{"at": None, "direction": "forward", "last": stops[0]["last"], "reason": "end"}]
