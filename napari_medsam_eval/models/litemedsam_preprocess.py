"""LiteMedSAM's official preprocessing, as pure functions (names as in the official script).

Split from :mod:`napari_medsam_eval.models.litemedsam` (whose docstring lists
the steps): the slice and box transforms of ``CVPR24_LiteMedSAM_infer.py``
(github.com/bowang-lab/MedSAM, branch LiteMedSAM), used by the backend and by
the reproduction of the official 3D loop (:mod:`napari_medsam_eval.propagation.litemedsam_3dbox`).
No torch here: numpy and OpenCV only.
"""
from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from .checkpoint_files import shape_text
from ..core.errors import InputError

#: side of the square model input and of the low-resolution logits
IMAGE_SIZE = 256
#: pixels (at 256 scale) the official 3D script widens a propagated box by
BBOX_SHIFT_256 = 3


def resize_longest_side(image: np.ndarray, target_length: int = IMAGE_SIZE) -> np.ndarray:
    """Resize so the longest side is ``target_length`` (``cv2.INTER_AREA``, aspect kept).

    The new size is ``int(side * scale + 0.5)`` as in the official script (never
    below 1 pixel, where the official script would fail).
    """
    oldh, oldw = image.shape[0], image.shape[1]
    scale = target_length * 1.0 / max(oldh, oldw)
    newh, neww = oldh * scale, oldw * scale
    neww, newh = max(1, int(neww + 0.5)), max(1, int(newh + 0.5))
    return cv2.resize(image, (neww, newh), interpolation=cv2.INTER_AREA)


def pad_image(image: np.ndarray, target_size: int = IMAGE_SIZE) -> np.ndarray:
    """Zero-pad at the bottom and right to ``target_size`` x ``target_size``."""
    h, w = image.shape[0], image.shape[1]
    padh, padw = target_size - h, target_size - w
    if image.ndim == 3:
        return np.pad(image, ((0, padh), (0, padw), (0, 0)))
    return np.pad(image, ((0, padh), (0, padw)))


def resize_box_to_256(box: Sequence[float] | np.ndarray, original_size: tuple[int, int]) -> np.ndarray:
    """Scale a box (or any coordinates) of an ``original_size`` image to 256 scale.

    Every value is multiplied by ``256 / max(H, W)`` and truncated with ``int()``
    (toward zero), as the official ``resize_box_to_256``. The dtype of ``box`` is
    kept (an integer box stays integer).
    """
    box = np.asarray(box)
    new_box = np.zeros_like(box)
    ratio = IMAGE_SIZE / max(original_size)
    flat_in, flat_out = box.reshape(-1), new_box.reshape(-1)
    for i in range(flat_in.size):
        flat_out[i] = int(flat_in[i] * ratio)
    return new_box


def get_bbox256(mask_256: np.ndarray, bbox_shift: int = BBOX_SHIFT_256) -> np.ndarray:
    """Tight box of a 256x256 mask widened by ``bbox_shift`` and clipped to ``0..256``.

    As the official ``get_bbox256``: the upper clip is the side length (256),
    not the last index (255). ``mask_256`` must have a foreground pixel.
    """
    y_indices, x_indices = np.where(mask_256 > 0)
    x_min, x_max = np.min(x_indices), np.max(x_indices)
    y_min, y_max = np.min(y_indices), np.max(y_indices)
    H, W = mask_256.shape
    x_min = max(0, x_min - bbox_shift)
    x_max = min(W, x_max + bbox_shift)
    y_min = max(0, y_min - bbox_shift)
    y_max = min(H, y_max + bbox_shift)
    return np.array([x_min, y_min, x_max, y_max])


def to_three_channels(image: np.ndarray) -> np.ndarray:
    """(H, W) grey -> (H, W, 3) by copying; (H, W, 3) kept; RGBA drops alpha."""
    image = np.asarray(image)
    if image.ndim == 2:
        return np.repeat(image[:, :, None], 3, axis=-1)
    if image.ndim == 3 and image.shape[-1] == 3:
        return image
    if image.ndim == 3 and image.shape[-1] == 4:
        return image[..., :3]
    if image.ndim == 3 and image.shape[-1] == 1:
        return np.repeat(image, 3, axis=-1)
    raise InputError(f"expected one 2D slice (H x W) or an RGB image (H x W x 3), got shape {shape_text(image.shape)}")


def preprocess_slice(image: np.ndarray) -> tuple[np.ndarray, tuple[int, int], tuple[int, int]]:
    """The official preprocessing of one 2D image/slice.

    Returns the padded ``(256, 256, 3)`` float64 array in [0, 1], the resized
    size ``(new_H, new_W)`` before padding, and the original ``(H, W)``.
    ``image`` should be uint8 (what the official script takes); another numeric
    dtype is converted to float32 first (the min-max step makes the scale
    irrelevant, but the uint8 rounding after the resize is then absent).
    """
    image = np.asarray(image)
    if image.dtype != np.uint8:
        if not (np.issubdtype(image.dtype, np.number) or image.dtype == bool):
            raise InputError(f"image must be numeric, got dtype {image.dtype}")
        image = image.astype(np.float32)
        if not np.isfinite(image).all():
            raise InputError("image contains NaN or infinite values")
    img_3c = to_three_channels(image)
    H, W = img_3c.shape[:2]
    img_256 = resize_longest_side(img_3c, IMAGE_SIZE)
    new_H, new_W = img_256.shape[:2]
    img_256 = (img_256 - img_256.min()) / np.clip(img_256.max() - img_256.min(), a_min=1e-8, a_max=None)
    return pad_image(img_256, IMAGE_SIZE), (new_H, new_W), (H, W)
