"""How predictions and ground truth look in napari: the roles of :mod:`napari_medsam_eval.core.palette`
as napari colormaps (docs/napari.md, "Colours").

Ground truth is drawn *filled* (label 1 blue, then lavender, violet, periwinkle); a prediction is
drawn as a *contour* (label 1 orange, then crimson, salmon, brown; never the yellow of prompt
boxes), so the two are told apart without toggling layers and the ground truth stays visible under
the prediction's outline. The TP / FP / FN overlay of a comparison has its own colours
(:data:`OVERLAY_COLORS`: bluish green / vermillion / reddish purple), and so have the "what an
attempt changed" layer (:data:`CHANGE_COLORS`: added bluish green, removed vermillion) and the two
runs' overlay (:data:`AB_COLORS`). Colours cycle for label values past the palette's length; values
above :data:`PALETTE_SIZE` are drawn in the palette's first colour.

Plain data (hex strings, a dict colormap), so the reader imports no napari:
``Labels(..., colormap=ground_truth_colormap())`` and napari turns the dict
into a direct colormap.
"""
from __future__ import annotations

from typing import Any

from .core import palette
from .core.palette import GROUND_TRUTH_PALETTE, PREDICTION_PALETTE
from .session.attempts import ADDED, REMOVED
from .evaluation.error_parts import PART_VALUES
from .evaluation.mask_comparison import AB_A_ONLY, AB_B_ONLY, AB_BOTH, OVERLAY_FN, OVERLAY_FP, OVERLAY_TP

#: how many label values get a palette colour (the rest: the first colour)
PALETTE_SIZE = 255
#: a prediction's contour width in screen pixels, and its opacity
PREDICTION_CONTOUR = 2
PREDICTION_OPACITY = 1.0
GROUND_TRUTH_OPACITY = 0.45
#: overlay colours: TP, FP (predicted, not true), FN (missed; not the ground truth's blue)
OVERLAY_COLORS = {OVERLAY_TP: palette.TRUE_POSITIVE, OVERLAY_FP: palette.FALSE_POSITIVE,
                  OVERLAY_FN: palette.FALSE_NEGATIVE}
#: an attempt's changes (Segment widget, *Changes*): pixels added, removed
CHANGE_COLORS = {None: "transparent", 0: "transparent", ADDED: palette.ADDED, REMOVED: palette.REMOVED}
#: two runs' predictions of a target (Benchmark widget, *Two runs*): only run A, only run B, both
AB_COLORS = {None: "transparent", 0: "transparent", AB_A_ONLY: palette.A_ONLY, AB_B_ONLY: palette.B_ONLY,
             AB_BOTH: palette.BOTH}
#: an opened row's "why" layer (evaluation/error_parts.py): each error part in its colour, the rest transparent
ERROR_PART_LAYER_COLORS = {None: "transparent", 0: "transparent",
                           **{PART_VALUES[part]: color for part, color in palette.ERROR_PART_COLORS.items()}}
#: the worst run of a prompt sensitivity (Compare widget): a contour in the highlight colour
WORST_RUN_COLOR = palette.HIGHLIGHT


def palette_colormap(cycle: tuple[str, ...]) -> dict[Any, str]:
    """``{value: colour}`` for values 1..:data:`PALETTE_SIZE` cycling ``cycle``; 0 transparent."""
    colors: dict[Any, str] = {None: cycle[0], 0: "transparent"}
    colors.update({value: cycle[(value - 1) % len(cycle)] for value in range(1, PALETTE_SIZE + 1)})
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
