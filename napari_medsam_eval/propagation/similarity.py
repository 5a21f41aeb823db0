"""Finding the object again on each frame from image features (``locate="similarity"``).

Between the frames of a sub-sampled video (colonoscopy clips, SUN-SEG) the
object moves further than its own size, so the last mask's box often misses
it altogether: a per-frame model then segments whatever lies in the old box
and the track drifts away. This rule, after PerSAM (Zhang et al. 2023,
"Personalize Segment Anything Model with One Shot"), re-locates the object on
every frame without training:

1. On the prompted frame, the prediction is pooled onto the encoder's grid
   (the fraction of each cell it covers). The target prototype is the mean
   unit feature of the cells at least half covered, the background prototype
   that of the cells not covered at all; both stay fixed for the whole video
   (updating them from later frames let them drift: measured).
2. On every next frame, each cell scores ``f . p_target - f . p_background``;
   the cells above 0 that are 8-connected to the best cell form the region,
   and its box, widened by the rules' margin, prompts the model.

Three parameters, fixed before measuring (half covered, threshold 0,
8-connectivity). Measured with LiteMedSAM on the shared data (docs/propagation.md): colonoscopy clips median DSC 0.735 against 0.130 with the
last mask's box; phantom video 0.970 against 0.943.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from scipy import ndimage

from ..models.base import FeatureGrid

#: a cell belongs to the target's prototype when the prompted prediction covers at least this fraction of it
TARGET_FRACTION = 0.5
#: 8-connectivity of the region around the best cell
_EIGHT = np.ones((3, 3), dtype=bool)


def cell_fractions(mask: np.ndarray, grid: FeatureGrid) -> np.ndarray:
    """The fraction of each grid cell that ``mask`` (the slice's H x W) covers, ``(gh, gw)``."""
    new_h, new_w = grid.new_size
    rows, cols = grid.features.shape[1:]
    resized = cv2.resize(np.asarray(mask, dtype=np.float32), (new_w, new_h), interpolation=cv2.INTER_AREA)
    padded = np.zeros((rows * grid.cell, cols * grid.cell), dtype=np.float32)
    padded[:new_h, :new_w] = resized
    return padded.reshape(rows, grid.cell, cols, grid.cell).mean(axis=(1, 3))


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


@dataclass(frozen=True)
class SimilarityLocator:
    """Target and background prototypes of the prompted frame (module doc)."""

    target: np.ndarray
    background: np.ndarray | None

    @classmethod
    def from_prompted(cls, grid: FeatureGrid, mask: np.ndarray) -> "SimilarityLocator | None":
        """Prototypes from the prompted frame's features and prediction; None for an empty prediction."""
        fractions = cell_fractions(mask, grid)
        if fractions.max() <= 0:
            return None
        inside = fractions >= TARGET_FRACTION
        if not inside.any():  # an object smaller than a cell: its best-covered cells
            inside = fractions >= fractions.max() * 0.999
        features = grid.features
        target = _unit(features[:, inside].mean(axis=1))
        outside = fractions == 0
        background = _unit(features[:, outside].mean(axis=1)) if outside.any() else None
        return cls(target, background)

    def scores(self, grid: FeatureGrid) -> np.ndarray:
        """``f . p_target - f . p_background`` per cell, ``(gh, gw)``."""
        score = np.tensordot(self.target, grid.features, axes=1)
        if self.background is not None:
            score = score - np.tensordot(self.background, grid.features, axes=1)
        return score

    def box(self, grid: FeatureGrid) -> tuple[float, float, float, float]:
        """The tight pixel box (before any margin) of the region around the best-scoring cell."""
        score = self.scores(grid)
        best = np.unravel_index(int(np.argmax(score)), score.shape)
        regions, _ = ndimage.label(score > 0, structure=_EIGHT)
        if regions[best] == 0:  # nothing above 0 (no background prototype, or a frame unlike the first)
            rows, cols = np.array([best[0]]), np.array([best[1]])
        else:
            rows, cols = np.nonzero(regions == regions[best])
        step = grid.cell / grid.scale  # original pixels per cell
        height, width = grid.original_size
        return (cols.min() * step, rows.min() * step,
                min(width - 1.0, (cols.max() + 1) * step - 1), min(height - 1.0, (rows.max() + 1) * step - 1))
