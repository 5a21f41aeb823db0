"""Frames for SAM2's video predictor, prepared in memory as MedSAM2's scripts prepare them.

Split from :mod:`napari_medsam_eval.models.sam2_backend` (which re-exports these names).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np


if TYPE_CHECKING:  # pragma: no cover
    import torch

from .checkpoint_files import shape_text
from .sam2_build import IMAGENET_MEAN, IMAGENET_STD
from ..core.errors import InputError


# --------------------------------------------------------------------------- frames


def to_uint8(frames: np.ndarray) -> np.ndarray:
    """uint8 as is; anything else min-max scaled to 0..255 over the whole array and
    truncated (``np.uint8((x - min) / (max - min) * 255)``, as MedSAM2's script does after
    windowing); a constant array gives zeros."""
    array = np.asarray(frames)
    if array.dtype == np.uint8:
        return array
    values = array.astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise InputError("frames contain NaN or infinite values")
    low, high = float(values.min()), float(values.max())
    if high <= low:
        return np.zeros(array.shape, dtype=np.uint8)
    return ((values - low) / (high - low) * 255.0).astype(np.uint8)


def _check_frames(frames: np.ndarray) -> np.ndarray:
    array = np.asarray(frames)
    if array.ndim == 4 and array.shape[-1] == 1:
        array = array[..., 0]
    if not (array.ndim == 3 or (array.ndim == 4 and array.shape[-1] == 3)):
        raise InputError(f"frames must be T x H x W or T x H x W x 3, got shape {shape_text(array.shape)}")
    if array.shape[0] == 0 or array.shape[1] == 0 or array.shape[2] == 0:
        raise InputError(f"frames are empty: shape {shape_text(array.shape)}")
    return array


def prepare_frames(frames: np.ndarray, image_size: int, *, float64: bool = False) -> tuple["torch.Tensor", int, int]:
    """Frames (T, H, W) or (T, H, W, 3) as the model's normalised input (T, 3, S, S) float32.

    As MedSAM2: uint8 (see :func:`to_uint8`), each frame to RGB and resized to SxS with
    PIL (bicubic, aspect not kept), /255, ImageNet mean/std. Returns the CPU tensor and
    the original height and width.

    The arithmetic follows MedSAM2's scripts to the last bit, because a random or
    barely-trained model turns a 1-ulp input difference into flipped pixels:
    ``float64=True`` is its 3D scripts (``medsam2_infer_3D_CT.py``, the RECIST npz
    script: /255 and the normalisation in float64 numpy/torch, cast to float32 when
    the frame is encoded); ``float64=False`` is its video script (sam2's
    ``load_video_frames``: /255 in float64 stored as float32, the normalisation in
    float32). The cast happens frame by frame, so float64 costs no more memory.
    """
    import torch
    from PIL import Image

    array = to_uint8(_check_frames(frames))
    count, height, width = array.shape[:3]
    images = torch.empty((count, 3, image_size, image_size), dtype=torch.float32)
    mean = torch.tensor(IMAGENET_MEAN, dtype=torch.float32)[:, None, None]
    std = torch.tensor(IMAGENET_STD, dtype=torch.float32)[:, None, None]
    for index in range(count):
        image = Image.fromarray(np.ascontiguousarray(array[index])).convert("RGB")
        resized = np.asarray(image.resize((image_size, image_size), Image.Resampling.BICUBIC)).transpose(2, 0, 1)
        scaled = torch.from_numpy(resized / 255.0)  # float64, as numpy divides
        if float64:
            images[index] = (scaled - mean) / std  # float64 throughout, one cast on assignment
        else:
            images[index] = scaled  # cast to float32 first, as sam2 stores the frames
            images[index] -= mean
            images[index] /= std
    return images, height, width


def init_state_from_frames(
    predictor: Any,
    images: "torch.Tensor",
    video_height: int,
    video_width: int,
    *,
    offload_video_to_cpu: bool = False,
    offload_state_to_cpu: bool = False,
    warm_up: bool = True,
) -> dict[str, Any]:
    """The ``inference_state`` that ``SAM2VideoPredictor.init_state`` (sam2 1.1.0) builds,
    from in-memory frames instead of a JPEG folder.

    ``images`` is the normalised (T, 3, S, S) tensor of :func:`prepare_frames`; it is
    moved to the model's device unless ``offload_video_to_cpu`` (then each frame moves
    when it is encoded, as in the stock predictor). Every field is the stock one;
    ``warm_up`` encodes frame 0 as the stock ``init_state`` does (skip it when the
    caller fills ``cached_features`` itself).
    """
    import torch

    compute_device = predictor.device
    if images.ndim != 4 or images.shape[1] != 3 or images.shape[-1] != predictor.image_size:
        size = predictor.image_size
        raise InputError(f"images must be T x 3 x {size} x {size}, got {shape_text(images.shape)}")
    if not offload_video_to_cpu:
        images = images.to(compute_device)
    inference_state: dict[str, Any] = {}
    inference_state["images"] = images
    inference_state["num_frames"] = len(images)
    inference_state["offload_video_to_cpu"] = offload_video_to_cpu
    inference_state["offload_state_to_cpu"] = offload_state_to_cpu
    inference_state["video_height"] = int(video_height)
    inference_state["video_width"] = int(video_width)
    inference_state["device"] = compute_device
    if offload_state_to_cpu:
        inference_state["storage_device"] = torch.device("cpu")
    else:
        inference_state["storage_device"] = compute_device
    inference_state["point_inputs_per_obj"] = {}
    inference_state["mask_inputs_per_obj"] = {}
    inference_state["cached_features"] = {}
    inference_state["constants"] = {}
    inference_state["obj_id_to_idx"] = OrderedDict()
    inference_state["obj_idx_to_id"] = OrderedDict()
    inference_state["obj_ids"] = []
    inference_state["output_dict_per_obj"] = {}
    inference_state["temp_output_dict_per_obj"] = {}
    inference_state["frames_tracked_per_obj"] = {}
    if warm_up:
        predictor._get_image_feature(inference_state, frame_idx=0, batch_size=1)
    return inference_state


