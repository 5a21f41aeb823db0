"""Weight-free reference backends: a lower and an upper bound for any model.

* ``box``: the prompt box itself, filled (inclusive pixel box), union for several
  boxes. What a model must beat to be worth its encoder pass.
* ``oracle``: the ground truth of the prompted target on the prompted slice.
  It answers from a label map given to it with :meth:`OracleBackend.set_ground_truth`
  (the label map of the case being evaluated: ``(Z, H, W)`` for a volume or
  video, ``(H, W)`` for an image) and uses ``prompt.target_label`` and
  ``prompt.slice_index``; the prompt's geometry is ignored. Run through
  :func:`napari_medsam_eval.propagation.propagate_volume` it is a perfect
  per-slice model, so its score is the ceiling of the propagation protocol
  itself (it loses slices only where the target has gaps in z).

Neither needs torch; both ignore ``cache_key``.
"""
from __future__ import annotations

import math
from typing import Hashable

import numpy as np

from ..core.prompt import Prompt
from .base import SegmentationBackend, SegmentResult
from .checkpoint_files import ModelOptionError, shape_text, warn_unused_model_options
from ..core.errors import InputError


def _slice_shape(image: np.ndarray) -> tuple[int, int]:
    image = np.asarray(image)
    if image.ndim == 2 or (image.ndim == 3 and image.shape[-1] in (1, 3, 4)):
        return int(image.shape[0]), int(image.shape[1])
    raise InputError(f"expected one 2D slice, H x W or H x W x 3, got shape {shape_text(image.shape)}")


def box_mask(box: tuple[float, float, float, float], shape: tuple[int, int]) -> np.ndarray:
    """A filled, inclusive box ``(x0, y0, x1, y1)`` as a bool (H, W) mask.

    Fractional coordinates cover every pixel the box touches
    (``floor(x0)..ceil(x1)``); the box is clipped to the image.
    """
    h, w = shape
    x0, y0, x1, y1 = box
    c0, r0 = max(0, math.floor(x0)), max(0, math.floor(y0))
    c1, r1 = min(w - 1, math.ceil(x1)), min(h - 1, math.ceil(y1))
    mask = np.zeros(shape, dtype=bool)
    if c0 <= c1 and r0 <= r1:
        mask[r0 : r1 + 1, c0 : c1 + 1] = True
    return mask


class BoxBackend(SegmentationBackend):
    """The prompt box as the segmentation (points-only prompts are refused)."""

    name = "box"
    accepts = frozenset({"box"})

    def segment(self, image: np.ndarray, prompt: Prompt, *, cache_key: Hashable | None = None) -> SegmentResult:
        self.check_prompt(prompt)
        shape = _slice_shape(image)
        mask = np.zeros(shape, dtype=bool)
        for box in prompt.boxes:
            mask |= box_mask(box, shape)
        return SegmentResult(mask=mask, timings={"encoder": 0.0, "decoder": 0.0})

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "checkpoint": None}


class OracleBackend(SegmentationBackend):
    """Returns the ground truth of ``prompt.target_label`` (a label, or a region's key) on ``prompt.slice_index``."""

    name = "oracle"
    accepts = frozenset({"box", "points", "mask"})

    def __init__(self, ground_truth: np.ndarray | None = None) -> None:
        self._gt: np.ndarray | None = None
        self._masks: dict = {}
        if ground_truth is not None:
            self.set_ground_truth(ground_truth)

    def set_ground_truth(self, label_map: np.ndarray | None, masks: dict | None = None) -> None:
        """Give the label map of the case about to be segmented (None forgets it); ``masks``: the mask of
        each target key that is not a label of its own (a region of several labels), and of each lesion
        under ``(key, lesion number)`` (a prompt's ``info["lesion"]``)."""
        if label_map is None:
            self._gt, self._masks = None, {}
            return
        label_map = np.asarray(label_map)
        if label_map.ndim not in (2, 3):
            raise InputError(f"ground truth must be H x W or N x H x W, got shape {shape_text(label_map.shape)}")
        self._gt = label_map
        self._masks = {k: np.asarray(v, dtype=bool) for k, v in (masks or {}).items()}

    def segment(self, image: np.ndarray, prompt: Prompt, *, cache_key: Hashable | None = None) -> SegmentResult:
        self.check_prompt(prompt)
        if self._gt is None:
            raise InputError("oracle backend has no ground truth: call set_ground_truth(label_map) first")
        shape = _slice_shape(image)
        key = (int(prompt.target_label), prompt.info.get("lesion"))
        key = key if key in self._masks else key[0]
        gt = self._masks.get(key, self._gt)
        if gt.ndim == 3:
            if prompt.slice_index is None:
                raise InputError("oracle backend: the prompt needs a slice_index for a 3D ground truth")
            z = int(prompt.slice_index)
            if not 0 <= z < gt.shape[0]:
                raise InputError(f"oracle backend: slice_index {z} outside the ground truth (0 to {gt.shape[0] - 1})")
            gt = gt[z]
        if gt.shape != shape:
            raise InputError(f"oracle backend: ground truth slice {shape_text(gt.shape)} does not match "
                             f"the image {shape_text(shape)}")
        mask = gt.copy() if key in self._masks else gt == key
        return SegmentResult(mask=mask, timings={"encoder": 0.0, "decoder": 0.0})

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "checkpoint": None}


def _no_weights(name: str, checkpoint: object) -> None:
    if checkpoint is not None:
        raise ModelOptionError(f"the {name} baseline has no weights; do not pass a checkpoint")


def build_box(checkpoint: object = None, device: object = None, **ignored: object) -> BoxBackend:
    """The ``box`` baseline. ``device`` and other model options are accepted and ignored,
    with a warning (it runs no network)."""
    _no_weights("box", checkpoint)
    warn_unused_model_options("box", device, ignored)
    return BoxBackend()


def build_oracle(
    ground_truth: np.ndarray | None = None, checkpoint: object = None, device: object = None, **ignored: object
) -> OracleBackend:
    """The ``oracle`` baseline; give the label map now or later with ``set_ground_truth``.
    ``device`` and other model options are ignored, with a warning (it runs no network)."""
    _no_weights("oracle", checkpoint)
    warn_unused_model_options("oracle", device, ignored)
    return OracleBackend(ground_truth)


__all__ = ["BoxBackend", "OracleBackend", "box_mask", "build_box", "build_oracle"]
