"""Prompt sensitivity (napari_medsam_eval.studies.sensitivity) with real LiteMedSAM weights on a real DeepLesion case,
and the benchmark's ``sensitivity`` protocol option through the real CLI on real hippocampus data."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.benchmark.store import load_table
from napari_medsam_eval.cli import main
from napari_medsam_eval.models import build_backend
from napari_medsam_eval.models.base import made_by
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.protocols import build_protocol
from napari_medsam_eval.report.sensitivity_section import sensitivity_table
from napari_medsam_eval.studies.sensitivity import (Perturbation, check_runs, perturbed_prompts, sensitivity,
                                            volume_segmenter)
from napari_medsam_eval.session.session import Session

pytestmark = pytest.mark.usefixtures("no_shared_store")  # they count encoder passes

LESION = "CT_Lesion_000009_03_01_036-048.npz"
RUNS = 4


@pytest.fixture(scope="module")
def lesion(shared_data: Path) -> dict:
    with np.load(shared_data / "deeplesion_ct_npz" / LESION) as npz:
        return {"image": npz["imgs"], "gt": npz["gts"] > 0}


@pytest.fixture(scope="module")
def session(lesion) -> Session:
    session = Session()
    session.set_backend(build_backend("litemedsam", device="cpu"))
    session.set_image(lesion["image"], kind="volume", modality="CT", image_id="lesion")
    return session


def run_to_end(steps):
    seen = []
    while True:
        try:
            seen.append(next(steps))
        except StopIteration as stop:
            return stop.value, seen


@pytest.mark.slow
def test_agreement_map_on_a_real_case_reuses_the_slice_embeddings(session, lesion):
    prompt = session.prompt_from_ground_truth(lesion["gt"].astype(np.uint8), target_label=1)
    backend = session.backend
    backend.clear_cache()
    calls_before = backend.encoder_calls
    result, steps = run_to_end(session.iter_sensitivity(prompt, RUNS, ground_truth=lesion["gt"]))
    encoded = backend.encoder_calls - calls_before
    n_slices = lesion["image"].shape[0]
    assert 0 < encoded <= n_slices, f"{RUNS} runs encoded {encoded} slices of {n_slices}: each at most once"
    assert steps[0] == (0, RUNS) and steps[-1] == (RUNS, RUNS)
    assert result.done == RUNS and not result.cancelled and len(result.prompts) == RUNS
    assert result.made_by == made_by(backend)  # the session's own model made the runs (no first look)
    agreement = result.agreement
    assert agreement.shape == lesion["gt"].shape and agreement.dtype == np.float32
    assert agreement.min() >= 0.0 and agreement.max() <= 1.0
    # the same N runs again, from the cache: the map is their mean, 1 exactly where every run segmented
    segment = volume_segmenter(backend, session.volume, "volume", case_id=session.image_id, margin=session.margin)
    masks = np.stack([segment(p).mask for p in result.prompts])
    assert backend.encoder_calls - calls_before == encoded, "the repeat makes no encoder call"
    np.testing.assert_allclose(agreement, masks.mean(axis=0), atol=1e-6)
    assert np.array_equal(agreement == 1.0, masks.all(axis=0)) and (agreement == 1.0).any()
    assert np.array_equal(agreement == 0.0, ~masks.any(axis=0))
    # each run's DSC, the spread and the worst run
    dice = [2 * (m & lesion["gt"]).sum() / (m.sum() + lesion["gt"].sum()) for m in masks]
    np.testing.assert_allclose(result.dice, dice, atol=1e-9)
    spread = result.spread()
    assert spread["dice_min"] == min(result.dice) <= spread["dice_median"] <= spread["dice_max"] == max(result.dice)
    assert spread["dice_spread"] == pytest.approx(spread["dice_max"] - spread["dice_min"])
    assert result.worst == int(np.argmin(result.dice))
    assert np.array_equal(result.worst_mask, masks[result.worst])
    counts, edges = result.histogram()
    assert counts.sum() == RUNS and edges[0] == 0.0 and edges[-1] == 1.0
    assert session.anchors(1) == [] or all(a is not p for a in session.anchors(1) for p in result.prompts)


@pytest.mark.slow
def test_cancel_stops_after_the_current_run(session, lesion):
    prompt = session.prompt_from_ground_truth(lesion["gt"].astype(np.uint8), target_label=1)
    cancel = threading.Event()
    steps = session.iter_sensitivity(prompt, 5, ground_truth=lesion["gt"], cancel=cancel)
    assert next(steps) == (0, 5)
    assert next(steps) == (1, 5)
    cancel.set()
    result, _ = run_to_end(steps)
    assert result.cancelled and result.done == 1 and len(result.dice) == 1


def test_perturbations_are_seeded_and_follow_the_box_jitter_rule():
    prompt = Prompt(1, slice_index=3, boxes=[(40, 50, 80, 90)], points=[(60, 70)], point_labels=[1])
    first = perturbed_prompts(prompt, (128, 128), 6, key="case-a")
    assert first == perturbed_prompts(prompt, (128, 128), 6, key="case-a")
    assert first != perturbed_prompts(prompt, (128, 128), 6, key="case-b")
    assert first != perturbed_prompts(prompt, (128, 128), 6, Perturbation(seed=1), key="case-a")
    for copy in first:
        (x0, y0, x1, y1), = copy.boxes
        assert copy.slice_index == 3 and copy.target_label == 1 and copy.point_labels == [1]
        assert abs((x0 + x1) / 2 - 60) <= 0.1 * 41 + 1 and abs((x1 - x0 + 1) - 41) <= 0.1 * 41 + 1
        (px, py), = copy.points
        assert abs(px - 60) <= 5 and abs(py - 70) <= 5
    assert len({c.boxes[0] for c in first}) > 1, "the copies differ"
    unmoved = perturbed_prompts(prompt, (128, 128), 2, Perturbation(0.0, 0.0, 0.0))
    assert all(c.boxes == prompt.boxes and c.points == prompt.points for c in unmoved)
    with pytest.raises(ValueError, match=">= 2"):
        check_runs(1)
    with pytest.raises(ValueError, match="empty"):
        perturbed_prompts(Prompt(1, slice_index=0), (8, 8), 3)


def test_without_ground_truth_there_is_a_map_and_no_dice():
    masks = [np.eye(4, dtype=bool), np.ones((4, 4), bool)]

    class Done:
        def __init__(self, mask):
            self.mask, self.cancelled = mask, False
    prompts = perturbed_prompts(Prompt(1, boxes=[(0, 0, 3, 3)]), (4, 4), 2)
    given = iter(masks)
    result = sensitivity(lambda p: Done(next(given)), prompts)
    assert result.dice is None and result.worst is None and np.isnan(result.spread()["dice_median"])
    np.testing.assert_allclose(result.agreement, (masks[0].astype(float) + masks[1]) / 2)


def test_the_benchmark_records_the_spread_and_the_report_its_median(shared_data, tmp_path):
    run = tmp_path / "run"
    code = main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--protocol", "medsam2",
                 "--protocol-options", '{"sensitivity": 5}', "--limit", "3", "--out", str(run), "--quiet"])
    assert code == 0
    table = load_table(run)
    ok = table[table["status"].eq("ok")]
    assert len(ok) == 6 and ok["sens_runs"].eq(5).all()
    for _, row in ok.iterrows():
        values = pd.read_json(__import__("io").StringIO(row["sens_dice"]), typ="series").to_numpy(float)
        assert len(values) == 5
        assert row["sens_dice_min"] == pytest.approx(values.min(), abs=1e-4)
        assert row["sens_dice_max"] == pytest.approx(values.max(), abs=1e-4)
        assert row["sens_spread"] == pytest.approx(row["sens_dice_max"] - row["sens_dice_min"])
    summary = sensitivity_table(table)
    report = (run / "report.md").read_text()
    assert "## Prompt sensitivity" in report
    for _, line in summary.iterrows():
        expected = ok.loc[ok["task"].eq(line["task"]), "sens_spread"].median()
        assert line["median spread (max - min)"] == pytest.approx(expected)
        assert f"| {line['task']} | 3 | 5 | {expected:.3f} |" in report
    plain = tmp_path / "plain"
    assert main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "1", "--out", str(plain),
                 "--quiet"]) == 0
    assert "Prompt sensitivity" not in (plain / "report.md").read_text()
    assert load_table(plain)["sens_spread"].isna().all()


def test_the_option_is_recorded_only_when_asked_for_and_refused_where_it_cannot_apply(shared_data, tmp_path):
    assert "sensitivity" not in build_protocol("medsam2").options()
    assert build_protocol("medsam2", sensitivity=7).options()["sensitivity"] == 7
    with pytest.raises(ValueError, match=">= 2"):
        build_protocol("box-jitter", sensitivity=1)
    code = main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--protocol", "corrections",
                 "--protocol-options", '{"sensitivity": 3}', "--limit", "1", "--out", str(tmp_path / "r"),
                 "--quiet", "--no-report"])
    assert code == 2
