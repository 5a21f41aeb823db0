"""The TP/FP/FN overlay layer of a comparison, without Qt (a prediction: :mod:`._prediction_layer`).

A Labels layer with its reference's transform and the metadata ``role``
``overlay`` that the widgets pick it by; writing again replaces its data.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from napari.layers import Labels, Layer
from napari.utils.colormaps import DirectLabelColormap

from .._layer_style import OVERLAY_COLORS
from ._layers import add_inactive, transform_kwargs


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
        return add_inactive(viewer, layer)
    layer.metadata["target_label"] = target_label
    for key, value in transform_kwargs(reference).items():
        setattr(layer, key, value)
    layer.data = overlay
    layer.name = name
    return layer


__all__ = ["OVERLAY_COLORS", "overlay_colormap", "overlay_layer_name", "write_overlay"]
