"""The napari layer styles are the palette's roles (no Qt); how far apart they are: tests/test_palette.py."""
from __future__ import annotations

from napari_medsam_eval._layer_style import (AB_COLORS, CHANGE_COLORS, OVERLAY_COLORS, WORST_RUN_COLOR,
                                             ground_truth_colormap, palette_colormap, prediction_colormap,
                                             style_prediction)
from napari_medsam_eval.core import palette
from napari_medsam_eval.evaluation.mask_comparison import (AB_A_ONLY, AB_B_ONLY, AB_BOTH, OVERLAY_FN, OVERLAY_FP,
                                                           OVERLAY_TP)
from napari_medsam_eval.session.attempts import ADDED, REMOVED


def test_each_layer_colour_is_its_role():
    assert OVERLAY_COLORS == {OVERLAY_TP: palette.TRUE_POSITIVE, OVERLAY_FP: palette.FALSE_POSITIVE,
                              OVERLAY_FN: palette.FALSE_NEGATIVE}
    assert {k: AB_COLORS[k] for k in (AB_A_ONLY, AB_B_ONLY, AB_BOTH)} == {
        AB_A_ONLY: palette.A_ONLY, AB_B_ONLY: palette.B_ONLY, AB_BOTH: palette.BOTH}
    assert (CHANGE_COLORS[ADDED], CHANGE_COLORS[REMOVED]) == (palette.ADDED, palette.REMOVED)
    assert WORST_RUN_COLOR == palette.HIGHLIGHT
    assert ground_truth_colormap()[1] == palette.GROUND_TRUTH and prediction_colormap()[1] == palette.PREDICTION
    for colormap in (AB_COLORS, CHANGE_COLORS, ground_truth_colormap(), prediction_colormap()):
        assert colormap[0] == "transparent"  # background never drawn


def test_a_one_colour_prediction_style():
    class Layer:  # the attributes style_prediction sets
        colormap = contour = opacity = None
    layer = style_prediction(Layer(), WORST_RUN_COLOR)
    assert layer.colormap == palette_colormap((WORST_RUN_COLOR,)) and layer.contour > 0
