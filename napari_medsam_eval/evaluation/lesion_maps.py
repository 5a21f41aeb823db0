"""A case's lesions as numbered maps: connected components (full connectivity, scan order), an instance
map's values, a target's lesions in a label map, and each lesion's bounding box (what lets lesion work hold
one lesion's crop at a time). :mod:`.lesions` matches and scores them.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import ndimage

from ..core.errors import InputError
from ..core.targets import Target


def components(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """The connected components of a bool mask with full connectivity, numbered 1..n in scan order."""
    mask = np.asarray(mask, dtype=bool)
    structure = np.ones((3,) * mask.ndim, dtype=bool)
    try:  # 2 bytes a voxel while the count allows (memory bounded by the case, thousands of lesions)
        labels, count = ndimage.label(mask, structure=structure, output=np.uint16)
    except RuntimeError:  # more than 65,535 components
        labels, count = ndimage.label(mask, structure=structure)
    return labels, int(count)


def instance_numbers(labels: np.ndarray) -> list[int]:
    """The non-zero values an instance map holds, ascending (a map of integers >= 0)."""
    array = np.asarray(labels)
    if array.size == 0:
        return []
    if array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
        raise InputError(f"an instance map holds whole numbers (each object its value), got {array.dtype}")
    if int(array.min()) < 0:
        raise InputError(f"an instance map holds values >= 0 (0 the background), got {int(array.min())}")
    top = int(array.max())
    if top < 1 << 24:  # a count per value: linear, no sort
        return [int(v) for v in np.flatnonzero(np.bincount(array.ravel(), minlength=top + 1))[1:]]
    return [int(v) for v in np.unique(array) if v]


def lesion_labels(label_map: np.ndarray, target: Target) -> tuple[np.ndarray, list[int]]:
    """``target``'s lesions in ``label_map`` numbered, and their numbers: connected components 1..n (scan
    order) of its mask, or, for an instance target, the map's values inside its mask (each its number)."""
    label_map = np.asarray(label_map)
    if target.instances:
        labels = np.where(target.mask(label_map), label_map, 0) if target.labels else label_map
        return labels, instance_numbers(labels)
    labels, count = components(target.mask(label_map))
    return labels, list(range(1, count + 1))


def lesion_boxes(labels: np.ndarray, numbers: Sequence[int]):
    """``(number, box)`` of each lesion of a numbered map, one at a time (``find_objects`` boxes): what lets
    a caller make one lesion's mask at a time (``labels[box] == number``) instead of one per lesion at once."""
    boxes = ndimage.find_objects(np.asarray(labels)) if len(numbers) else []
    for number in numbers:
        box = boxes[number - 1] if number - 1 < len(boxes) else None
        if box is not None:
            yield number, box


__all__ = ["components", "instance_numbers", "lesion_boxes", "lesion_labels"]
