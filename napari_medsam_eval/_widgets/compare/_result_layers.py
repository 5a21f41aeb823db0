"""The TP/FP/FN overlay layer of a comparison and the agreement map's colours, without Qt (a
prediction: :mod:`._prediction_layer`).

:func:`compute_comparison` compares a pair off the GUI thread (the comparison, its worst slices and,
the first time, the overlay's layer model). The overlay is a Labels layer with its reference's transform and the metadata ``role``
``overlay`` that the widgets pick it by; writing again replaces its data. Where it is drawn, and what else is
shown with it, the canvas composer decides (:mod:`.._canvas`: the *TP / FP / FN* view).

The agreement map of a prompt sensitivity is drawn opaque in the bins of
:data:`~napari_medsam_eval.core.palette.AGREEMENT_BINS` (:func:`agreement_colormap`), so its legend
(:func:`agreement_legend`) shows exactly the colours on screen, whatever lies under it.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import numpy as np
from napari.layers import Image, Labels, Layer
from napari.utils.colormaps import Colormap, DirectLabelColormap

from napari_medsam_eval._layer_style import OVERLAY_COLORS
from napari_medsam_eval.core.palette import AGREEMENT_BINS, BLACK, WHITE, hex_to_rgb
from napari_medsam_eval.evaluation.mask_comparison import Comparison, binary_target, compare_masks
from napari_medsam_eval._widgets.common._canvas import compose, image_of, layers_for, offer
from napari_medsam_eval._widgets.common._layers import add_inactive, transform_kwargs
from napari_medsam_eval._widgets.common._removal import RETIRED_KEY, remove_layers

#: agreement below this is no run at all (a share of at most 1000 runs is 0 or at least 1/1000)
NO_RUN = 1e-4
#: opacity of the TP/FP/FN overlay (the prediction's contour is drawn over it, the ground truth under it)
OVERLAY_OPACITY = 0.7


def overlay_colormap() -> DirectLabelColormap:
    """TP / FP / FN colours (:data:`OVERLAY_COLORS`), everything else transparent."""
    colors: dict[Any, Any] = {None: "transparent", 0: "transparent"}
    colors.update(OVERLAY_COLORS)
    return DirectLabelColormap(color_dict=colors)


#: how far below its lower edge a bin starts: an agreement exactly on an edge (4 of 10 runs: 0.4) is drawn in
#: the bin above it, as the legend says, where the GPU's lookup of a value equal to the edge went either way
#: (0.2 and 0.4 were drawn in the bin below, 0.6 and 0.8 in the one above); agreements are k / N of a few runs
EDGE_BELOW = 0.005


def agreement_colormap() -> Colormap:
    """The agreement map's colours: 0 transparent, then one opaque colour per bin (no blending
    between bins, so every pixel has one of the legend's colours)."""
    controls = [0.0, NO_RUN, *(low - EDGE_BELOW for low, _color in AGREEMENT_BINS[1:]), 1.0]
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


def overlay_layer_name(target_label: int | None) -> str:
    return "TP/FP/FN" if target_label is None else f"TP/FP/FN [label {int(target_label)}]"


def overlay_layer(overlay: np.ndarray, target_label: int | None, transform: dict[str, Any]) -> Labels:
    """A new TP/FP/FN Labels layer of ``overlay`` (fixed colours) with ``transform`` (a reference's
    :func:`transform_kwargs`); a plain layer model, so any thread may build it."""
    return Labels(overlay, name=overlay_layer_name(target_label), colormap=overlay_colormap(), opacity=OVERLAY_OPACITY,
                  metadata={"role": "overlay", "target_label": target_label}, **transform)


@dataclass(frozen=True)
class Computed:
    """What :func:`compute_comparison` made off the GUI thread: the comparison and its worst slices, or
    the reason there is none (``problem``); ``layer``: a new overlay layer's model, when one was asked for."""

    comparison: Comparison | None
    worst: np.ndarray
    problem: str = ""
    layer: Labels | None = None


