"""The TP/FP/FN overlay layer of a comparison and the agreement map's colours, without Qt (a
prediction: :mod:`._prediction_layer`).

The overlay is a Labels layer with its reference's transform and the metadata ``role``
``overlay`` that the widgets pick it by; writing again replaces its data. It is drawn under the
prediction compared (:func:`draw_under`), so the prediction's contour stays on top of the fill.

The agreement map of a prompt sensitivity is drawn opaque in the bins of
:data:`~napari_medsam_eval.core.palette.AGREEMENT_BINS` (:func:`agreement_colormap`), so its legend
(:func:`agreement_legend`) shows exactly the colours on screen, whatever lies under it.
"""
from __future__ import annotations

import html
from typing import Any

import numpy as np
from napari.layers import Labels, Layer
from napari.utils.colormaps import Colormap, DirectLabelColormap

from napari_medsam_eval._layer_style import OVERLAY_COLORS
from napari_medsam_eval.core.palette import AGREEMENT_BINS, BLACK, WHITE, hex_to_rgb
from napari_medsam_eval._widgets.common._layers import add_inactive, transform_kwargs

#: agreement below this is no run at all (a share of at most 1000 runs is 0 or at least 1/1000)
NO_RUN = 1e-4
#: opacity of the TP/FP/FN overlay (the prediction's contour is drawn over it, the ground truth under it)
OVERLAY_OPACITY = 0.7


def overlay_colormap() -> DirectLabelColormap:
    """TP / FP / FN colours (:data:`OVERLAY_COLORS`), everything else transparent."""
    colors: dict[Any, Any] = {None: "transparent", 0: "transparent"}
    colors.update(OVERLAY_COLORS)
    return DirectLabelColormap(color_dict=colors)


def agreement_colormap() -> Colormap:
    """The agreement map's colours: 0 transparent, then one opaque colour per bin (no blending
    between bins, so every pixel has one of the legend's colours)."""
    controls = [0.0, NO_RUN, *(low for low, _color in AGREEMENT_BINS[1:]), 1.0]
    colors = [(0.0, 0.0, 0.0, 0.0), *((*hex_to_rgb(color), 1.0) for _low, color in AGREEMENT_BINS)]
    return Colormap(colors=colors, controls=controls, interpolation="zero", name="medsam-eval agreement")


def agreement_legend() -> list[tuple[str, str]]:
    """``(share of the runs, colour)`` of each bin :func:`agreement_colormap` draws (a bin holds its
    lower edge: 20% of the runs is drawn in the "20-40%" colour)."""
    edges = [low for low, _color in AGREEMENT_BINS] + [1.0]
    legend = []
    for (low, color), high in zip(AGREEMENT_BINS, edges[1:]):
        text = f"<{high:.0%}" if low == 0 else f"{low:.0%}-{high:.0%}"
        legend.append((text, color))
    return legend


def swatch(text: str, color: str) -> str:
    """Rich text: ``text`` on a chip of ``color`` (black or white text, whichever reads on it)."""
    r, g, b = hex_to_rgb(color)
    ink = BLACK if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else WHITE
    return f'<span style="background-color:{color}; color:{ink}">&nbsp;{html.escape(text)}&nbsp;</span>'


def draw_under(viewer: Any, layer: Layer, top: Layer | None, floor: Layer | None = None) -> None:
    """Move ``layer`` right under ``top`` in the layer list when it is drawn over it; only while
    ``top`` is above ``floor`` (the ground truth: an overlay under the truth's fill would be tinted)."""
    layers = viewer.layers
    if top is None or top not in layers or layer not in layers:
        return
    index, top_index = layers.index(layer), layers.index(top)
    if floor is not None and floor in layers and top_index < layers.index(floor):
        return
    if index > top_index:
        layers.move(index, top_index)


def overlay_layer_name(target_label: int | None) -> str:
    return "TP/FP/FN" if target_label is None else f"TP/FP/FN [label {int(target_label)}]"


def write_overlay(viewer: Any, reference: Layer, overlay: np.ndarray, target_label: int | None,
                  under: Layer | None = None) -> Labels:
    """Show ``overlay`` in the viewer's one TP/FP/FN Labels layer (fixed colours), over ``reference``'s transform
    and under ``under`` (the prediction compared, whose contour then stays visible).

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
        layer = Labels(overlay, name=name, colormap=overlay_colormap(), opacity=OVERLAY_OPACITY,
                       metadata={"role": "overlay", "target_label": target_label}, **transform_kwargs(reference))
        layer = add_inactive(viewer, layer)
    else:
        layer.metadata["target_label"] = target_label
        for key, value in transform_kwargs(reference).items():
            setattr(layer, key, value)
        layer.data = overlay
        layer.name = name
    draw_under(viewer, layer, under, floor=reference)
    return layer


__all__ = ["NO_RUN", "OVERLAY_COLORS", "OVERLAY_OPACITY", "agreement_colormap", "agreement_legend", "draw_under",
           "overlay_colormap", "overlay_layer_name", "swatch", "write_overlay"]
