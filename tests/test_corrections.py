"""Corrections: anchors on several slices, the simulated user, effort metrics.

Fast parts run on synthetic stacks with the oracle / box baselines (each answers a box from
the ground truth inside it, or with the box itself), where the right answer is known; the
real-data parts run LiteMedSAM on ``../shared/data`` (DeepLesion, colonoscopy video) through
``medsam-eval segment`` and ``medsam-eval run``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.cli import main
from napari_medsam_eval.evaluation.interaction_effort import effort_table, noc, noc_columns
from napari_medsam_eval.evaluation.metrics import compute_dice
from napari_medsam_eval.models.base import SegmentationBackend
from napari_medsam_eval.models.baselines import BoxBackend
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.propagation.anchors import AnchoredSegmentation, absent_prompt, merge_prompt
from napari_medsam_eval.protocols import build_protocol
from napari_medsam_eval.protocols.corrections import correction, worst_slice
from napari_medsam_eval.studies.corrections import run_corrections
from napari_medsam_eval.protocols.geometry import tight_box

from figures import scales

OPEN_RULES = {"intensity_k": None, "min_iou": None}  # stop only when empty: the synthetic walks are predictable


class _InsideBox(SegmentationBackend):
    """Answers a box with the ground truth inside it (the oracle answers with the whole slice)."""

    name = "inside-box"
    accepts = frozenset({"box"})

    def __init__(self, truth: np.ndarray) -> None:
        self.truth = np.asarray(truth) != 0

    def segment(self, image, prompt, *, cache_key=None):
        from napari_medsam_eval.models.base import SegmentResult

        inside = np.zeros(self.truth.shape[1:], bool)
        for x0, y0, x1, y1 in prompt.boxes:
            inside[int(y0): int(y1) + 1, int(x0): int(x1) + 1] = True
        return SegmentResult(mask=self.truth[int(prompt.slice_index)] & inside)


def _stack(n: int = 9) -> np.ndarray:
    label = np.zeros((n, 20, 20), np.uint8)
    label[1:8, 5:12, 5:12] = 1
    return label


# --------------------------------------------------------------------------- anchors


def test_merge_prompt_replaces_the_box_and_adds_points():
    old = Prompt(1, slice_index=3, boxes=[(1, 1, 5, 5)], points=[(2, 2)], point_labels=[1])
    new = merge_prompt(old, Prompt(1, slice_index=3, boxes=[(0, 0, 6, 6)], points=[(4, 4)], point_labels=[0]))
    assert new.boxes == [(0.0, 0.0, 6.0, 6.0)] and new.points == [(2.0, 2.0), (4.0, 4.0)] and new.point_labels == [1, 0]
    only_points = merge_prompt(old, Prompt(1, slice_index=3, points=[(3, 3)], point_labels=[0]))
    assert only_points.boxes == old.boxes and len(only_points.points) == 2
    assert merge_prompt(old, absent_prompt(1, 3)).is_empty
    assert merge_prompt(absent_prompt(1, 3), old) is old


def test_a_correction_changes_only_the_slices_nearer_to_it_than_to_another_anchor():
    label = _stack()
    session = AnchoredSegmentation(_InsideBox(label), np.zeros(label.shape, np.uint8), "volume", rules=OPEN_RULES)
    session.propagate(Prompt(1, slice_index=4, boxes=[(5, 5, 8, 8)]))  # a too small box: the oracle answers inside it
    first = session.mask.copy()
    assert first[4].sum() == 16 and first[7].sum() == 49  # the prompted slice as asked, the walk widens its boxes
    session.correct(Prompt(1, slice_index=6, boxes=[(5, 5, 11, 11)]))  # the full box on slice 6
    assert np.array_equal(session.mask[:6], first[:6])  # the first anchor, below it, and 5 (as near to 4 as to 6)
    assert session.mask[6].sum() == 49 and session.mask[6:8].sum() == 2 * 49
    after_six = session.mask.copy()
    session.correct(Prompt(1, slice_index=2, boxes=[(5, 5, 11, 11)]))
    assert np.array_equal(session.mask[4:], after_six[4:])  # 3 is as near to 2 as to 4: kept too
    assert session.mask[1:3].sum() == 2 * 49 and np.array_equal(session.mask[3], first[3])
    assert [p.slice_index for p in session.anchor_list()] == [2, 4, 6]
    session.correct(absent_prompt(1, 7))  # the object "ends" at 7 (past the outermost anchor)
    assert not session.mask[7:].any() and session.mask[6].sum() == 49


def test_video_corrections_go_forward_only():
    label = _stack()
    session = AnchoredSegmentation(_InsideBox(label), np.zeros(label.shape, np.uint8), "video", rules=OPEN_RULES)
    session.propagate(Prompt(1, slice_index=1, boxes=[(5, 5, 8, 8)]))
    before = session.mask.copy()
    session.correct(Prompt(1, slice_index=5, boxes=[(5, 5, 11, 11)]))
    assert np.array_equal(session.mask[:5], before[:5]) and session.mask[5:8].sum() == 3 * 49


class _NativeRecorder(SegmentationBackend):
    name = "native-recorder"
    accepts = frozenset({"box", "points", "mask"})
    propagates_natively = True

    def segment(self, image, prompt, *, cache_key=None):  # pragma: no cover - never called
        raise AssertionError

    def propagate(self, frames, prompt, *, reverse=True, progress=None, anchors=()):
        self.calls = (prompt, list(anchors), reverse)
        return np.ones(frames.shape[:3], bool)


def test_a_model_with_memory_gets_every_anchor_at_once():
    native = _NativeRecorder()
    session = AnchoredSegmentation(native, np.zeros((6, 8, 8), np.uint8), "volume")
    session.propagate(Prompt(1, slice_index=2, boxes=[(1, 1, 4, 4)]))
    session.correct(absent_prompt(1, 5))
    first, anchors, reverse = native.calls
    assert first.slice_index == 2 and reverse and [a.slice_index for a in anchors] == [5]
    assert anchors[0].mask is not None and not anchors[0].mask.any()  # "absent" as an empty mask prompt


# --------------------------------------------------------------------------- simulated user


def test_worst_slice_and_the_correction_rules():
    truth = _stack()
    pred = np.zeros_like(truth, bool)
    pred[2:5, 5:12, 5:12] = True
    pred[8, 0:3, 0:3] = True  # a false positive of 9 pixels where the truth is empty
    assert worst_slice(pred, truth) == 1  # 49 missed on slices 1, 5, 6, 7: the lowest index wins
    assert worst_slice(pred, truth, skip=[1, 5, 6, 7]) == 8 and worst_slice(truth, truth) is None
    box = correction(pred, truth, 5, True, 1)
    assert box.boxes == [tight_box(truth[5])] and box.slice_index == 5
    assert correction(pred, truth, 8, True, 1).info["absent"]  # nothing to box there: erased
    click = correction(pred, truth, 5, False, 1)
    assert click.point_labels == [1] and truth[5][int(click.points[0][1]), int(click.points[0][0])]
    negative = correction(pred, truth, 8, False, 1, anchor=Prompt(1, slice_index=8, boxes=[(0, 0, 2, 2)]))
    assert negative.point_labels == [0] and not negative.boxes  # on top of the anchor: the click alone


def test_the_simulated_user_reaches_the_truth_with_a_box_model_and_records_every_step():
    truth = _stack()
    protocol = build_protocol("corrections", interactions=3)
    first = Prompt(1, slice_index=4, boxes=[(5, 5, 11, 11)])
    steps = []

    def score(mask):
        steps.append(mask.copy())
        return {"dice": compute_dice(mask, truth), "nsd": float("nan")}

    # the box baseline answers every box with the box itself: right on slices where the box is the truth
    pred, scores, anchors = run_corrections(BoxBackend(), np.zeros(truth.shape, np.uint8), "volume", truth == 1,
                                            first, protocol, score, rules=OPEN_RULES)
    assert len(scores) == 4 and scores[0]["dice"] < 1.0
    assert [s["dice"] for s in scores] == sorted(s["dice"] for s in scores)  # each box or erase helps here
    assert scores[-1]["dice"] == pytest.approx(compute_dice(pred, truth))
    assert len(anchors) == 4 and len({a.slice_index for a in anchors}) == 4  # a box model: a new slice each time


def test_the_simulated_user_stops_within_a_pass_when_progress_says_so():
    """A benchmark's Cancel reaches the corrections protocol inside a pass, not between targets."""
    from napari_medsam_eval.core.errors import Cancelled

    truth = _stack()
    protocol = build_protocol("corrections", interactions=3)
    first = Prompt(1, slice_index=4, boxes=[(5, 5, 11, 11)])
    calls: list[tuple[int, int]] = []

    def progress(done, total):
        calls.append((done, total))
        return len(calls) < 10  # the first pass is 9 slices: stop inside the first correction's pass

    with pytest.raises(Cancelled):
        run_corrections(BoxBackend(), np.zeros(truth.shape, np.uint8), "volume", truth == 1, first, protocol,
                        lambda mask: {"dice": compute_dice(mask, truth), "nsd": float("nan")}, rules=OPEN_RULES,
                        progress=progress)
    assert len(calls) == 10 and calls[0][1] == truth.shape[0] and calls[-1][1] < truth.shape[0]


