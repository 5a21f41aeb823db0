"""An image's prediction layer: one Labels layer, one label value per object, without Qt.

Each object (target label) of an image is a value in the same Labels layer
(:func:`prediction_layer_name`), drawn in the prediction style of
:mod:`napari_medsam_eval._layer_style` (warm contours, so the filled ground
truth stays visible). Writing an object replaces that object's pixels only
(the whole volume, or one slice) and never takes a pixel another object
holds: committing one object does not overwrite another. The layer's
``metadata['objects']`` keeps each object's prompt, model, propagation stops
and name; ``metadata['target_label']`` names the object written last (the
Compare widget compares that one).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from napari.layers import Image, Labels

from napari_medsam_eval._layer_style import style_prediction
from napari_medsam_eval._widgets.common._layers import find_layer, spatial_shape, transform_kwargs


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


def object_mask(layer: Labels, target_label: int) -> np.ndarray:
    """Where ``layer`` holds object ``target_label`` (bool, the layer's shape)."""
    return np.asarray(layer.data) == int(target_label)


def write_object(viewer: Any, image: Image, target_label: int, mask: np.ndarray, *, index: int | None = None,
                 metadata: dict[str, Any] | None = None) -> Labels:
    """Put ``mask`` (whole, or slice ``index``) as object ``target_label`` into ``image``'s prediction layer.

    The object's old pixels there are cleared; the mask's pixels that another
    object holds stay that object's. The layer is created (prediction style,
    the image's transform) when missing. ``metadata`` (prompt, model, stops)
    is kept for this object under ``metadata['objects']``.
    """
    shape = spatial_shape(image)
    value = int(target_label)
    mask = np.asarray(mask, dtype=bool)
    layer = find_layer(viewer, prediction_layer_name(image.name), Labels, shape)
    if layer is None:
        data = np.zeros(shape, dtype=_dtype_for(value))
    else:
        data = np.asarray(layer.data).astype(_dtype_for(value, layer.data.dtype), copy=True)
    region = data if index is None else data[index]
    if mask.shape != region.shape:
        raise ValueError(f"prediction shape {mask.shape} does not match the image's {region.shape}")
    region[region == value] = 0
    region[mask & (region == 0)] = value
    return _store(viewer, image, layer, data, value, metadata or {})


def _store(viewer: Any, image: Image, layer: Labels | None, data: np.ndarray, value: int,
           metadata: dict[str, Any]) -> Labels:
    meta = {"role": "prediction", "target_label": value, "image": image.name, **_source_geometry(image)}
    meta.update({key: metadata[key] for key in ("model", "stops", "prompt") if key in metadata})
    if layer is None:
        layer = style_prediction(Labels(data, name=prediction_layer_name(image.name), metadata=meta,
                                        **transform_kwargs(image)))
        layer.metadata["objects"] = {}
        layer = viewer.add_layer(layer)
    else:
        layer.metadata.update(meta)
        layer.data = data
    layer.metadata.setdefault("objects", {})[value] = dict(metadata)
    return layer


__all__ = ["object_mask", "prediction_layer_name", "write_object"]
