"""Result layers, without Qt: a target's prediction and the TP/FP/FN overlay of a comparison.

Both are Labels layers with their reference's transform and a metadata
``role`` (``prediction`` with ``target_label``, ``overlay``) that the
widgets pick them by; writing again replaces the data of the same layer.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from napari.layers import Image, Labels, Layer
from napari.utils.colormaps import DirectLabelColormap

from ..comparison import OVERLAY_FN, OVERLAY_FP, OVERLAY_TP
from ._layers import find_layer, spatial_shape, transform_kwargs

#: overlay colours: TP green, FP magenta (predicted, not true), FN cyan (missed)
OVERLAY_COLORS = {OVERLAY_TP: "lime", OVERLAY_FP: "magenta", OVERLAY_FN: "cyan"}


def prediction_layer_name(target_label: int) -> str:
    return f"prediction [label {int(target_label)}]"


def _source_geometry(image: Image) -> dict[str, Any]:
    """The reader's ``kind`` and file ``geometry`` of ``image``, for saving a prediction."""
    source = image.metadata if isinstance(image.metadata, dict) else {}
    return {key: source[key] for key in ("kind", "geometry") if key in source}


def write_prediction(
    viewer: Any,
    image: Image,
    target_label: int,
    mask: np.ndarray,
    *,
    index: int | None = None,
    metadata: dict[str, Any] | None = None,
) -> Labels:
    """Put ``mask`` (whole, or slice ``index`` of it) into the target's prediction layer.

    The layer (:func:`prediction_layer_name`) holds ``target_label`` where the
    mask is set; it is created with the image's transform or, when it exists,
    its data are replaced (a slice: only that slice).
    """
    shape = spatial_shape(image)
    name = prediction_layer_name(target_label)
    mask = np.asarray(mask, dtype=bool)
    layer = find_layer(viewer, name, Labels, shape)
    meta = {"role": "prediction", "target_label": int(target_label), "image": image.name,
            **_source_geometry(image), **(metadata or {})}
    value = int(target_label)
    if layer is None:
        data = np.zeros(shape, dtype=np.uint8 if value < 256 else np.int32)
    else:
        data = np.array(layer.data, copy=True)
    if index is None:
        if mask.shape != shape:
            raise ValueError(f"prediction shape {mask.shape} does not match the image's {shape}")
        data[...] = 0
        data[mask] = value
    else:
        data[index] = 0
        data[index][mask] = value
    if layer is None:
        layer = Labels(data, name=name, metadata=meta, opacity=0.6, **transform_kwargs(image))
        return viewer.add_layer(layer)
    layer.metadata.update(meta)
    layer.data = data
    return layer


def overlay_colormap() -> DirectLabelColormap:
    """TP / FP / FN colours (:data:`OVERLAY_COLORS`), everything else transparent."""
    colors: dict[Any, Any] = {None: "transparent", 0: "transparent"}
    colors.update(OVERLAY_COLORS)
    return DirectLabelColormap(color_dict=colors)


def overlay_layer_name(target_label: int | None) -> str:
    return "TP/FP/FN" if target_label is None else f"TP/FP/FN [label {int(target_label)}]"


def write_overlay(viewer: Any, reference: Layer, overlay: np.ndarray, target_label: int | None) -> Labels:
    """Show ``overlay`` in the viewer's one TP/FP/FN Labels layer (fixed colours), over ``reference``'s transform.

    A comparison replaces the last one: the overlay layer already there (role ``overlay``, whatever its
    target or shape) gets the new data, name and transform; further overlay layers are removed.
    """
    name = overlay_layer_name(target_label)
    overlays = [layer for layer in viewer.layers
                if isinstance(layer, Labels) and layer.metadata.get("role") == "overlay"]
    layer = next((layer for layer in overlays if layer.ndim == overlay.ndim), None)
    extra = [other for other in overlays if other is not layer]
    if extra:
        with viewer.layers.batched_update():  # one scene-graph clean-up for all
            for other in extra:
                viewer.layers.remove(other)
    if layer is None:
        layer = Labels(overlay, name=name, colormap=overlay_colormap(), opacity=0.7,
                       metadata={"role": "overlay", "target_label": target_label}, **transform_kwargs(reference))
        return viewer.add_layer(layer)
    layer.metadata["target_label"] = target_label
    for key, value in transform_kwargs(reference).items():
        setattr(layer, key, value)
    layer.data = overlay
    layer.name = name
    return layer


__all__ = ["OVERLAY_COLORS", "overlay_colormap", "overlay_layer_name", "prediction_layer_name", "write_overlay",
           "write_prediction"]