def test_noc_counts_k_plus_one_when_never_reached():
    assert noc([0.5, 0.79, 0.81, 0.95], 0.80) == 2 and noc([0.9, 0.1], 0.85) == 0
    assert noc([0.5, 0.6, 0.7], 0.90) == 3
    assert noc_columns([0.82, 0.86, 0.88]) == {"noc80": 0, "noc85": 1, "noc90": 3}


# --------------------------------------------------------------------------- real data


def median_curve(table: pd.DataFrame) -> list[float]:
    """The median DSC after 0, 1, ..., K corrections over a run's rows (docs/corrections.md's tables)."""
    curves = np.array([json.loads(cell) for cell in table["dice_after"]])
    return np.median(curves, axis=0).tolist()


@pytest.mark.slow
@scales("limit", ["--limit", "3"], [], small_id="3-cases", full_id="6-cases")
def test_corrections_run_writes_the_curve_and_noc(shared_data: Path, tmp_path: Path, limit, figure):
    out = tmp_path / "run"
    assert main(["run", str(shared_data / "deeplesion_ct_npz"), "--protocol", "corrections", *limit,
                 "--out", str(out), "--quiet"]) == 0
    table = pd.read_csv(out / "results.csv")
    assert (table["status"] == "ok").all() and len(table) == (3 if limit else 6)
    for _, row in table.iterrows():
        curve = json.loads(row["dice_after"])
        assert len(curve) == 6 and curve[-1] == pytest.approx(row["dice"], abs=1e-4)
        assert {row["noc80"], row["noc85"], row["noc90"]} <= set(range(7))
        assert row["noc80"] == noc(curve, 0.80) and row["noc90"] == noc(curve, 0.90)
        anchors = json.loads(row["prompt"])
        assert len(anchors) >= 2 and all(a["protocol"] in ("medsam2", "corrections") for a in anchors)
    summary = effort_table(table)
    assert summary["interactions"].tolist() == [5]
    assert summary.loc[0, "dice_5"] > summary.loc[0, "dice_0"]  # five GT boxes help LiteMedSAM on these lesions
    report = (out / "report.md").read_text()
    assert "Effort (corrections)" in report and (out / "figures" / "dsc_vs_interactions.png").stat().st_size > 0
    if not limit:
        figure("corrections_box", median_curve(table))
        figure.assert_all_match()


