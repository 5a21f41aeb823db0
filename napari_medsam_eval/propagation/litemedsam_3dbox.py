"""The 3D inference of LiteMedSAM's official ``CVPR24_LiteMedSAM_infer.py``, reproduced exactly."""
from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np

from ..core.errors import Cancelled
from ..models.base import SegmentationBackend
from ..core.progress import SliceProgress
from .slice_by_slice import _check_stack, _Progress
from ..core.errors import InputError, InputTypeError

Box3D = Sequence[float]  # (x_min, y_min, z_min, x_max, y_max, z_max), inclusive


def propagate_official_litemedsam(
    backend: SegmentationBackend,
    volume: np.ndarray,
    boxes_3d: Sequence[Box3D] | np.ndarray,
    *,
    progress: SliceProgress | None = None,
    case_id: Hashable = None,
) -> np.ndarray:
    """The 3D inference of LiteMedSAM's ``CVPR24_LiteMedSAM_infer.py``, reproduced.

    ``boxes_3d`` holds ``(x_min, y_min, z_min, x_max, y_max, z_max)`` per target
    (the npz ``boxes`` key); box ``i`` writes label ``i + 1``. For each box:

    * the middle slice ``int((z_max - z_min) / 2 + z_min)`` is segmented with
      the xy box scaled to 256 (``int()`` truncation);
    * up from the middle to ``z_max`` inclusive, then down from ``middle - 1``
      to ``z_min`` inclusive; each further slice's box is the tight box, at
      256 scale, of the previous slice's mask (label-valued uint8, resized with
      ``INTER_AREA``, padded), widened by 3 px and clipped to 0..256, passed to
      the model *without* rescaling; an empty previous mask falls back to the
      original box;
    * no early stop; later boxes overwrite earlier ones.

    Needs the LiteMedSAM backend (boxes at 256 scale are model-specific).
    Embeddings are cached per ``(case_id, z)``, which changes no result. Returns
    a uint8 label map (uint16 beyond 255 boxes).
    """
    from ..models.litemedsam import LiteMedSAMBackend
    from ..models.litemedsam_preprocess import get_bbox256, pad_image, resize_box_to_256, resize_longest_side

    if not isinstance(backend, LiteMedSAMBackend):
        raise InputTypeError(f"the official LiteMedSAM protocol needs the litemedsam backend, got {backend.name!r}")
    volume = _check_stack(volume, "volume")
    boxes = np.asarray(boxes_3d)
    if boxes.size == 0:
        raise InputError("no 3D boxes given")
    boxes = boxes.reshape(-1, 6)
    n = volume.shape[0]
    plans = []
    total = 0
    for i, box3d in enumerate(boxes):
        x_min, y_min, z_min, x_max, y_max, z_max = box3d
        z_min, z_max = int(z_min), int(z_max)
        if not z_min < z_max:
            raise InputError(
                f"3D box {i}: z_min must be smaller than z_max (the official script asserts it), got {box3d}"
            )
        z_middle = int((z_max - z_min) / 2 + z_min)
        z_stop_up = min(z_max + 1, n)
        z_stop_down = max(-1, z_min - 1)
        up = range(z_middle, z_stop_up)
        down = range(z_middle - 1, z_stop_down, -1)
        plans.append((np.array([x_min, y_min, x_max, y_max]), z_middle, up, down))
        total += len(up) + len(down)

    dtype = np.uint8 if len(boxes) <= 255 else np.uint16
    segs = np.zeros(volume.shape[:3], dtype=dtype)
    tracker = _Progress(progress, total, segs)
    for idx, (mid_box, z_middle, up, down) in enumerate(plans, start=1):
        value = min(idx, 255)  # the official uint8 temp mask
        temp = np.zeros(volume.shape[:3], dtype=np.uint8)

        def box_for(z: int, previous: int | None) -> np.ndarray:
            size = volume.shape[1:3]
            if previous is None:
                return resize_box_to_256(mid_box, original_size=size)
            pre_seg256 = resize_longest_side(temp[previous])
            if np.max(pre_seg256) > 0:
                return get_bbox256(pad_image(pre_seg256))
            return resize_box_to_256(mid_box, original_size=size)

        try:
            for z in up:
                box_256 = box_for(z, None if z == z_middle else z - 1)
                mask = backend.segment_box256(volume[z], box_256, cache_key=(case_id, z)).mask
                temp[z, mask] = value
                tracker.step()
            for z in down:
                box_256 = box_for(z, z + 1)
                mask = backend.segment_box256(volume[z], box_256, cache_key=(case_id, z)).mask
                temp[z, mask] = value
                tracker.step()
        except Cancelled as stop:
            segs[temp > 0] = idx  # the partial result includes the box in progress
            raise Cancelled(segs, stop.done, stop.total) from None
        segs[temp > 0] = idx
    tracker.finish()
    return segs
