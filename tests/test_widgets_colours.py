"""Legends that show what is drawn, and fills that leave the prediction's contour visible, in a real viewer (Xvfb)
on real ground truth (hippocampus MRI): the prompt sensitivity's agreement map against its legend, the TP/FP/FN
overlay's place and colours, the prompt points' and boxes' colours (:mod:`napari_medsam_eval.core.palette`)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from qtpy.QtCore import Qt

from plugin_dock import dock
from napari_medsam_eval.core import palette
from napari_medsam_eval.evaluation.mask_comparison import OVERLAY_FN, OVERLAY_FP, OVERLAY_TP
from napari_medsam_eval.studies.sensitivity import SensitivityResult
from napari_medsam_eval._widgets.common._prompt_layers import adopt_point_layer, make_box_layer, make_point_layer
from napari_medsam_eval._widgets.compare._sensitivity import show_result
from napari_medsam_eval._widgets.common._canvas import show_view
from napari_medsam_eval._widgets.common._canvas_style import legend_shown
from test_widgets_compare import viewer_with_pair  # noqa: F401 - shared fixture

pytestmark = pytest.mark.gui

#: a legend chip: its colour and its text
CHIP = re.compile(r"background-color:(#[0-9A-Fa-f]{6})[^>]*>&nbsp;(.*?)&nbsp;</span>")
RUNS = 10


def _rgba(color: str) -> np.ndarray:
    return np.asarray(to_rgba(color))


def _bin_of(text: str) -> tuple[float, float]:
    """'&lt;20%' -> (0, 0.2); '20%-40%' -> (0.2, 0.4) (a bin holds its lower edge; 100% is in the last)."""
    numbers = [float(n) / 100 for n in re.findall(r"\d+", text)]
    return (0.0, numbers[0]) if len(numbers) == 1 else (numbers[0], numbers[1])


def _agreement(gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RUNS masks grown from the real ground truth by 0..RUNS-1 pixels along x: every share 1/RUNS .. 1 occurs."""
    masks = np.stack([gt | np.roll(gt, shift, axis=2) for shift in range(RUNS)])
    return masks.mean(axis=0).astype(np.float32), masks[-1]


def test_the_agreement_legend_shows_the_colours_drawn(viewer_with_pair):
    viewer, gt_layer, pred_layer, _pred, gt = viewer_with_pair
    compare = dock(viewer, "compare")
    legend = compare.sensitivity.legend.value
    assert Qt.mightBeRichText(legend)  # shown as chips, not as markup
    chips = CHIP.findall(legend)
    *bins, (worst_color, worst_text) = chips
    assert len(bins) == len(palette.AGREEMENT_BINS) and "contour" in worst_text

    share, worst_mask = _agreement(gt)
    result = SensitivityResult(prompts=[], agreement=share, dice=[0.9] * (RUNS - 1) + [0.5], worst_mask=worst_mask,
                               done=RUNS)
    agreement, worst = show_result(viewer, gt_layer, result, "hippocampus", under=pred_layer)
    # opaque and not blended: a pixel on screen is the colormap's colour, whatever lies under it
    assert agreement.opacity == 1.0 and str(agreement.blending) == "translucent"
    assert tuple(agreement.contrast_limits) == (0.0, 1.0)
    values = np.unique(agreement.data)
    assert len(values) == RUNS + 1 and values[0] == 0
    drawn = agreement.colormap.map(values)
    assert drawn[0][3] == 0  # no run: not drawn
    for value, rgba in zip(values[1:], drawn[1:]):
        (color,) = [color for color, text in bins if _bin_of(text)[0] <= value < _bin_of(text)[1]
                    or (value == 1.0 and _bin_of(text)[1] == 1.0)]
        np.testing.assert_allclose(rgba, _rgba(color), atol=1e-6, err_msg=f"share {value}")
    assert {color for color, _text in bins} == {c for _low, c in palette.AGREEMENT_BINS}
    # the worst run: the colour its chip shows, as a contour over the map
    np.testing.assert_allclose(worst.get_color(1), _rgba(worst_color), atol=1e-6)
    assert worst.contour > 0 and worst_color == palette.HIGHLIGHT
    # the sensitivity view: the map alone over its image (the contours on it hid the bands), its bins named on
    # the canvas; the worst run is a view of its own, beside the prediction
    order = list(viewer.layers)
    assert order.index(agreement) == 1 and agreement.visible and not worst.visible and not pred_layer.visible
    assert [color for _t, color in legend_shown(viewer)] == [c.upper() for _low, c in palette.AGREEMENT_BINS]
    image = order[0]
    show_view(viewer, "worst run", image)
    assert worst.visible and pred_layer.visible and not agreement.visible
    order = list(viewer.layers)
    assert order.index(image) + 1 == order.index(pred_layer) and order.index(pred_layer) + 1 == order.index(worst)


def test_the_overlay_leaves_the_prediction_contour_on_top(viewer_with_pair):
    viewer, gt_layer, pred_layer, _pred, _gt = viewer_with_pair
    compare = dock(viewer, "compare")
    for _ in range(2):  # a new overlay, then the same one rewritten
        compare.update_comparison()
        overlay = compare.overlay_layer
        order = list(viewer.layers)
        image = order[0]
        # the TP / FP / FN view (the canvas composer): directly above its image, the truth's fill and the
        # prediction's outline (whose colours it shows as TP + FN and TP + FP) hidden, its three colours named
        assert order.index(overlay) == order.index(image) + 1 and overlay.visible
        assert not gt_layer.visible and not pred_layer.visible
        assert [text for text, _c in legend_shown(viewer)] == ["TP: found", "FP: leak (not true)", "FN: missed"]
    colors = overlay.colormap.map(np.array([OVERLAY_TP, OVERLAY_FP, OVERLAY_FN]))
    expected = [palette.TRUE_POSITIVE, palette.FALSE_POSITIVE, palette.FALSE_NEGATIVE]
    np.testing.assert_allclose(colors, [_rgba(c) for c in expected], atol=1e-6)


def test_prompt_points_and_boxes_in_their_colours(make_napari_viewer):
    viewer = make_napari_viewer()
    image = viewer.add_image(np.zeros((16, 16), dtype=np.uint8))
    points = make_point_layer(image)
    own = adopt_point_layer(viewer.add_points(np.empty((0, 2))))
    for layer in (points, own):
        layer.data = np.array([[2.0, 2.0], [5.0, 5.0]])
        layer.features = {"label": np.array([1, 0])}
        layer.refresh_colors(update_color_mapping=False)
        np.testing.assert_allclose(layer.face_color, [_rgba(palette.POSITIVE_POINT), _rgba(palette.NEGATIVE_POINT)])
        np.testing.assert_allclose(layer.border_color, [_rgba(palette.NEGATIVE_POINT), _rgba(palette.POSITIVE_POINT)])
    boxes = viewer.add_layer(make_box_layer(image))
    boxes.add_rectangles(np.array([[1.0, 1.0], [6.0, 6.0]]))
    np.testing.assert_allclose(boxes.edge_color[0], _rgba(palette.BOX_PROMPT))