@pytest.mark.slow
def test_segment_with_a_correction_on_a_real_volume(shared_data: Path, tmp_path: Path):
    """A correction on a slice where the propagated mask is wrong raises that slice's DSC and
    leaves the first anchor's slice unchanged (``medsam-eval segment --box ... SLICE`` twice)."""
    from napari_medsam_eval.datasets import resolve_layout

    root = shared_data / "deeplesion_ct_npz"
    layout = resolve_layout(root)
    ref = layout.list_cases(root)[0]
    case = layout.load(ref)
    truth = np.asarray(case.label) == 1
    (first,) = build_protocol("medsam2", largest_component=False).prompts(case)
    key = int(first.slice_index)
    box = " ".join(f"{v:g}" for v in first.boxes[0])
    image = ref.files()[0]
    one = tmp_path / "one.npz"
    assert main(["segment", str(image), "--box", *box.split(), str(key), "--out", str(one)]) == 0
    alone = np.load(one)["segs"] > 0
    errors = (alone != truth).reshape(len(truth), -1).sum(axis=1)
    errors[key] = 0
    k = int(np.argmax(errors))
    fix = " ".join(f"{v:g}" for v in tight_box(truth[k]))
    two = tmp_path / "two.npz"
    assert main(["segment", str(image), "--box", *box.split(), str(key), "--box", *fix.split(), str(k),
                 "--out", str(two)]) == 0
    corrected = np.load(two)["segs"] > 0
    assert compute_dice(corrected[k], truth[k]) > compute_dice(alone[k], truth[k]) + 0.05
    assert np.array_equal(corrected[key], alone[key])


@pytest.mark.slow
def test_corrections_on_a_colonoscopy_video(shared_data: Path, tmp_path: Path):
    out = tmp_path / "video"
    assert main(["run", str(shared_data / "cvc_clinicdb_video"), "--protocol", "corrections", "--limit", "1",
                 "--protocol-options", json.dumps({"interactions": 2}), "--out", str(out), "--quiet",
                 "--no-report"]) == 0
    row = pd.read_csv(out / "results.csv").iloc[0]
    curve = json.loads(row["dice_after"])
    assert row["status"] == "ok" and len(curve) == 3
    anchors = json.loads(row["prompt"])
    assert all(a["slice_index"] >= anchors[0]["slice_index"] for a in anchors)  # frames after the prompted one


@pytest.mark.slow
def test_medsam2_takes_every_anchor_into_its_memory():
    """The SAM2/MedSAM2 path (seeded random weights: the code path, not the masks): a correction
    re-runs its propagation with both prompts in the state, forward from the first prompted
    frame and backward from the last."""
    pytest.importorskip("sam2")
    from napari_medsam_eval.models.sam2_backend import build_medsam2

    backend = build_medsam2(random_init=True, device="cpu")
    volume = np.random.default_rng(0).integers(0, 255, (5, 48, 48), dtype=np.uint8)
    session = AnchoredSegmentation(backend, volume, "volume")
    session.propagate(Prompt(1, slice_index=1, boxes=[(10, 10, 30, 30)]))
    assert backend.last_run["forward_frames"] == [1, 2, 3, 4] and backend.last_run["reverse_frames"] == [1, 0]
    result = session.correct(Prompt(1, slice_index=3, points=[(20, 20)], point_labels=[0]))
    assert backend.last_run["forward_frames"] == [1, 2, 3, 4] and backend.last_run["reverse_frames"] == [3, 2, 1, 0]
    assert result.mask.shape == volume.shape and [p.slice_index for p in session.anchor_list()] == [1, 3]
