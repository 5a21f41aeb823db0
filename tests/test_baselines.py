"""The weight-free baselines: the prompt box as the mask, and the ground-truth oracle."""
from __future__ import annotations

import numpy as np
import pytest

from napari_medsam_eval.models import build_backend
from napari_medsam_eval.models.baselines import BoxBackend, OracleBackend, box_mask
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.propagation import propagate_volume


def test_box_backend_fills_the_inclusive_box():
    backend = build_backend("box")
    assert isinstance(backend, BoxBackend)
    result = backend.segment(np.zeros((20, 30), np.uint8), Prompt(1, boxes=[(2, 3, 5, 7)]))
    assert result.mask.dtype == bool and result.mask.shape == (20, 30)
    assert result.mask.sum() == 4 * 5
    ys, xs = np.nonzero(result.mask)
    assert (xs.min(), ys.min(), xs.max(), ys.max()) == (2, 3, 5, 7)
    assert result.logits is None


def test_box_backend_union_clipping_and_rgb():
    backend = BoxBackend()
    image = np.zeros((10, 10, 3), np.uint8)
    result = backend.segment(image, Prompt(1, boxes=[(0, 0, 1, 1), (8, 8, 20, 20)]))
    assert result.mask.shape == (10, 10)
    assert result.mask.sum() == 4 + 4
    assert box_mask((1.5, 1.5, 2.2, 2.2), (5, 5)).sum() == 9  # fractional: every touched pixel


def test_box_backend_refuses_points_only():
    with pytest.raises(ValueError, match="points"):
        BoxBackend().segment(np.zeros((5, 5)), Prompt(1, points=[(1, 1)], point_labels=[1]))
    with pytest.raises(ValueError, match="no weights"):
        build_backend("box", checkpoint="x.pth")


def test_oracle_returns_the_ground_truth_of_the_target_slice():
    gt = np.zeros((4, 8, 8), np.uint8)
    gt[1, 2:4, 2:5] = 1
    gt[1, 6:, 6:] = 2
    backend = build_backend("oracle", ground_truth=gt)
    assert isinstance(backend, OracleBackend)
    prompt = Prompt(1, slice_index=1, boxes=[(0, 0, 7, 7)])
    assert np.array_equal(backend.segment(np.zeros((8, 8)), prompt).mask, gt[1] == 1)
    points = Prompt(2, slice_index=1, points=[(6, 6)], point_labels=[1])
    assert np.array_equal(backend.segment(np.zeros((8, 8)), points).mask, gt[1] == 2)
    # 2D ground truth
    backend.set_ground_truth(gt[1])
    assert np.array_equal(backend.segment(np.zeros((8, 8, 3)), Prompt(2, boxes=[(0, 0, 1, 1)])).mask, gt[1] == 2)


def test_oracle_errors():
    backend = OracleBackend()
    with pytest.raises(ValueError, match="set_ground_truth"):
        backend.segment(np.zeros((8, 8)), Prompt(1, slice_index=0, boxes=[(0, 0, 1, 1)]))
    backend.set_ground_truth(np.zeros((3, 8, 8), np.uint8))
    with pytest.raises(ValueError, match="does not match"):
        backend.segment(np.zeros((9, 8)), Prompt(1, slice_index=0, boxes=[(0, 0, 1, 1)]))
    with pytest.raises(ValueError, match="slice_index"):
        backend.segment(np.zeros((8, 8)), Prompt(1, boxes=[(0, 0, 1, 1)]))
    with pytest.raises(ValueError, match="outside"):
        backend.segment(np.zeros((8, 8)), Prompt(1, slice_index=5, boxes=[(0, 0, 1, 1)]))


def test_oracle_through_propagation_recovers_a_contiguous_object():
    gt = np.zeros((10, 16, 16), np.uint8)
    for z in range(2, 8):
        gt[z, 4 + z // 2 : 9 + z // 2, 3:10] = 1
    backend = OracleBackend(gt)
    prompt = Prompt(1, slice_index=5, boxes=[(3, 6, 9, 10)])
    pred = propagate_volume(backend, np.zeros(gt.shape, np.uint8), prompt)
    assert np.array_equal(pred, gt == 1)
