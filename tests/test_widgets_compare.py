"""The Compare / failure-analysis widget in a real viewer (Xvfb), on real ground truth.

The "prediction" here is the real ground truth shifted by two pixels with one
slice missed and one slice added, so every number is known; the model's own
predictions are compared in tests/test_widgets_segment.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from plugin_dock import dock
from napari_medsam_eval._widgets import CompareWidget
from napari_medsam_eval.evaluation.mask_comparison import OVERLAY_FN, OVERLAY_FP, OVERLAY_TP
from napari_medsam_eval.io import read_label
from napari_medsam_eval.evaluation.metrics import compute_dice, compute_per_slice_dice

pytestmark = pytest.mark.gui

HIPPO = "hippocampus_015"


@pytest.fixture
def viewer_with_pair(make_napari_viewer, shared_data):
    """hippocampus image through the plugin's reader, its label added through io, and a prediction."""
    root = shared_data / "hippocampus_mri"
    viewer = make_napari_viewer()
    image, *paired = viewer.open(str(root / "imagesTr" / f"{HIPPO}.nii.gz"), plugin="napari-medsam-eval")
    label = read_label(root / "labelsTr" / f"{HIPPO}.nii.gz").array
    if paired:  # the reader opens the ground truth its dataset pairs with the image
        (gt_layer,) = paired
        np.testing.assert_array_equal(gt_layer.data, label)
    else:
        gt_layer = viewer.add_labels(label, name="ground truth", scale=image.scale, metadata={"role": "ground_truth"})
    gt = label == 2
    pred = np.roll(gt, 2, axis=1)
    present = np.flatnonzero(gt.any(axis=(1, 2)))
    pred[present[len(present) // 2]] = False  # a missed slice: DSC 0
    pred[present[-1] + 1] = gt[present[-1]]  # a false-positive slice: DSC 0
    pred_layer = viewer.add_labels(pred.astype(np.uint8) * 2, name="prediction [label 2]", scale=image.scale,
                                   metadata={"role": "prediction", "target_label": 2})
    return viewer, gt_layer, pred_layer, pred, gt


def test_compare_overlay_and_dice(viewer_with_pair, qtbot):
    viewer, gt_layer, pred_layer, pred, gt = viewer_with_pair
    widget = dock(viewer, "compare")
    # layers picked by their roles, target from the prediction's metadata
    assert widget.pred_layer.value is pred_layer and widget.gt_layer.value is gt_layer
    assert widget.target_label.value == 2
    comparison = widget.update_comparison()
    overlay = widget.overlay_layer
    assert overlay is not None and overlay.name.endswith("TP/FP/FN [label 2]")
    np.testing.assert_array_equal(overlay.data == OVERLAY_TP, pred & gt)
    np.testing.assert_array_equal(overlay.data == OVERLAY_FP, pred & ~gt)
    np.testing.assert_array_equal(overlay.data == OVERLAY_FN, ~pred & gt)
    assert set(np.unique(overlay.data)) == {0, OVERLAY_TP, OVERLAY_FP, OVERLAY_FN}
    colors = overlay.colormap.map(np.array([0, OVERLAY_TP, OVERLAY_FP, OVERLAY_FN]))
    assert colors[0][3] == 0 and len({tuple(c) for c in colors[1:]}) == 3  # background clear, 3 distinct colours
    dice = compute_dice(pred, gt)
    assert comparison.dice == dice and widget.volume_dice.value == f"{dice:.4f}"
    # the current slice's DSC follows the dims
    per_slice = compute_per_slice_dice(pred, gt)
    z = int(np.nanargmax(per_slice))
    viewer.dims.set_current_step(0, z)
    assert widget.slice_dice.value == f"{per_slice[z]:.4f} (slice {z})"
    viewer.dims.set_current_step(0, 0)
    assert widget.slice_dice.value.startswith("n/a (both empty)")
    # the overlay layer is not offered as a prediction or ground truth
    assert overlay not in [layer for _name, layer in widget.layer_choice.layer_choices()]
    # editing the prediction updates the comparison (debounced)
    pred_layer.data = np.where(gt, 2, 0).astype(np.uint8)
    qtbot.waitUntil(lambda: widget.comparison.dice == 1.0, timeout=5000)
    assert widget.volume_dice.value == "1.0000" and widget.overlay_layer is overlay
    assert len([layer for layer in viewer.layers if "TP/FP/FN" in layer.name]) == 1


def test_plot_click_and_next_worst(viewer_with_pair):
    from matplotlib.backend_bases import MouseEvent

    viewer, _gt_layer, _pred_layer, pred, gt = viewer_with_pair
    widget = dock(viewer, "compare")
    comparison = widget.update_comparison()
    per_slice = compute_per_slice_dice(pred, gt)
    line_x, line_y = widget.plot.line.get_data()
    np.testing.assert_array_equal(line_x, np.arange(gt.shape[0]))
    np.testing.assert_array_equal(line_y, per_slice)

    # a click near a plotted point moves the viewer to that slice
    widget.canvas.draw()
    target = int(np.flatnonzero(~np.isnan(per_slice))[3])
    x, y = widget.axes.transData.transform((target + 0.2, per_slice[target]))
    MouseEvent("button_press_event", widget.canvas, x, y, button=1)._process()
    assert viewer.dims.current_step[0] == target
    assert widget.slice_dice.value.endswith(f"(slice {target})")

    # next worst: slices with foreground by rising DSC, then wrapping around
    order = comparison.worst_slices()
    valid = np.flatnonzero(pred.any(axis=(1, 2)) | gt.any(axis=(1, 2)))
    assert sorted(order.tolist()) == valid.tolist()
    assert per_slice[order[0]] == 0 and per_slice[order[1]] == 0  # the missed and the false-positive slice
    visited = [widget.next_worst() for _ in range(len(order) + 1)]
    assert visited[:-1] == order.tolist() and visited[-1] == order[0]
    assert viewer.dims.current_step[0] == order[0]
    assert widget.worst_info.value.startswith(f"#1/{len(order)}: slice {order[0]}")
    # its key (Shift+W, in the button's tooltip) goes on to the next worst slice
    from napari_medsam_eval._widgets.common._shortcuts import COMPARE_SHORTCUTS, key_text

    key = key_text(COMPARE_SHORTCUTS["next_worst"])
    assert key in widget.worst_button.tooltip
    (on_key,) = [func for name, func in viewer.keymap.items() if str(name) == key]
    on_key(viewer)
    assert viewer.dims.current_step[0] == order[1]


def _cursor_columns(canvas) -> np.ndarray:
    """The pixel columns of ``canvas`` (as painted on screen) in the cursor's colour."""
    from matplotlib.colors import to_rgb

    from napari_medsam_eval.core.palette import PLOT_CURSOR

    image = canvas.grab().toImage()
    rgb = np.array([[image.pixelColor(x, y).getRgb()[:3] for x in range(image.width())]
                    for y in range(0, image.height(), 4)], dtype=float)
    near = np.abs(rgb - np.array(to_rgb(PLOT_CURSOR)) * 255).max(axis=2) < 40
    return np.flatnonzero(near.sum(axis=0) >= near.shape[0] // 3)


def test_the_plot_cursor_follows_the_slice_at_the_next_paint(viewer_with_pair, qtbot):
    """The cursor moves with the slice shown and reaches the screen with the window's next paint, not at
    once: a synchronous repaint of the plot recomposes the whole window with napari's OpenGL canvas on
    every move of the dims (tens of ms each on the GUI thread)."""
    from qtpy.QtCore import QEvent, QObject

    viewer, _gt_layer, _pred_layer, pred, gt = viewer_with_pair
    viewer.window._qt_window.resize(1600, 1000)
    viewer.window._qt_window.show()
    widget = dock(viewer, "compare")
    widget.update_comparison()
    canvas = widget.canvas
    qtbot.waitUntil(lambda: widget.plot._background is not None, timeout=5000)  # the plot drawn in full once

    class Paints(QObject):
        count = 0

        def eventFilter(self, _obj, event):  # noqa: N802 (Qt's name)
            if event.type() == QEvent.Paint:
                Paints.count += 1
            return False
    paints = Paints()
    canvas.installEventFilter(paints)
    per_slice = compute_per_slice_dice(pred, gt)
    for z in np.flatnonzero(~np.isnan(per_slice))[[0, -1]]:
        Paints.count = 0
        viewer.dims.set_current_step(0, int(z))
        assert Paints.count == 0  # nothing painted while the dims move
        qtbot.waitUntil(lambda: Paints.count > 0, timeout=5000)  # the next paint shows the cursor
        x = widget.axes.transData.transform((z, 0))[0] / canvas.device_pixel_ratio
        columns = _cursor_columns(canvas)
        assert columns.size and np.abs(columns - x).min() <= 2, (z, x, columns)
    canvas.removeEventFilter(paints)


def test_compare_picks_up_added_layers_by_role(make_napari_viewer, shared_data, qtbot):
    """A prediction or ground truth added later (another widget's, a benchmark row's) is compared at once;
    a ground truth that does not fit the compared prediction is left alone."""
    root = shared_data / "hippocampus_mri"
    viewer = make_napari_viewer()
    widget = dock(viewer, "compare")
    label = read_label(root / "labelsTr" / f"{HIPPO}.nii.gz").array
    gt_layer = viewer.add_labels(label, name="ground truth", metadata={"role": "ground_truth"})
    other = viewer.add_labels(np.zeros((4, 8, 8), np.uint8), name="user mask")  # no role: not picked
    assert widget.gt_layer.value is gt_layer and widget.pred_layer.value is None
    pred = np.where(label == 1, 1, 0).astype(np.uint8)
    pred_layer = viewer.add_labels(pred, name="prediction [label 1]",
                                   metadata={"role": "prediction", "target_label": 1})
    assert widget.pred_layer.value is pred_layer and widget.target_label.value == 1
    qtbot.waitUntil(lambda: widget.comparison is not None, timeout=5000)  # compared by itself
    assert widget.comparison.dice == 1.0
    viewer.add_labels(np.zeros((3, 4, 5), np.uint8), name="small gt", metadata={"role": "ground_truth"})
    assert widget.gt_layer.value is gt_layer and other is not widget.pred_layer.value
    second = viewer.add_labels(label.copy(), name="second gt", metadata={"role": "ground_truth"})
    assert widget.gt_layer.value is second  # it fits the prediction: the newest ground truth is compared


def test_compare_scaled_volume_and_mismatch(make_napari_viewer, shared_data, monkeypatch):
    """Anisotropic npz (z spacing 5 mm): navigation in world steps; mismatched shapes -> a notification."""
    from napari_medsam_eval._widgets.compare import _compare_metrics as compare_module

    errors: list[str] = []
    monkeypatch.setattr(compare_module, "show_error", errors.append)
    viewer = make_napari_viewer()
    path = shared_data / "deeplesion_ct_npz" / "CT_Lesion_000002_03_01_035-047.npz"
    image, gt_layer = viewer.open(str(path), plugin="napari-medsam-eval")
    gt = gt_layer.data == 1
    pred = np.zeros_like(gt)
    pred[:, 250:300, 250:300] = True
    viewer.add_labels(pred.astype(np.uint8), name="my mask", scale=image.scale)
    widget = dock(viewer, "compare")
    widget.pred_layer.value = viewer.layers["my mask"]
    assert widget.gt_layer.value is gt_layer
    comparison = widget.update_comparison()
    assert comparison.dice == compute_dice(pred, gt)  # a 0/1 mask compares with any target
    z = widget.next_worst()
    assert viewer.dims.current_step[0] == z and np.isclose(viewer.dims.point[0], z * image.scale[0])
    viewer.add_labels(np.zeros((3, 4, 5), np.uint8), name="wrong shape")
    widget.pred_layer.value = viewer.layers["wrong shape"]
    assert widget.update_comparison() is None and errors and "shape" in errors[-1]


def test_widgets_open_from_the_manifest(make_napari_viewer):
    """What ``napari -w napari-medsam-eval`` does: npe2 contributions, docked with the viewer injected."""
    from npe2 import PluginManifest

    from napari_medsam_eval._widgets import SegmentWidget

    manifest = PluginManifest.from_distribution("napari-medsam-eval")
    assert {w.display_name for w in manifest.contributions.widgets} == {"Segment", "Compare / failure analysis", "Benchmark"}
    viewer = make_napari_viewer()
    _dock, segment = viewer.window.add_plugin_dock_widget("napari-medsam-eval", "Segment")
    _dock, compare = viewer.window.add_plugin_dock_widget("napari-medsam-eval", "Compare / failure analysis")
    assert isinstance(segment, SegmentWidget) and isinstance(compare, CompareWidget)
    layer = viewer.add_labels(np.zeros((4, 8, 8), np.uint8), name="gt", metadata={"role": "ground_truth"})
    assert compare.gt_layer.value is layer  # choices follow the layer list


def test_plot_marks_where_propagation_stopped(viewer_with_pair):
    """A prediction that carries its propagation stops (layer metadata, as the Segment widget and a
    benchmark row write it) gets a marker and the rule in words on the per-slice plot."""
    viewer, _gt_layer, pred_layer, _pred, gt = viewer_with_pair
    present = np.flatnonzero(gt.any(axis=(1, 2)))
    pred_layer.metadata["stops"] = [
        {"direction": "up", "last": int(present[-1]), "at": int(present[-1]) + 1, "reason": "intensity"},
        {"direction": "down", "last": int(present[0]), "at": None, "reason": "end"},
    ]
    widget = dock(viewer, "compare")
    widget.update_comparison()
    assert widget.stop_markers == [(int(present[-1]) + 1, "intensity")]
    lines = [line for line in widget.axes.get_lines() if line.get_linestyle() == ":"]
    assert [float(line.get_xdata()[0]) for line in lines] == [float(present[-1] + 1)]
    assert "brightness changed" in [text.get_text() for text in widget.axes.texts]  # the rule in words
    pred_layer.metadata["stops"] = []
    widget.update_comparison()
    assert widget.stop_markers == [] and not [t for t in widget.axes.texts if t.get_text() == "brightness changed"]


def test_no_pair_says_so_and_a_new_comparison_replaces_the_overlay(viewer_with_pair, monkeypatch):
    """Without a ground truth the widget says what to choose (status line; a notification for the button);
    comparing another target replaces the TP/FP/FN layer instead of adding one."""
    from napari_medsam_eval._widgets.compare import _compare_metrics as compare_module

    warnings: list[str] = []
    monkeypatch.setattr(compare_module, "show_warning", warnings.append)
    viewer, gt_layer, pred_layer, pred, gt = viewer_with_pair
    widget = dock(viewer, "compare")
    widget.gt_layer.value = None
    assert widget.update_comparison() is None and widget.comparison is None
    assert widget.status.value == "nothing compared: choose a ground truth (Labels layers of one shape)"
    widget.compare_button.native.click()  # the button: a notification too
    assert warnings and "choose a ground truth" in warnings[-1]
    assert not [layer for layer in viewer.layers if layer.metadata.get("role") == "overlay"]

    widget.gt_layer.value = gt_layer
    first = widget.update_comparison()
    assert first is not None and widget.status.value.startswith("label 2:")
    overlay = widget.overlay_layer
    widget.target_label.value = 1  # the other hippocampus label
    second = widget.update_comparison()
    overlays = [layer for layer in viewer.layers if layer.metadata.get("role") == "overlay"]
    assert overlays == [overlay] and widget.overlay_layer is overlay and overlay.name.endswith("TP/FP/FN [label 1]")
    truth1, pred1 = gt_layer.data == 1, pred_layer.data == 1  # the 0/2 prediction holds no label 1
    np.testing.assert_array_equal(overlay.data == OVERLAY_FN, truth1 & ~pred1)
    assert second.dice == compute_dice(pred1, truth1) == 0.0


def test_every_control_has_a_tooltip(viewer_with_pair):
    viewer, *_ = viewer_with_pair
    widget = dock(viewer, "compare")
    for control in (widget.pred_layer, widget.gt_layer, widget.target_label, widget.compare_button,
                    widget.volume_dice, widget.slice_dice, widget.worst_button, widget.worst_info, widget.status):
        assert control.native.toolTip(), control.label
    assert widget.canvas.toolTip()
