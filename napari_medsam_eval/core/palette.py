"""Every colour the package draws, named by its role, defined once (docs/napari.md, "Colours").

The roles' colours are Okabe & Ito's colour-blind-safe set (*Color Universal Design*, 2008: seven
hues plus black, chosen to stay apart under protanopia and deuteranopia) and white; labels past the
first, the agreement map's bins and the report's dots add a few chosen around them. Each role says
what a colour *means*; the napari layer styles (:mod:`napari_medsam_eval._layer_style`), the widgets'
plots and the report's figures import the role, never a colour of their own.
``tests/test_palette.py`` measures the roles that share a canvas against each other (CIEDE2000, for
normal vision and simulated deuteranopia and protanopia).

On the image: the ground truth is a blue *fill*, a prediction an orange *contour*; a comparison's
TP / FP / FN are bluish green / vermillion / reddish purple; prompt points are white (positive) and
black (negative), each ringed in the other; boxes are yellow; the worst run of a prompt sensitivity
is a sky-blue contour. Two runs: only A vermillion, only B bluish green, both sky blue. An
attempt's changes: added bluish green, removed vermillion.

Plain ``#RRGGBB`` strings, no Qt or napari, so the core, the report and the widgets all import it.
"""
from __future__ import annotations

# --- Okabe-Ito (and white) ---------------------------------------------------------------------
BLACK = "#000000"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
BLUISH_GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
REDDISH_PURPLE = "#CC79A7"
WHITE = "#FFFFFF"
#: Okabe and Ito's order of their colours
OKABE_ITO = (BLACK, ORANGE, SKY_BLUE, BLUISH_GREEN, YELLOW, BLUE, VERMILLION, REDDISH_PURPLE)
#: a colour's name, for legends written in words (a layer's name, a tooltip)
COLOR_NAMES = {BLACK: "black", ORANGE: "orange", SKY_BLUE: "sky blue", BLUISH_GREEN: "bluish green",
               YELLOW: "yellow", BLUE: "blue", VERMILLION: "vermillion", REDDISH_PURPLE: "reddish purple",
               WHITE: "white"}

# --- on the image ------------------------------------------------------------------------------
GROUND_TRUTH = BLUE  # a fill
PREDICTION = ORANGE  # a contour
#: the dark ring either side of a contour, so it shows on bright and warm images too (an endoscopy frame's
#: mucosa is nearly the prediction's orange); near black, not black: on a black background it reads as a ring
OUTLINE = "#101010"
TRUE_POSITIVE = BLUISH_GREEN
FALSE_POSITIVE = VERMILLION
FALSE_NEGATIVE = REDDISH_PURPLE  # not blue: missed truth must not read as the truth's fill
POSITIVE_POINT = WHITE  # white/black: foreground/background, as in a mask; no hue to confuse
NEGATIVE_POINT = BLACK
BOX_PROMPT = YELLOW
#: the worst run of a prompt sensitivity, or any item picked out among several of its kind
HIGHLIGHT = SKY_BLUE
A_ONLY = VERMILLION  # two runs: what B lost ...
B_ONLY = BLUISH_GREEN  # ... and what B added (as an attempt's changes)
BOTH = SKY_BLUE
ADDED = BLUISH_GREEN  # an attempt's changes
REMOVED = VERMILLION
#: the box behind each line of the legend on the canvas: near black, so every role's colour reads on it, on a bright
#: endoscopy frame too
LEGEND_BACKGROUND = "#1A1A1A"
#: a point's ring: the other polarity's fill, so either shows on a dark and on a bright image
POINT_BORDERS = {1: NEGATIVE_POINT, 0: POSITIVE_POINT}

#: fills of ground-truth labels 1, 2, ... (cycled): the role colour, then blues and violets chosen
#: (CIEDE2000) apart from every other role's colour
GROUND_TRUTH_PALETTE = (GROUND_TRUTH, "#D2C3FF", "#873CFF", "#8787F0")
#: contours of predicted labels 1, 2, ...: the role colour, then warm colours chosen the same way
PREDICTION_PALETTE = (PREDICTION, "#D20F5A", "#FF9687", "#87693C")

#: the prompt-sensitivity agreement map, drawn opaque so the legend shows what is drawn: (lowest
#: share of the runs, colour) per bin; no run (0) is not drawn. Cividis (Nunez et al. 2018, made to
#: read alike with and without colour-vision deficiency) at 0, 0.25, 0.5, 0.75, 1.
AGREEMENT_BINS: tuple[tuple[float, str], ...] = (
    (0.0, "#00224E"), (0.2, "#434E6C"), (0.4, "#7D7C78"), (0.6, "#BCAE6C"), (0.8, "#FEE838"))

#: the error parts (evaluation/error_parts.py): the report's bars and an opened row's "why" layer (which
#: leaves TP undrawn: the truth's fill and the prediction's contour show it). Dark red and vermillion for
#: the false positives past the object (leak) and off it, indigo for too much at its border (over: not the
#: box's yellow), reddish purple and sky blue for the false negatives (missed slices, under). Okabe and
#: Ito have too few colours for five more roles, so dark red and indigo were chosen (CIEDE2000) apart from
#: each other part and every role drawn with them (:data:`WHY_CANVAS`, tests/test_palette.py)
ERROR_PART_COLORS = {"leak": "#990000", "off_target": VERMILLION, "over": "#490092",
                     "missed_slices": REDDISH_PURPLE, "under": SKY_BLUE}

