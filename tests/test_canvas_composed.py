"""One canvas, composed (issue 65): each view's layers directly above their image, in the colours the legend on the
canvas names, and no other colour near the object; screenshots of a real viewer (Xvfb) at 1600 x 1000 and
1366 x 768 on real data (a colonoscopy clip of CVC-ClinicDB after the CT phantom, hippocampus MRI).

The pixel checks map a voxel to the canvas through napari's camera (its centre and zoom), compare the screenshot
with the layer shown and with it hidden: where the view's layer has value v, the pixel is the legend's colour for v
blended at the layer's opacity over what is under it; around the object every pixel is what is under it or one of
those blends.
"""
from __future__ import annotations

import numpy as np
import pytest
from napari.layers import Labels
from scipy import ndimage

from plugin_dock import dock
from napari_medsam_eval.core import palette
from napari_medsam_eval.core.palette import hex_to_rgb
from napari_medsam_eval.evaluation.error_parts import PART_VALUES, part_overlay
from napari_medsam_eval.evaluation.mask_comparison import AB_A_ONLY, AB_B_ONLY, AB_BOTH, OVERLAY_FN, OVERLAY_FP, \
    OVERLAY_TP, ab_overlay
from napari_medsam_eval._widgets.common._canvas import compose, show_view, views_of
from napari_medsam_eval._widgets.common._canvas_roles import VIEWS
from napari_medsam_eval._widgets.common._canvas_style import legend_shown, size_style
from napari_medsam_eval._widgets.common._layers import go_to_index

pytestmark = pytest.mark.gui

SIZES = [(1600, 1000), (1366, 768)]
#: a pixel's largest difference (0..255, any channel) from the colour it should have
TOLERANCE = 24


def _settle(qtbot, viewer) -> np.ndarray:
    qtbot.wait(50)
    return np.asarray(viewer.screenshot(canvas_only=True, flash=False))[..., :3].astype(float)


def _pixel(viewer, layer, shot: np.ndarray, index: tuple[int, ...]) -> tuple[int, int]:
    """The canvas pixel (row, column) of ``layer``'s voxel ``index`` (the slice on screen)."""
    world = np.asarray(layer.data_to_world(np.asarray(index, dtype=float)))[-2:]
    camera = viewer.scene.camera
    centre = np.asarray(camera.center)[-2:]
    height, width = shot.shape[:2]
    row, column = np.array([height / 2, width / 2]) + (world - centre) * camera.zoom
    return int(round(row)), int(round(column))


def _interior(mask: np.ndarray, count: int = 12) -> list[tuple[int, int]]:
    """Up to ``count`` voxels of ``mask`` (2D) three voxels or more from its edge, spread over it."""
    inner = ndimage.binary_erosion(mask, iterations=2)
    where = np.argwhere(inner if inner.any() else mask)
    return [tuple(int(v) for v in where[i]) for i in np.linspace(0, len(where) - 1, min(count, len(where))).astype(int)]


def check_drawn(qtbot, viewer, layer: Labels, colours: dict[int, str], index: int | None) -> None:
    """The view's ``layer`` (its slice ``index`` on screen) is drawn in ``colours`` (value -> legend colour) blended
    at its opacity; no other colour in the object's neighbourhood."""
    shown = _settle(qtbot, viewer)
    layer.visible = False
    under = _settle(qtbot, viewer)
    layer.visible = True
    data = np.asarray(layer.data if index is None else layer.data[index])
    alpha = float(layer.opacity)
    blends = {value: alpha * np.array(hex_to_rgb(colour)) * 255 for value, colour in colours.items()}
    for value, colour in colours.items():
        voxels = _interior(data == value)
        assert voxels, f"no voxel of value {value} on the slice shown"
        good = 0
        for voxel in voxels:
            row, column = _pixel(viewer, layer, shown, (index, *voxel) if index is not None else voxel)
            expected = blends[value] + (1 - alpha) * under[row, column]
            good += np.abs(shown[row, column] - expected).max() <= TOLERANCE
        assert good >= 0.8 * len(voxels), f"value {value}: {good} of {len(voxels)} pixels in {colour}"
    # around the object: what lies under it, or one of the legend's colours blended over it
    rows, columns = np.nonzero(data)
    corners = [_pixel(viewer, layer, shown, (*(() if index is None else (index,)), int(r), int(c)))
               for r, c in ((rows.min() - 2, columns.min() - 2), (rows.max() + 2, columns.max() + 2))]
    (r0, c0), (r1, c1) = corners
    r0, c0 = max(r0, 0), max(c0, 0)
    patch, base = shown[r0:r1, c0:c1], under[r0:r1, c0:c1]
    candidates = [base] + [blend + (1 - alpha) * base for blend in blends.values()]
    distance = np.min([np.abs(patch - c).max(axis=-1) for c in candidates], axis=0)
    assert np.mean(distance <= TOLERANCE) >= 0.97, f"unnamed colours on {np.mean(distance > TOLERANCE):.1%} of pixels"


