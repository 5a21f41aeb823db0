"""How predictions and ground truth look in napari, defined once (docs/napari.md, "Colours").

Ground truth is drawn *filled* in cool colours (label 1 deep sky blue, 2 sea
green, ...); a prediction is drawn as a *contour* in warm colours (label 1
orange, 2 hot pink, ...; never the yellow of prompt boxes), so the two are
told apart without toggling layers and the ground truth stays visible under
the prediction's outline. The TP / FP /
FN overlay of a comparison has its own colours (:data:`OVERLAY_COLORS`: lime /
magenta / cyan), and so has the "what an attempt changed" layer
(:data:`CHANGE_COLORS`: added lime, removed red). Colours cycle for label values past the
palette's length; values above :data:`PALETTE_SIZE` are drawn in the
palette's first colour.

Plain data (colour names, a dict colormap), so the reader imports no napari:
``Labels(..., colormap=ground_truth_colormap())`` and napari turns the dict
into a direct colormap.
"""
from __future__ import annotations

from typing import Any

from .session.attempts import ADDED, REMOVED
from .evaluation.mask_comparison import AB_A_ONLY, AB_B_ONLY, AB_BOTH, OVERLAY_FN, OVERLAY_FP, OVERLAY_TP

#: fill colours of ground-truth labels 1, 2, ... (cycled)
GROUND_TRUTH_PALETTE = ("deepskyblue", "mediumseagreen", "royalblue", "turquoise", "mediumpurple",
                        "lightskyblue", "seagreen", "slateblue")
#: contour colours of predicted labels 1, 2, ... (cycled)
PREDICTION_PALETTE = ("orange", "hotpink", "orangered", "violet", "coral", "deeppink", "darkorange", "plum")
#: how many label values get a palette colour (the rest: the first colour)
PALETTE_SIZE = 255
#: a prediction's contour width in screen pixels, and its opacity
PREDICTION_CONTOUR = 2
PREDICTION_OPACITY = 1.0
GROUND_TRUTH_OPACITY = 0.45
#: overlay colours: TP green, FP magenta (predicted, not true), FN cyan (missed)
OVERLAY_COLORS = {OVERLAY_TP: "lime", OVERLAY_FP: "magenta", OVERLAY_FN: "cyan"}
#: an attempt's changes (Segment widget, *Changes*): pixels added, removed
CHANGE_COLORS = {None: "transparent", 0: "transparent", ADDED: "lime", REMOVED: "red"}
#: two runs' predictions of a target (Benchmark widget, *Two runs*): only run A red, only run B chartreuse (no
#: blue: that is the ground truth's; no orange: a prediction's), both white
AB_COLORS = {None: "transparent", 0: "transparent", AB_A_ONLY: "red", AB_B_ONLY: "chartreuse", AB_BOTH: "white"}
#: the worst run of a prompt sensitivity (Compare widget): a white contour, not a prediction's warm colour
WORST_RUN_COLOR = "white"


def palette_colormap(palette: tuple[str, ...]) -> dict[Any, str]:
    """``{value: colour}`` for values 1..:data:`PALETTE_SIZE` cycling ``palette``; 0 transparent."""
    colors: dict[Any, str] = {None: palette[0], 0: "transparent"}
    colors.update({value: palette[(value - 1) % len(palette)] for value in range(1, PALETTE_SIZE + 1)})
    return colors


def ground_truth_colormap() -> dict[Any, str]:
    return palette_colormap(GROUND_TRUTH_PALETTE)


def prediction_colormap() -> dict[Any, str]:
    return palette_colormap(PREDICTION_PALETTE)


def ground_truth_kwargs() -> dict[str, Any]:
    """Labels layer keyword arguments of a ground-truth layer (reader layer data, ``add_labels``)."""
    return {"colormap": ground_truth_colormap(), "opacity": GROUND_TRUTH_OPACITY}


def style_prediction(layer: Any, color: str | None = None) -> Any:
    """Give a Labels layer the prediction look (warm palette, contour; ``color``: every label in that one
    colour instead); returns it."""
    layer.colormap = prediction_colormap() if color is None else palette_colormap((color,))
    layer.contour = PREDICTION_CONTOUR
    layer.opacity = PREDICTION_OPACITY
    return layer


__all__ = ["AB_COLORS", "CHANGE_COLORS", "GROUND_TRUTH_PALETTE", "OVERLAY_COLORS", "PREDICTION_CONTOUR", "PREDICTION_PALETTE", "WORST_RUN_COLOR", "ground_truth_colormap",
           "ground_truth_kwargs", "palette_colormap", "prediction_colormap", "style_prediction"]
