"""An image's prediction layer: one Labels layer, one label value per object, without Qt.

Each object (target label) of an image is a value in the same Labels layer
(:func:`prediction_layer_name`), drawn in the prediction style of
:mod:`napari_medsam_eval._layer_style` (warm contours, so the filled ground
truth stays visible). Every object keeps its own whole mask
(:mod:`.._widgets.common._object_masks`): writing an object replaces that object's mask only (the
whole volume, or one slice), and the layer draws all of them, an object inside another over it, so
nested and overlapping objects are all shown and none loses a voxel to another. The layer's
``metadata['objects']`` keeps each object's prompt, model, propagation stops and the ground-truth
labels it is; ``metadata['target_label']`` names the object written last (the Compare widget compares
that one).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from napari.layers import Image, Labels

from napari_medsam_eval._layer_style import style_prediction
from napari_medsam_eval._widgets.common._canvas import show_view
from napari_medsam_eval._widgets.common._outlined_labels import OutlinedLabels
from napari_medsam_eval._widgets.common._layers import find_layer, spatial_shape, transform_kwargs
from napari_medsam_eval._widgets.common._object_masks import MASKS_KEY, drawing_order, masks_of, object_mask
from napari_medsam_eval.core.errors import InputError


def prediction_layer_name(image_name: str) -> str:
    return f"{image_name} prediction"


def _source_geometry(image: Image) -> dict[str, Any]:
    """The reader's ``kind`` and file ``geometry`` of ``image``, for saving a prediction."""
    source = image.metadata if isinstance(image.metadata, dict) else {}
    return {key: source[key] for key in ("kind", "geometry") if key in source}


def _dtype_for(value: int, current: np.dtype | None = None) -> np.dtype:
    need = np.dtype(np.uint8) if value < 256 else np.dtype(np.int32)
    if current is None:
        return need
    return np.promote_types(current, need)


def write_object(viewer: Any, image: Image, target_label: int, mask: np.ndarray, *, index: int | None = None,
                 metadata: dict[str, Any] | None = None) -> Labels:
    """Put ``mask`` (whole, or slice ``index``) as object ``target_label`` into ``image``'s prediction layer.

    The object's own mask is replaced there (an empty whole mask removes the object); every other object
    keeps its own, and the layer draws them all (:func:`~.._widgets.common._object_masks.compose`). The
    layer is created (prediction style, the image's transform) when missing. ``metadata`` (prompt, model,
    stops, the ground-truth ``labels``) is kept for this object under ``metadata['objects']``.
    """
    shape = spatial_shape(image)
    value = int(target_label)
    mask = np.asarray(mask, dtype=bool)
    layer = find_layer(viewer, prediction_layer_name(image.name), Labels, shape)
    masks = {} if layer is None else masks_of(layer)
    before = masks.get(value)
    own = np.zeros(shape, dtype=bool) if before is None else before.copy()
    region = own if index is None else own[index]
    if mask.shape != region.shape:
        raise InputError(f"prediction shape {mask.shape} does not match the image's {region.shape}")
    changed = region.copy()  # where the object was (that slice), and where it is now: drawn again
    region[...] = mask
    changed |= region
    if own.any():
        masks[value] = own
    else:
        masks.pop(value, None)
    dtype = _dtype_for(max(masks, default=value), None if layer is None else layer.data.dtype)
    data = np.zeros(shape, dtype=dtype) if layer is None else np.asarray(layer.data).astype(dtype, copy=True)
    where = data if index is None else data[index]
    where[changed] = 0  # anything painted elsewhere and not committed stays as it is
    for other in drawing_order(masks):
        drawn = masks[other] if index is None else masks[other][index]
        where[changed & drawn] = other
    return _store(viewer, image, layer, data, value, masks, metadata or {})


def _store(viewer: Any, image: Image, layer: Labels | None, data: np.ndarray, value: int,
           masks: dict[int, np.ndarray], metadata: dict[str, Any]) -> Labels:
    meta = {"role": "prediction", "target_label": value, "image": image.name, **_source_geometry(image)}
    meta.update({key: metadata[key] for key in ("model", "stops", "prompt") if key in metadata})
    if layer is None:
        layer = style_prediction(OutlinedLabels(data, name=prediction_layer_name(image.name), metadata=meta,
                                        **transform_kwargs(image)))
        layer.metadata["objects"] = {}
        layer.metadata[MASKS_KEY] = masks
        layer = viewer.add_layer(layer)
    else:
        layer.metadata.update(meta)
        layer.metadata[MASKS_KEY] = masks
        layer.data = data
    if metadata or value not in layer.metadata.setdefault("objects", {}):
        layer.metadata["objects"][value] = dict(metadata)
    show_view(viewer, "truth & prediction", image, prediction=layer)  # the canvas composer: order, style, legend
    return layer


__all__ = ["object_mask", "prediction_layer_name", "write_object"]
