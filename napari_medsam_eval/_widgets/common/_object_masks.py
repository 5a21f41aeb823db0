"""Each object's own mask in a prediction layer, without Qt: what is drawn, what is kept, what is compared.

A prediction Labels layer shows an image's objects as one label map, one value per object. Objects may
nest (a lesion inside the liver) or overlap (a region holding another), and one label map cannot hold
two values in a pixel, so the layer keeps every object's whole mask apart, in ``metadata["masks"]``
(value -> bool array of the layer's shape), and draws them by :func:`compose`: larger objects first, so
an object inside another is drawn over it and both contours show. What is kept is what counts: Compare
scores an object's own mask (:func:`prediction_mask`), an undo or a correction of one object never
touches another's, and saving a layer whose objects overlap writes each hidden one to a file of its own
(``_writer``). ``metadata["objects"]`` records each object's prompt, model, stops and the ground-truth
``labels`` it is (a region of several labels: :func:`truth_labels`). A layer made elsewhere (an opened
run row, a file) has no masks: its values are its objects.
"""
from __future__ import annotations

from typing import Any

import numpy as np

#: the metadata key of each object's own mask
MASKS_KEY = "masks"


def stored_masks(layer: Any) -> dict[int, np.ndarray] | None:
    """The layer's kept masks (value -> bool array), or None for a layer that keeps none."""
    masks = (getattr(layer, "metadata", None) or {}).get(MASKS_KEY)
    return masks if isinstance(masks, dict) else None


def masks_of(layer: Any) -> dict[int, np.ndarray]:
    """Every object's mask: the kept ones, else each value of the layer's data."""
    masks = stored_masks(layer)
    if masks is not None:
        return dict(masks)
    data = np.asarray(layer.data)
    return {int(v): data == v for v in np.unique(data) if v > 0}


def object_mask(layer: Any, value: int) -> np.ndarray:
    """Object ``value``'s own whole mask (bool, the layer's shape; all False when it has none)."""
    masks = stored_masks(layer)
    if masks is None:
        return np.asarray(layer.data) == int(value)
    mask = masks.get(int(value))
    return np.zeros(np.shape(layer.data), dtype=bool) if mask is None else mask.copy()


def drawing_order(masks: dict[int, np.ndarray]) -> list[int]:
    """Values largest first (then by value): a later one is drawn over an earlier one."""
    return sorted(masks, key=lambda v: (-int(np.count_nonzero(masks[v])), v))


def compose(masks: dict[int, np.ndarray], shape: tuple[int, ...], dtype: Any,
            index: int | None = None) -> np.ndarray:
    """The label map that shows ``masks`` (or its slice ``index``): each object drawn over the larger ones."""
    out = np.zeros(shape if index is None else shape[1:], dtype=dtype)
    for value in drawing_order(masks):
        out[masks[value] if index is None else masks[value][index]] = value
    return out


def hidden_objects(layer_or_masks: Any, data: np.ndarray | None = None) -> dict[int, int]:
    """Objects that the drawn label map does not show whole: value -> pixels of it drawn as another object."""
    masks = layer_or_masks if isinstance(layer_or_masks, dict) else stored_masks(layer_or_masks)
    if not masks:
        return {}
    data = np.asarray(layer_or_masks.data if data is None else data)
    hidden = {int(v): int(np.count_nonzero(m & (data != v))) for v, m in masks.items()}
    return {v: n for v, n in hidden.items() if n}


def truth_labels(layer: Any, value: int) -> tuple[int, ...]:
    """The ground-truth labels object ``value`` of a prediction layer is (its record's ``labels``: a region
    of several labels), else ``(value,)``."""
    objects = (getattr(layer, "metadata", None) or {}).get("objects") or {}
    record = objects.get(int(value), objects.get(str(value))) if isinstance(objects, dict) else None
    labels = (record or {}).get("labels") if isinstance(record, dict) else None
    return tuple(int(v) for v in labels) if labels else (int(value),)


def prediction_mask(layer: Any, value: int) -> np.ndarray | None:
    """Object ``value``'s kept mask, or None when the layer keeps none (then its data are compared as they are)."""
    masks = stored_masks(layer)
    return None if masks is None else object_mask(layer, value)


def labels_words(value: int, labels: tuple[int, ...]) -> str:
    """``label 2``, or ``object 4 (labels 1, 3)`` for an object that is a region of other labels."""
    if tuple(labels) == (int(value),):
        return f"label {value}"
    return f"object {value} (label{'s' if len(labels) > 1 else ''} {', '.join(str(v) for v in labels)})"


__all__ = ["MASKS_KEY", "compose", "drawing_order", "hidden_objects", "labels_words", "masks_of", "object_mask",
           "prediction_mask", "stored_masks", "truth_labels"]
