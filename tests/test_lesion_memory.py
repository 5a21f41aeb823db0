"""Issue 67: a lesion target's scoring holds memory bounded by the case, not by its lesion count.

Many small components spread over a volume make the union bounding box of prediction and truth the
whole case: the surface distances of the case's NSD/HD95 were the whole grid's distance transform
(32 bytes a voxel), the lesion sizes an int64 copy of each label map. Peaks are traced (tracemalloc).
"""
from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pandas as pd

from napari_medsam_eval.benchmark.lesion_table import lesion_table, write_lesion_table
import pytest
from scipy import ndimage

from napari_medsam_eval.evaluation import distance_transform, surface_distance, surface_tiles
from napari_medsam_eval.evaluation.lesions import LesionRule, match_lesions
from napari_medsam_eval.evaluation.metrics import score_pair

SHAPE = (16, 192, 192)


def _cubes(count: int, seed: int, shift: int = 0) -> np.ndarray:
    """``count`` 2x2x2 cubes on a grid of 4 (apart), chosen at random; ``shift`` moves them along x."""
    rng = np.random.default_rng(seed)
    z, y, x = SHAPE
    slots = np.stack(np.meshgrid(np.arange(0, z - 3, 4), np.arange(0, y - 3, 4), np.arange(0, x - 3, 4),
                                 indexing="ij"), axis=-1).reshape(-1, 3)
    mask = np.zeros(SHAPE, dtype=bool)
    for cz, cy, cx in slots[rng.choice(len(slots), count, replace=False)]:
        mask[cz:cz + 2, cy:cy + 2, cx + shift:cx + shift + 2] = True
    return mask


def _traced_peak(count: int) -> int:
    """Traced peak (bytes above the start) of what a lesion target's row scores: the case's scores, then
    its lesions matched and their columns."""
    gt = _cubes(count, seed=1)
    pred = _cubes(count, seed=1, shift=1)  # each lesion found, half of it (DSC 0.5, IoU 1/3)
    pred[0, :4, :4] = True  # and a false positive
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        scores = score_pair(pred, gt, "volume", (2.0, 0.8, 0.8))
        columns = match_lesions(pred, gt, (2.0, 0.8, 0.8), "volume", LesionRule(threshold=0.3)).columns(as_json=True)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert columns["lesions_true"] == count and columns["lesions_found"] == count
    assert columns["lesions_false"] == 1 and np.isfinite(scores["hd95"])
    return peak


def test_lesion_scoring_memory_is_bounded_by_the_case_not_the_lesion_count(monkeypatch):
    monkeypatch.setattr(distance_transform, "ENGINE", "scipy")  # its buffers are traced (numba's are not)
    # the case here is small: tile it as a case of 32 x 512 x 512 with lesions all over is tiled
    monkeypatch.setattr(surface_distance, "WHOLE_GRID_MAX_VOXELS", 1 << 18)
    case = 2 * int(np.prod(SHAPE))  # a uint8 image and a uint8 label, decoded
    few, many = _traced_peak(200), _traced_peak(800)
    assert many < 7 * case, f"{many / case:.1f} x the case for 800 lesions"  # (before the fix: 8.6 x)
    assert many < 1.5 * few, f"{few} bytes for 200 lesions, {many} for 800"


def test_lesions_csv_streamed_in_chunks_is_the_table(tmp_path):
    lesions = [{"source": "true", "number": n, "status": "found", "voxels": 8, "volume_ml": 0.0064 * n,
                "size": "small", "dice": 0.5, "iou": None, "first_slice": n, "last_slice": n + 1,
                "largest_slice": None, "matched": [n, n + 1]} for n in range(1, 8)]
    text = json.dumps(lesions).replace("null", "NaN", 1)
    table = pd.DataFrame({"case_id": ["a", "b", "c", "d"], "task": ["t"] * 4, "label_name": ["l"] * 4,
                          "target_labels": ["1"] * 4, "status": ["ok", "ok", "failed", "ok"],
                          "lesions": [text, text[:-1] + ", 3 x]", text, "[]"], "lesions_true": [7, 7, 7, 0]})
    written = write_lesion_table(table, tmp_path / "lesions.csv", chunk=3)
    lesion_table(table).to_csv(tmp_path / "whole.csv", index=False)
    assert written == 7  # b's JSON is unreadable: none of its lesions, as the table reads it
    assert (tmp_path / "lesions.csv").read_text() == (tmp_path / "whole.csv").read_text()


@pytest.mark.parametrize("spacing", [(1.0, 1.0, 1.0), (2.5, 0.8, 0.7)])
def test_surface_distances_tile_by_tile_are_the_whole_grids(monkeypatch, spacing):
    rng = np.random.default_rng(3)
    gt = ndimage.gaussian_filter(rng.random((20, 60, 70)), 2) > 0.53
    pred = ndimage.gaussian_filter(rng.random((20, 60, 70)), 2) > 0.53
    pred[:, :, 40:] = False  # half of the truth far from any prediction: windows grow
    whole = surface_distance.compute_surface_distances(pred, gt, spacing)
    monkeypatch.setattr(surface_distance, "WHOLE_GRID_MAX_VOXELS", 1000)
    monkeypatch.setattr(surface_tiles, "TILE", (5, 16, 12))
    monkeypatch.setattr(surface_tiles, "FIRST_MARGIN", 2)
    tiled = surface_distance.compute_surface_distances(pred, gt, spacing)
    for name in ("surfel_areas_gt", "surfel_areas_pred"):
        assert np.array_equal(getattr(whole, name), getattr(tiled, name))
    for name in ("distances_gt_to_pred", "distances_pred_to_gt"):  # (a tie of two nearest: the last bit may differ)
        assert np.allclose(getattr(whole, name), getattr(tiled, name), rtol=1e-14, atol=0)
        if spacing == (1.0, 1.0, 1.0):
            assert np.array_equal(getattr(whole, name), getattr(tiled, name))
    assert tiled.surface_dice(2.0) == pytest.approx(whole.surface_dice(2.0), rel=1e-14)
    assert tiled.robust_hausdorff(95.0) == pytest.approx(whole.robust_hausdorff(95.0), rel=1e-14)


def test_lesions_given_away_as_scored_count_as_the_lesions_kept():
    """``match_lesions(each=...)`` (a run's way: each lesion to its row's cell, none kept) reports what the
    kept list reports: counts, F1, the mean lesion DSC to the last bit, recall by size."""
    gt = _cubes(300, seed=2)
    pred = _cubes(300, seed=2, shift=1)
    pred[:, 100:140, 100:140] = True  # a large false positive over some lesions
    rule = LesionRule(threshold=0.3)
    kept = match_lesions(pred, gt, (2.0, 0.8, 0.8), "volume", rule)
    given: list = []
    streamed = match_lesions(pred, gt, (2.0, 0.8, 0.8), "volume", rule, each=given.append)
    assert streamed.lesions == [] and [l.to_dict() for l in given] == [l.to_dict() for l in kept.lesions]
    assert 0 < kept.found < kept.true_count and kept.false_positives > 0
    whole, counted = kept.columns(as_json=True), streamed.columns(as_json=True)
    assert {k: v for k, v in whole.items() if k != "lesions"} == {k: v for k, v in counted.items() if k != "lesions"}
    assert np.array_equal(list(kept.recall_by_size().values()), list(streamed.recall_by_size().values()),
                          equal_nan=True)