def _legend_named(viewer, colours: dict[int, str]) -> None:
    legend = legend_shown(viewer)
    assert {colour.upper() for colour in colours.values()} <= {colour for _text, colour in legend}, legend
    assert len({colour for _text, colour in legend}) <= 3 + 1  # three colour roles (and a prompt marker)


def _directly_above(viewer, layer, image) -> None:
    order = list(viewer.layers)
    assert order.index(layer) == order.index(image) + 1, [x.name for x in order]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_on_a_colonoscopy_clip_after_the_phantom_is_drawn_over_the_clip(make_napari_viewer, qtbot,
                                                                               shared_data, size):
    """The break-check of issue 65: the reused TP/FP/FN layer stayed under the clip's RGB image (nothing drawn)."""
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(*size)
    viewer.open_sample("napari-medsam-eval", "phantom_ct")
    truth = next(layer for layer in viewer.layers if layer.metadata.get("role") == "ground_truth")
    phantom = viewer.layers[0]
    viewer.add_layer(Labels(np.roll(np.asarray(truth.data), 3, axis=2), name="phantom prediction",
                            metadata={"role": "prediction", "image": phantom.name, "target_label": 2}))
    compare = dock(viewer, "compare")
    assert compare.compare() is not None  # the phantom's overlay (on main, the layer a second comparison reused)
    phantom_overlay = compare.overlay_layer

    clip, clip_truth = viewer.open(str(shared_data / "cvc_clinicdb_video" / "Frame" / "seq01"),
                                   plugin="napari-medsam-eval")
    mask = np.asarray(clip_truth.data) == 1
    predicted = np.roll(mask, 12, axis=2).astype(np.uint8)
    prediction = viewer.add_layer(Labels(predicted, name="clip prediction", scale=clip.scale[:3],
                                         metadata={"role": "prediction", "image": clip.name, "target_label": 1}))
    compare.pred_layer.value, compare.gt_layer.value = prediction, clip_truth
    assert compare.compare() is not None
    overlay = compare.overlay_layer
    _directly_above(viewer, overlay, clip)
    # each image its own overlay, above it: the phantom keeps its comparison
    assert overlay is not phantom_overlay and phantom_overlay in viewer.layers
    _directly_above(viewer, phantom_overlay, phantom)
    assert overlay.visible and clip.visible and not prediction.visible and not clip_truth.visible
    colours = {OVERLAY_TP: palette.TRUE_POSITIVE, OVERLAY_FP: palette.FALSE_POSITIVE, OVERLAY_FN: palette.FALSE_NEGATIVE}
    _legend_named(viewer, colours)
    frame = int(np.argmax(mask.sum(axis=(1, 2))))
    go_to_index(viewer, clip, frame)
    viewer.reset_view()
    check_drawn(qtbot, viewer, overlay, colours, frame)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_a_hippocampus_pair_and_why_each_alone_over_the_image(make_napari_viewer, qtbot, shared_data, size):
    """A pair (A vs B) alone over its image, its colours named on the canvas, a user's own layer untouched; the why
    views three colours and two; a small object's outline one pixel wide, no rings (a variant:
    test_widgets_counterfactuals; an agreement map: test_widgets_colours)."""
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(*size)
    root = shared_data / "hippocampus_mri"
    image, truth = viewer.open(str(root / "imagesTr" / "hippocampus_001.nii.gz"), plugin="napari-medsam-eval")
    mask = np.asarray(truth.data) == 1
    index = int(np.argmax(mask.sum(axis=(1, 2))))
    a, b = mask, np.roll(mask, 3, axis=2)
    pair = viewer.add_layer(Labels(ab_overlay(a, b), name=f"{image.name} A vs B", opacity=0.6,
                                   metadata={"role": "ab_overlay", "image": image.name}))
    user = viewer.add_labels(np.zeros_like(mask, dtype=np.uint8), name="my own layer")  # never touched
    prediction = viewer.add_layer(Labels(a.astype(np.uint8), name=f"{image.name} prediction",
                                         metadata={"role": "prediction", "image": image.name, "target_label": 1}))
    legend = compose(viewer, "A vs B", image, {"ab_overlay": pair})
    assert [text for text, _c in legend] == ["A only", "B only", "both"]
    _directly_above(viewer, pair, image)
    assert not truth.visible and not prediction.visible and user.visible
    go_to_index(viewer, image, index)
    viewer.reset_view()
    colours = {AB_A_ONLY: palette.A_ONLY, AB_B_ONLY: palette.B_ONLY, AB_BOTH: palette.BOTH}
    _legend_named(viewer, colours)
    check_drawn(qtbot, viewer, pair, colours, index)

    # back to truth and prediction: the prediction a one-pixel outline without rings on this small object
    show_view(viewer, "truth & prediction", image)
    assert truth.visible and prediction.visible and not pair.visible
    assert prediction.contour == 1 and size_style(12, 20.0) == (1, False, 0.65)
    # each object named in its colour (the truth's two labels), the prediction in the palette's orange
    assert legend_shown(viewer) == [("truth: anterior", palette.GROUND_TRUTH.upper()),
                                    ("truth: posterior", palette.GROUND_TRUTH_PALETTE[1].upper()),
                                    ("prediction (outline)", palette.PREDICTION.upper())]
    assert set(views_of(viewer, image)) >= {"truth & prediction", "A vs B"}
    why = viewer.add_layer(Labels(part_overlay(b, a), name=f"{image.name} why",
                                  metadata={"role": "error_parts", "image": image.name}))
    too_much = [text for text, _c in show_view(viewer, "why: too much", image)]
    assert too_much == ["leak", "off target", "over"] and why.visible and not prediction.visible
    assert [text for text, _c in show_view(viewer, "why: too little", image)] == ["missed slices", "under"]
    assert why.colormap.map(np.array([PART_VALUES["leak"]]))[0][3] == 0  # a part of the other view: not drawn
    for name, spec in VIEWS.items():  # no view needs more than three colour roles
        from napari_medsam_eval._widgets.common._canvas_roles import ROLES
        colours_of = {c for role in spec.roles if not ROLES[role].marker for _v, _t, c in ROLES[role].colors}
        limit = 5 if name == "sensitivity" else 3  # the agreement map is one role: a scale of five bins
        assert len(colours_of) <= limit or name.startswith("why"), (name, colours_of)


def test_task_names_show_the_part_that_tells_them_apart():
    """Issue 65, words in full: two tasks of one dataset read "anterior" and "posterior", not "hippocampus_mri/..."
    twice; tasks of two datasets keep their dataset."""
    from napari_medsam_eval._widgets.benchmark._bench_items import distinct_names

    assert distinct_names(["hippocampus_mri/anterior", "hippocampus_mri/posterior"]) == ["anterior", "posterior"]
    assert distinct_names(["a/liver", "b/liver"]) == ["a/liver", "b/liver"]
    assert distinct_names(["hippocampus_mri/anterior"]) == ["anterior"]
    assert distinct_names(["x/y/core", "x/y/whole"]) == ["core", "whole"]
    assert distinct_names([]) == []
