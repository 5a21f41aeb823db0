"""Locating the object on each frame by feature similarity (``locate="similarity"``, propagation/similarity.py).

Mechanics with a stub model whose "features" are the image itself on a 4-px
grid; the real figures (colonoscopy clips, phantom video with LiteMedSAM) are
in tests/test_propagation_targets.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from napari_medsam_eval.models.base import FeatureGrid
from napari_medsam_eval.models.baselines import OracleBackend
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.propagation import PropagationRecord, PropagationRules, propagate_video
from napari_medsam_eval.propagation.similarity import SimilarityLocator, cell_fractions

CELL = 4


class BoxedOracle(OracleBackend):
    """The ground truth inside the prompt's box: a model that finds the object only where it is asked to look."""

    def segment(self, image, prompt, *, cache_key=None):
        answer = super().segment(image, prompt, cache_key=cache_key)
        inside = np.zeros_like(answer.mask)
        for x0, y0, x1, y1 in prompt.boxes:
            inside[int(np.ceil(y0)) : int(y1) + 1, int(np.ceil(x0)) : int(x1) + 1] = True
        answer.mask = answer.mask & inside
        return answer


class FeatureOracle(BoxedOracle):
    """:class:`BoxedOracle` with features: per 4-px cell, (object share, background share) of the frame."""

    def feature_grid(self, image, cache_key=None):
        grey = np.asarray(image, dtype=np.float32)[..., 0] / 255.0
        h, w = grey.shape
        pooled = grey.reshape(h // CELL, CELL, w // CELL, CELL).mean(axis=(1, 3))
        features = np.stack([pooled, 1.0 - pooled]) + 1e-6
        features /= np.linalg.norm(features, axis=0, keepdims=True)
        return FeatureGrid(features.astype(np.float32), 1.0, (h, w), (h, w), CELL)


def jumping_blob(n: int = 6, shape=(48, 64)) -> tuple[np.ndarray, np.ndarray]:
    """A 8 x 8 object that jumps by more than its size every frame (frames bright where it is)."""
    gt = np.zeros((n, *shape), np.uint8)
    corners = [(4, 4), (28, 40), (8, 48), (32, 12), (20, 28), (4, 52)][:n]
    for t, (y, x) in enumerate(corners):
        gt[t, y : y + 8, x : x + 8] = 1
    frames = np.repeat((gt * 200 + 30).astype(np.uint8)[..., None], 3, axis=-1)
    return gt, frames


def test_cell_fractions_pool_the_mask_onto_the_grid():
    grid = FeatureGrid(np.zeros((2, 3, 4), np.float32), 1.0, (12, 16), (12, 16), CELL)
    mask = np.zeros((12, 16), bool)
    mask[0:4, 0:4] = True  # one whole cell
    mask[4:6, 8:12] = True  # half a cell
    fractions = cell_fractions(mask, grid)
    assert fractions.shape == (3, 4)
    assert fractions[0, 0] == 1.0 and fractions[1, 2] == 0.5 and fractions.sum() == 1.5


def test_the_box_follows_an_object_that_jumps_further_than_its_size():
    gt, frames = jumping_blob()
    prompt = Prompt(1, slice_index=0, boxes=[(4, 4, 11, 11)])
    # the last mask's box misses the object after the first jump: every later frame is lost
    by_last_box = propagate_video(FeatureOracle(gt), frames, prompt, rules={"locate": None})
    assert by_last_box[0].any() and not by_last_box[1:].any()
    # located by similarity: each frame's box lands on the object, so every frame is found
    record = PropagationRecord()
    located = propagate_video(FeatureOracle(gt), frames, prompt, record=record)
    assert np.array_equal(located, gt == 1)
    assert record.rules["locate"] == "similarity"
    assert [(s.reason, s.last) for s in record.stops] == [("end", 5)]


def test_locator_box_is_the_region_around_the_best_cell():
    gt, frames = jumping_blob()
    backend = FeatureOracle(gt)
    locator = SimilarityLocator.from_prompted(backend.feature_grid(frames[0]), gt[0] == 1)
    assert locator is not None and locator.background is not None
    assert locator.box(backend.feature_grid(frames[1])) == (40.0, 28.0, 47.0, 35.0)  # the object's 2 x 2 cells
    assert SimilarityLocator.from_prompted(backend.feature_grid(frames[0]), np.zeros_like(gt[0], bool)) is None


def test_a_model_without_features_falls_back_to_the_last_box_and_says_so():
    gt, frames = jumping_blob()
    record = PropagationRecord()
    with pytest.warns(UserWarning, match="gives no image features"):
        propagate_video(BoxedOracle(gt), frames, Prompt(1, slice_index=0, boxes=[(4, 4, 11, 11)]), record=record)
    assert record.rules["locate"] is None


def test_locate_is_checked():
    assert PropagationRules(locate="similarity").locate == "similarity"
    with pytest.raises(ValueError, match="locate must be one of"):
        PropagationRules(locate="nearest")


def test_next_prompt_can_carry_the_last_masks_interior_point_and_the_mask():
    gt = np.zeros((4, 32, 32), np.uint8)
    gt[:, 8:20, 10:18] = 1
    frames = np.repeat((gt * 200 + 30).astype(np.uint8)[..., None], 3, axis=-1)
    calls = []

    class Recording(BoxedOracle):
        def segment(self, image, prompt, *, cache_key=None):
            calls.append(prompt)
            return super().segment(image, prompt, cache_key=cache_key)

    prompt = Prompt(1, slice_index=0, boxes=[(10, 8, 17, 19)])
    propagate_video(Recording(gt), frames, prompt, rules={"locate": None, "interior_point": True, "mask_prompt": True})
    later = calls[1]
    assert later.point_labels == [1] and 10 <= later.points[0][0] <= 17 and 8 <= later.points[0][1] <= 19
    assert later.mask is not None and np.array_equal(later.mask, gt[0] == 1)
    from napari_medsam_eval.models.baselines import BoxBackend

    with pytest.raises(ValueError, match="mask_prompt needs a model that takes mask prompts"):
        propagate_video(BoxBackend(), frames, prompt, rules={"mask_prompt": True})
