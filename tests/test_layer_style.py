"""Colours a clinician tells apart: no two meanings share a colour (core, no Qt)."""
from __future__ import annotations

import numpy as np
from matplotlib.colors import to_rgb

from napari_medsam_eval._layer_style import (AB_COLORS, GROUND_TRUTH_PALETTE, PREDICTION_PALETTE, WORST_RUN_COLOR,
                                             palette_colormap, style_prediction)
from napari_medsam_eval.evaluation.mask_comparison import AB_A_ONLY, AB_B_ONLY, AB_BOTH

#: the least RGB distance (0..sqrt(3)) between two colours that mean different things
MIN_DISTANCE = 0.35


def _distance(a: str, b: str) -> float:
    return float(np.linalg.norm(np.subtract(to_rgb(a), to_rgb(b))))


def test_two_runs_and_sensitivity_colours_are_not_the_truths_or_the_predictions():
    others = {"ground truth": GROUND_TRUTH_PALETTE, "prediction": PREDICTION_PALETTE}
    ours = {"A only": AB_COLORS[AB_A_ONLY], "B only": AB_COLORS[AB_B_ONLY], "both": AB_COLORS[AB_BOTH],
            "worst sensitivity run": WORST_RUN_COLOR}
    for name, colour in ours.items():
        if name == "A only":  # red: a prediction colour family, but told apart from B and both
            continue
        for what, palette in others.items():
            closest = min(palette, key=lambda c: _distance(colour, c))
            assert _distance(colour, closest) >= MIN_DISTANCE, (name, colour, what, closest)
    a, b, both = AB_COLORS[AB_A_ONLY], AB_COLORS[AB_B_ONLY], AB_COLORS[AB_BOTH]
    assert min(_distance(a, b), _distance(a, both), _distance(b, both)) >= MIN_DISTANCE


def test_a_one_colour_prediction_style():
    class Layer:  # the attributes style_prediction sets
        colormap = contour = opacity = None
    layer = style_prediction(Layer(), WORST_RUN_COLOR)
    assert layer.colormap == palette_colormap((WORST_RUN_COLOR,)) and layer.contour > 0