def compute_comparison(pred: np.ndarray, gt: np.ndarray, target: int,
                       transform: dict[str, Any] | None = None, truth: tuple[int, ...] | None = None) -> Computed:
    """Compare ``pred`` (a label map, or an object's own bool mask) with ``gt`` for label ``target`` (in the
    ground truth: the labels ``truth``, when the object is a region of them) (no Qt, any thread: the worker's
    job); with ``transform`` (the ground truth's), the overlay's new layer model too. A mismatch is
    returned, not raised."""
    try:
        comparison = compare_masks(binary_target(pred, target, binary_fallback=True),
                                   binary_target(gt, truth or target))
    except ValueError as exc:
        return Computed(None, np.array([], dtype=int), str(exc))
    layer = None if transform is None else overlay_layer(comparison.overlay, target, transform)
    return Computed(comparison, comparison.worst_slices(), layer=layer)


def overlay_layers(viewer: Any) -> list[Labels]:
    """The viewer's TP/FP/FN layers: the one shown (role ``overlay``) and any retired while nothing was compared."""
    return [layer for layer in viewer.layers if isinstance(layer, Labels)
            and "overlay" in (layer.metadata.get("role"), layer.metadata.get(RETIRED_KEY))]


def reusable_overlay(viewer: Any, image: str | None, ndim: int) -> tuple[Labels | None, list[Labels]]:
    """The overlay layer a comparison of ``image`` reuses (its own, or one whose image is gone - an opened row's image
    layer is reused under the next case's name -, else one retired; of ``ndim`` dimensions; None: a new one is
    built), and every such overlay (:func:`write_overlay`; the Compare dock's worker builds a new layer's model
    only when this finds none)."""
    images = {layer.name for layer in viewer.layers if isinstance(layer, Image)}
    mine = [layer for layer in overlay_layers(viewer) if layer.metadata.get("image") in (image, None)
            or layer.metadata.get("image") not in images or RETIRED_KEY in layer.metadata]
    own = [layer for layer in mine if layer.ndim == ndim and RETIRED_KEY not in layer.metadata]
    retired = [layer for layer in mine if layer.ndim == ndim]
    return (own or retired or [None])[0], mine


def write_overlay(viewer: Any, reference: Layer, overlay: np.ndarray, target_label: int | None,
                  under: Layer | None = None, new: Labels | None = None, asked: bool = False) -> Labels:
    """Show ``overlay`` in its image's TP/FP/FN Labels layer (fixed colours), over ``reference``'s transform,
    as the *TP / FP / FN* view of the image ``reference`` (the ground truth) belongs to (:mod:`.._canvas`): directly
    above that image, with its legend. ``asked``: the user asked for it (Compare, Next worst slice); otherwise a
    pair of runs, a variant or an agreement map the user opened stays in view (:func:`._canvas.offer`).

    Each image has its own overlay (Compare on a second image gives that image one, above it; the first keeps
    its own, hidden with it): a comparison replaces the last one of its image: the overlay layer of that image (or
    one retired while nothing was compared) gets the new data, name and transform; further overlay layers of that
    image are removed. Without one, ``new`` (:func:`overlay_layer`, built off the GUI thread) or a layer built
    here is added. Its name starts with its image's.
    """
    image = image_of(viewer, under if under is not None and under in viewer.layers else reference)
    owner = None if image is None else image.name
    name = overlay_layer_name(target_label) if owner is None else f"{owner} {overlay_layer_name(target_label)}"
    layer, mine = reusable_overlay(viewer, owner, overlay.ndim)
    remove_layers(viewer, [other for other in mine if other is not layer and RETIRED_KEY not in other.metadata])
    if layer is None:
        fits = new is not None and new.ndim == overlay.ndim
        layer = add_inactive(viewer, new if fits else overlay_layer(overlay, target_label, transform_kwargs(reference)))
        layer.name = name
    else:
        layer.metadata.update(role="overlay", target_label=target_label)
        layer.metadata.pop(RETIRED_KEY, None)
        for key, value in transform_kwargs(reference).items():
            setattr(layer, key, value)
        layer.data = overlay
        layer.name = name
    if image is not None:
        layer.metadata["image"] = image.name  # a comparison belongs to its image: above it, hidden with it
        views = layers_for(viewer, "TP / FP / FN", image, overlay=layer)
        if asked:
            compose(viewer, "TP / FP / FN", image, views)
        else:
            offer(viewer, "TP / FP / FN", image, views)
    return layer


__all__ = ["Computed", "NO_RUN", "compute_comparison", "OVERLAY_COLORS", "OVERLAY_OPACITY", "agreement_colormap", "agreement_legend",
           "overlay_colormap", "overlay_layer", "overlay_layer_name", "overlay_layers", "reusable_overlay", "swatch",
           "write_overlay"]
