"""Paint to correct: a painted slice is an anchor kept exactly as painted.

Synthetic stacks (a backend that answers a box with the ground truth inside it) show the
rules; real DeepLesion CT with the real LiteMedSAM shows that the painted slice survives the
re-propagation voxel for voxel and that the next slices are prompted with the painted mask's
box; MedSAM2 with seeded random weights shows that a model with memory gets the painted mask
itself (``add_new_mask``); ``medsam-eval segment --anchor-mask`` and the ``corrections``
protocol's ``paint`` type run on real data.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.cli import main
from napari_medsam_eval.evaluation.interaction_effort import noc
from napari_medsam_eval.evaluation.metrics import compute_dice
from napari_medsam_eval.models.baselines import BoxBackend
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.propagation.anchors import AnchoredSegmentation, is_absent, merge_prompt, painted_prompt
from deeplesion_cases import lesion_case
from napari_medsam_eval.core.anchor_prompts import is_painted
from napari_medsam_eval.propagation.rules import next_box, resolve_rules
from napari_medsam_eval.protocols import build_protocol
from napari_medsam_eval.protocols.corrections import correction, correction_type
from napari_medsam_eval.studies.corrections import run_corrections
from test_corrections import OPEN_RULES, _InsideBox, _stack, median_curve
from figures import scales

LESION = "CT_Lesion_000010_01_01_078-090"


class _Counting(_InsideBox):
    """:class:`_InsideBox` that remembers the slices it was asked about."""

    def __init__(self, truth):
        super().__init__(truth)
        self.asked: list[int] = []

    def segment(self, image, prompt, *, cache_key=None):
        self.asked.append(int(prompt.slice_index))
        return super().segment(image, prompt, cache_key=cache_key)


# --------------------------------------------------------------------------- rules (synthetic)


def test_a_painted_slice_is_kept_as_painted_and_its_box_prompts_the_next_slices():
    label = _stack()
    backend = _Counting(label)
    session = AnchoredSegmentation(backend, np.zeros(label.shape, np.uint8), "volume", rules=OPEN_RULES)
    session.propagate(Prompt(1, slice_index=4, boxes=[(5, 5, 8, 8)]))  # too small: 16 pixels on each slice
    assert session.mask[6].sum() == 49 and session.mask[4].sum() == 16
    paint = np.zeros((20, 20), bool)
    paint[3:14, 3:14] = True  # wider than the truth: no model answers this, the painted slice keeps it
    paint[0, 19] = True  # a stray pixel the user painted, kept too
    backend.asked.clear()
    result = session.correct(painted_prompt(1, 2, paint))
    assert not result.cancelled and 2 not in backend.asked  # the model is not asked on the painted slice
    np.testing.assert_array_equal(session.mask[2], paint)
    # slice 1 was prompted with the painted mask's box (the whole truth inside it), not with a 4 x 4 box
    assert session.mask[1].sum() == 49 and np.array_equal(session.mask[4:], result.mask[4:])
    (anchor,) = [p for p in session.anchor_list() if p.slice_index == 2]
    assert is_painted(anchor) and anchor.info["painted"] and np.array_equal(anchor.mask, paint)
    # another correction elsewhere leaves the painted slice alone, and so does its undo
    before = session.snapshot()
    session.correct(Prompt(1, slice_index=6, boxes=[(5, 5, 11, 11)]))
    np.testing.assert_array_equal(session.mask[2], paint)
    session.restore(before)
    assert [p.slice_index for p in session.anchor_list()] == [2, 4]


def test_painted_prompts_erase_replace_and_refuse_what_is_not_a_slice():
    empty = painted_prompt(1, 3, np.zeros((8, 8), np.uint8))
    assert is_absent(empty) and is_painted(empty) and empty.mask is None  # erased: the target is not here
    box = Prompt(1, slice_index=3, boxes=[(1, 1, 5, 5)])
    paint = painted_prompt(1, 3, np.eye(8))
    assert merge_prompt(box, paint) is paint and merge_prompt(paint, box) is box  # the later one replaces
    with pytest.raises(ValueError, match="one slice"):
        painted_prompt(1, 3, np.zeros((2, 8, 8)))
    session = AnchoredSegmentation(BoxBackend(), np.zeros((5, 8, 8), np.uint8), "volume")
    session.propagate(Prompt(1, slice_index=2, boxes=[(1, 1, 5, 5)]))
    with pytest.raises(ValueError, match="does not fit"):
        session.correct(painted_prompt(1, 4, np.ones((6, 6))))
    assert [p.slice_index for p in session.anchor_list()] == [2]  # the refused anchor is not kept


def test_the_simulated_painter_paints_the_truth_or_its_largest_error_region():
    truth = _stack() == 1
    pred = np.zeros_like(truth)
    pred[5, 5:12, 5:9] = True  # misses 3 columns of slice 5
    pred[5, 0:2, 0:2] = True  # and a small false region
    whole = correction(pred, truth, 5, "paint", 1)
    assert is_painted(whole) and np.array_equal(whole.mask, truth[5]) and whole.info["correction"] == "paint"
    region = correction(pred, truth, 5, "paint-region", 1)
    expected = pred[5].copy()
    expected[5:12, 9:12] = True  # the largest error region painted right, the small false one left
    np.testing.assert_array_equal(region.mask, expected)
    assert correction_type("auto", BoxBackend()) == "box" and correction_type("paint", BoxBackend()) == "paint"
    with pytest.raises(ValueError, match="point"):
        correction_type("point", BoxBackend())
    with pytest.raises(ValueError, match="correction must be one of"):
        build_protocol("corrections", correction="brush")

    protocol = build_protocol("corrections", interactions=3, correction="paint")
    first = Prompt(1, slice_index=4, boxes=[(5, 5, 8, 8)])
    _pred, scores, anchors = run_corrections(_InsideBox(truth), np.zeros(truth.shape, np.uint8), "volume", truth,
                                             first, protocol, lambda m: {"dice": compute_dice(m, truth)},
                                             rules=OPEN_RULES)
    # the worst slice is the first anchor's (its box too small): painted, it replaces the box and
    # its mask's box re-propagates the rest right; no error is left, the curve is carried forward
    assert scores[0]["dice"] < 0.95 and [s["dice"] for s in scores[1:]] == [1.0] * 3
    assert [a.slice_index for a in anchors] == [4] and is_painted(anchors[0])


# --------------------------------------------------------------------------- real data


@pytest.fixture(scope="module")
def backend():
    from napari_medsam_eval.session.session import Session

    return Session.build_backend("litemedsam", device="cpu")


@pytest.fixture(scope="module")
def lesion(shared_data):
    case, prompt, truth, ref = lesion_case(shared_data, LESION)
    return case, prompt, truth, ref.files()[0]


def _with_stray_pixel(mask: np.ndarray) -> np.ndarray:
    """``mask`` plus one pixel just outside it (a brush slip): no model answer is exactly this."""
    from scipy.ndimage import binary_dilation

    painted = mask.copy()
    painted[tuple(np.argwhere(binary_dilation(mask) & ~mask)[0])] = True
    return painted


def _worst(mask, truth, skip):
    errors = (mask != truth).reshape(len(truth), -1).sum(axis=1)
    errors[skip] = -1
    return int(np.argmax(errors))


@pytest.mark.slow
def test_litemedsam_keeps_the_painted_slice_and_prompts_its_neighbours_with_its_box(backend, lesion):
    from napari_medsam_eval.session.session import Session

    case, prompt, truth, _file = lesion
    session = Session(backend)
    session.set_image(case.image, kind=case.kind, modality=case.modality, image_id=LESION)
    before = session.propagate(prompt).mask.copy()
    z0 = prompt.slice_index
    k = _worst(before, truth, z0)
    paint = _with_stray_pixel(truth[k])
    snapshot = session.anchor_snapshot(prompt.target_label)
    after = session.correct(painted_prompt(prompt.target_label, k, paint)).mask
    np.testing.assert_array_equal(after[k], paint)  # voxel for voxel
    np.testing.assert_array_equal(after[z0], before[z0])  # the first anchor's slice is kept
    step = 1 if k > z0 else -1
    neighbour = k + step  # away from the first anchor: propagated from the painted slice
    assert 0 <= neighbour < len(truth) and not np.array_equal(after[neighbour], before[neighbour])
    rules = resolve_rules("volume", None)
    box = next_box(paint, paint.shape, rules)
    image = session.volume
    expected = backend.segment(image[neighbour], Prompt(prompt.target_label, slice_index=neighbour, boxes=[box]),
                               cache_key=(LESION, neighbour)).mask
    np.testing.assert_array_equal(after[neighbour], expected)  # prompted with the painted mask's box
    assert compute_dice(after, truth) > compute_dice(before, truth)
    assert [is_painted(p) for p in session.anchors()] == ([True, False] if k < z0 else [False, True])
    session.restore_anchors(prompt.target_label, snapshot)  # what Undo does
    assert session.anchors() == [prompt]


@pytest.mark.slow
def test_medsam2_takes_the_painted_mask_into_its_memory(monkeypatch):
    pytest.importorskip("sam2")
    from napari_medsam_eval.models.sam2_backend import build_medsam2

    backend = build_medsam2(random_init=True, device="cpu")
    added: list[tuple[int, np.ndarray]] = []
    original = backend.model.add_new_mask

    def record(state, frame_idx, obj_id, mask):
        added.append((int(frame_idx), np.asarray(mask).copy()))
        return original(state, frame_idx, obj_id, mask)

    monkeypatch.setattr(backend.model, "add_new_mask", record)
    volume = np.random.default_rng(0).integers(0, 255, (5, 48, 48), dtype=np.uint8)
    session = AnchoredSegmentation(backend, volume, "volume")
    session.propagate(Prompt(1, slice_index=1, boxes=[(10, 10, 30, 30)]))
    paint = np.zeros((48, 48), bool)
    paint[12:20, 25:40] = True
    paint[0, 0] = True
    result = session.correct(painted_prompt(1, 3, paint))
    assert [frame for frame, _ in added] == [3, 3]  # both passes take the painted mask
    assert all(np.array_equal(mask, paint) for _, mask in added)
    assert backend.last_run["reverse_frames"] == [3, 2, 1, 0]
    np.testing.assert_array_equal(result.mask[3], paint)


def _cli_lesion(lesion, tmp_path):
    case, prompt, truth, image = lesion
    key = int(prompt.slice_index)
    box = [f"{v:g}" for v in prompt.boxes[0]]
    alone = tmp_path / "alone.npz"
    assert main(["segment", str(image), "--box", *box, str(key), "--out", str(alone)]) == 0
    before = np.load(alone)["segs"] > 0
    return truth, key, box, image, before


@pytest.mark.slow
def test_segment_takes_a_painted_slice_from_a_mask_file(lesion, tmp_path, capsys):
    truth, key, box, image, before = _cli_lesion(lesion, tmp_path)
    k = _worst(before, truth, key)
    edited = before.copy()
    edited[k] = _with_stray_pixel(truth[k])  # kept, the stray pixel too
    painted_file = tmp_path / "edited.npz"
    np.savez_compressed(painted_file, segs=edited.astype(np.uint8))  # an edited prediction, the whole volume
    out = tmp_path / "painted.npz"
    assert main(["segment", str(image), "--box", *box, str(key), "--anchor-mask", str(painted_file), str(k),
                 "--out", str(out)]) == 0
    after = np.load(out)["segs"] > 0
    np.testing.assert_array_equal(after[k], edited[k])
    np.testing.assert_array_equal(after[key], before[key])
    assert not np.array_equal(after, before) and compute_dice(after, truth) > compute_dice(before, truth)
    one_slice = tmp_path / "slice.npz"
    np.savez_compressed(one_slice, segs=edited[k].astype(np.uint8))  # or that slice alone
    again = tmp_path / "again.npz"
    assert main(["segment", str(image), "--box", *box, str(key), "--anchor-mask", str(one_slice), str(k),
                 "--out", str(again)]) == 0
    np.testing.assert_array_equal(np.load(again)["segs"] > 0, after)
    capsys.readouterr()
    # bad input: one line, exit 2, before any model work
    for extra, words in (([str(painted_file), "99"], "outside"), ([str(painted_file), "x"], "whole number"),
                         ([str(painted_file), str(key)], "already holds a prompt"),
                         ([str(tmp_path / "missing.npz"), str(k)], "missing.npz")):
        assert main(["segment", str(image), "--box", *box, str(key), "--anchor-mask", *extra,
                     "--out", str(tmp_path / "bad.npz")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("error:") and words in err[-1]
    wrong = tmp_path / "wrong.npz"
    np.savez_compressed(wrong, segs=np.ones((7, 9), np.uint8))
    assert main(["segment", str(image), "--anchor-mask", str(wrong), str(k), "--out", str(tmp_path / "b.npz")]) == 2
    assert "does not fit" in capsys.readouterr().err
    assert not (tmp_path / "bad.npz").exists()


#: make test: 2 lesions, 3 paintings; make reproduce: docs/corrections.md's run, 6 lesions, 5 paintings
PAINT_RUNS = scales("run", (["--limit", "2"], 3), ([], 5), small_id="2-cases", full_id="6-cases")


@pytest.mark.slow
@PAINT_RUNS
def test_corrections_protocol_paints_the_lesions_and_writes_noc_and_the_curve(shared_data: Path, tmp_path: Path, run,
                                                                               figure):
    limit, interactions = run
    out = tmp_path / "paint"
    assert main(["run", str(shared_data / "deeplesion_ct_npz"), "--protocol", "corrections", *limit,
                 "--protocol-options", json.dumps({"correction": "paint", "interactions": interactions}),
                 "--out", str(out), "--quiet"]) == 0
    table = pd.read_csv(out / "results.csv")
    assert (table["status"] == "ok").all() and len(table) == (2 if limit else 6)
    for _, row in table.iterrows():
        curve = json.loads(row["dice_after"])
        assert len(curve) == interactions + 1 and curve[-1] == pytest.approx(row["dice"], abs=1e-4)
        assert curve[-1] > curve[0]
        assert row["noc80"] == noc(curve, 0.80) and row["noc90"] == noc(curve, 0.90)
        anchors = json.loads(row["prompt"])
        painted = [a for a in anchors if a["info"].get("painted")]
        assert painted and all(a["info"]["correction"] == "paint" for a in painted)
        # a painting holds its mask, or erases a slice where the truth is empty (an absent anchor, no mask)
        assert all(a["has_mask"] != bool(a["info"].get("absent")) for a in painted), painted
        assert any(a["has_mask"] for a in painted)
    report = (out / "report.md").read_text()
    assert "Effort (corrections)" in report and "paint" in report
    assert (out / "figures" / "dsc_vs_interactions.png").stat().st_size > 0
    if not limit:
        figure("corrections_paint", median_curve(table))
        figure.assert_all_match()