#: the roles drawn with an opened row's "why" layer (kept apart from CANVASES, whose roles are Okabe-Ito's)
WHY_CANVAS = {"ground truth": GROUND_TRUTH, "prediction": PREDICTION,
              **{part.replace("_", " "): color for part, color in ERROR_PART_COLORS.items()},
              "positive point": POSITIVE_POINT, "negative point": NEGATIVE_POINT, "box": BOX_PROMPT}

#: which roles share one canvas (tests/test_palette.py keeps each set apart)
CANVASES: dict[str, dict[str, str]] = {
    "compare": {"ground truth": GROUND_TRUTH, "prediction": PREDICTION, "TP": TRUE_POSITIVE,
                "FP": FALSE_POSITIVE, "FN": FALSE_NEGATIVE, "worst run": HIGHLIGHT,
                "positive point": POSITIVE_POINT, "negative point": NEGATIVE_POINT, "box": BOX_PROMPT},
    "two runs": {"ground truth": GROUND_TRUTH, "prediction": PREDICTION, "A only": A_ONLY, "B only": B_ONLY,
                 "both": BOTH, "positive point": POSITIVE_POINT, "negative point": NEGATIVE_POINT,
                 "box": BOX_PROMPT},
    "segment": {"ground truth": GROUND_TRUTH, "prediction": PREDICTION, "added": ADDED, "removed": REMOVED,
                "positive point": POSITIVE_POINT, "negative point": NEGATIVE_POINT, "box": BOX_PROMPT},
}

# --- plots ---------------------------------------------------------------------------------------
#: the widgets' plots, on the viewer's theme (dark by default): the data, its summary (mean,
#: median) and the slice on screen, where a propagation stopped
PLOT_SERIES = SKY_BLUE
PLOT_SUMMARY = ORANGE
PLOT_CURSOR = ORANGE
PLOT_STOP = REDDISH_PURPLE
#: one colour per task (cycled), on a dark theme
PLOT_CATEGORIES = (SKY_BLUE, ORANGE, BLUISH_GREEN, YELLOW, REDDISH_PURPLE, VERMILLION, BLUE)
#: a plot's (background, text) without a viewer theme
PLOT_LIGHT_THEME = (WHITE, BLACK)
#: the report's figures, on white: the data, each point, reference lines, the prompt, the worst
#: value and the paired difference, where a propagation stopped; one colour per task or mode
REPORT_SERIES = BLUE
REPORT_POINTS = "#333333"  # dark grey: many small dots, under the series
REPORT_REFERENCE = BLACK
REPORT_PROMPT = ORANGE
REPORT_MARK = VERMILLION
REPORT_STOP = REDDISH_PURPLE
REPORT_CATEGORIES = (BLUE, ORANGE, BLUISH_GREEN, VERMILLION, REDDISH_PURPLE, SKY_BLUE, BLACK, YELLOW)
#: "what would fix it": the run, then each stage made perfect (the counterfactual variants, in their order)
REPORT_STAIRCASE = (BLACK, REDDISH_PURPLE, ORANGE, BLUISH_GREEN)
REPORT_GUIDE = "#B0B0B0"  # light grey: the line joining one row's points


def color_name(color: str) -> str:
    """The name of ``color`` for a legend in words (its hex code when it has none)."""
    return COLOR_NAMES.get(color.upper(), color)


def rgb_to_hex(rgb) -> str:
    """``(r, g, b[, a])`` in 0..1 -> ``#RRGGBB`` (alpha dropped)."""
    return "#" + "".join(f"{round(float(v) * 255):02X}" for v in list(rgb)[:3])


def hex_to_rgb(color: str) -> tuple[float, float, float]:
    """``#RRGGBB`` -> ``(r, g, b)`` in 0..1."""
    value = color.lstrip("#")
    return tuple(int(value[i:i + 2], 16) / 255.0 for i in (0, 2, 4))  # type: ignore[return-value]


__all__ = [
    "ADDED", "AGREEMENT_BINS", "A_ONLY", "BLACK", "BLUE", "BLUISH_GREEN", "BOTH", "BOX_PROMPT", "B_ONLY",
    "CANVASES", "COLOR_NAMES", "ERROR_PART_COLORS", "WHY_CANVAS", "FALSE_NEGATIVE", "FALSE_POSITIVE", "GROUND_TRUTH", "GROUND_TRUTH_PALETTE",
    "HIGHLIGHT", "LEGEND_BACKGROUND", "NEGATIVE_POINT", "OKABE_ITO", "ORANGE", "OUTLINE", "PLOT_CATEGORIES", "PLOT_CURSOR",
    "PLOT_LIGHT_THEME", "PLOT_SERIES", "PLOT_STOP", "PLOT_SUMMARY", "POINT_BORDERS", "POSITIVE_POINT",
    "PREDICTION", "PREDICTION_PALETTE", "REDDISH_PURPLE", "REMOVED", "REPORT_CATEGORIES", "REPORT_GUIDE",
    "REPORT_MARK", "REPORT_STAIRCASE", "REPORT_POINTS", "REPORT_PROMPT", "REPORT_REFERENCE", "REPORT_SERIES", "REPORT_STOP", "SKY_BLUE",
    "TRUE_POSITIVE", "VERMILLION", "WHITE", "YELLOW", "color_name", "hex_to_rgb", "rgb_to_hex",
]
