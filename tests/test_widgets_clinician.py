"""The Segment widget as a clinician uses it: real viewer (Xvfb), real LiteMedSAM, real MR.

The user's own layers (napari's new-layer buttons), point polarity chosen before a
point is placed, prediction and ground truth told apart, several objects in one
prediction layer, undo, inputs locked while a job runs, shortcuts, options.
hippocampus_015 (28 slices of 35 x 51): about a second per encoded slice.
"""
from __future__ import annotations

import numpy as np
import pytest

from plugin_dock import dock
from napari_medsam_eval._layer_style import GROUND_TRUTH_PALETTE, PREDICTION_CONTOUR, PREDICTION_PALETTE
from napari_medsam_eval.core.palette import NEGATIVE_POINT, POSITIVE_POINT, hex_to_rgb
from napari_medsam_eval._widgets.segment import _drawing as drawing_module
from napari_medsam_eval._widgets.common._layers import from_image_coords
from napari_medsam_eval._widgets.common._prompt_layers import box_vertices
from napari_medsam_eval._widgets.common._shortcuts import SEGMENT_SHORTCUTS, key_text
from napari_medsam_eval.protocols.geometry import tight_box
from test_widgets_segment import _open_hippocampus, _wait, _widget, backend, errors  # noqa: F401 - shared

pytestmark = pytest.mark.gui


def _draw_box(layer, image, box, index):
    layer.add_rectangles(from_image_coords(layer, image, box_vertices(box, index)))


def _key(viewer, key):
    """The function the viewer calls for ``key`` (napari key names)."""
    (bound,) = [func for name, func in viewer.keymap.items() if str(name) == key_text(key)]
    return bound


@pytest.fixture
def warnings_shown(monkeypatch):
    seen: list[str] = []
    monkeypatch.setattr(drawing_module, "show_warning", seen.append)
    return seen


def test_user_layers_polarity_and_box_only_hint(make_napari_viewer, shared_data, backend, qtbot, errors,
                                                warnings_shown):
    viewer = make_napari_viewer()
    image, gt = _open_hippocampus(viewer, shared_data)
    widget = _widget(viewer, backend)
    z = int(np.argmax((gt.data == 1).sum(axis=(1, 2))))
    # a Shapes layer made with napari's own button is the one drawn in: the widget uses it
    shapes = viewer.add_shapes(ndim=3, scale=image.scale)
    assert widget.box_layer.value is shapes
    _draw_box(shapes, image, tight_box(gt.data[z] == 1), z)
    viewer.dims.set_point(0, image.data_to_world([z, 0, 0])[0])
    _wait(qtbot, widget.segment_slice())
    prediction = viewer.layers[f"{image.name} prediction"]
    assert (prediction.data[z] == 1).sum() > 20 and not errors
    assert not warnings_shown  # a box: no hint

    # points: the polarity is chosen before placing; napari selecting the last point changes nothing
    points = viewer.add_points(ndim=3, scale=image.scale)
    assert widget.point_layer.value is points
    points.mode = "add"
    widget.polarity.value = "negative"
    points.add([[z, 3, 3]])
    widget.polarity.value = "positive"
    points.add([[z, 20, 20]])
    points.add([[z, 21, 22]])
    assert points.features["label"].tolist() == [0, 1, 1]
    _key_t = [f for k, f in points.keymap.items() if str(k) == "T"][0]
    _key_t(points)  # T: the next point is negative, the placed ones keep their labels
    assert widget.polarity.value == "negative"
    points.add([[z, 5, 30]])
    assert points.features["label"].tolist() == [0, 1, 1, 0]
    negative, positive = hex_to_rgb(NEGATIVE_POINT), hex_to_rgb(POSITIVE_POINT)
    np.testing.assert_allclose(points.face_color[:, :3], [negative, positive, positive, negative])

    # points with LiteMedSAM (trained on boxes): a hint, the points still used
    shapes.data = []
    _wait(qtbot, widget.segment_slice())
    assert len(warnings_shown) == 1 and "trained on boxes" in warnings_shown[0]
    assert not errors


def test_colours_objects_undo_and_changes(make_napari_viewer, shared_data, backend, qtbot, errors):
    viewer = make_napari_viewer()
    image, gt = _open_hippocampus(viewer, shared_data)
    widget = _widget(viewer, backend)
    assert widget.target_label.value == 1
    widget.prompt_from_ground_truth()
    _wait(qtbot, widget.segment_slice())
    prediction = viewer.layers[f"{image.name} prediction"]
    first = prediction.data.copy()
    z1 = widget.session.gt_prompt.slice_index
    assert set(np.unique(first)) == {0, 1}
    # prediction and ground truth are told apart: other colours, the prediction as a contour
    assert not np.allclose(prediction.get_color(1), gt.get_color(1))
    # a hippocampus is small on screen: a one-pixel outline without dark rings (issue 65; PREDICTION_CONTOUR on a
    # large object)
    assert prediction.contour == 1 < PREDICTION_CONTOUR and not prediction.rings and gt.contour == 0
    from matplotlib.colors import to_rgb  # the documented colours: ground truth label 1 blue, prediction orange

    np.testing.assert_allclose(gt.get_color(1)[:3], to_rgb(GROUND_TRUTH_PALETTE[0]), atol=1e-6)
    np.testing.assert_allclose(prediction.get_color(1)[:3], to_rgb(PREDICTION_PALETTE[0]), atol=1e-6)

    # the next object: label 2 (present in the ground truth), its own prompt, the same layer
    boxes = widget.box_layer.value
    assert widget.objects.step(+1) == 2 and widget.target_label.value == 2
    assert len(boxes.data) == 0  # label 1's box is kept apart
    assert "label 2" in widget.objects.title.value
    widget.prompt_from_ground_truth()
    z2 = widget.session.gt_prompt.slice_index
    _wait(qtbot, widget.segment_slice())
    assert viewer.layers[f"{image.name} prediction"] is prediction
    both = prediction.data.copy()
    assert set(np.unique(both)) == {0, 1, 2}
    np.testing.assert_array_equal(both == 1, first == 1)  # object 2 took no pixel of object 1
    assert (both[z2] == 2).sum() > 0
    widget.objects.step(-1)
    assert widget.target_label.value == 1 and len(boxes.data) == 1  # label 1's box is back

    # a second attempt on object 1 (a wider box), then Undo puts the first attempt back
    box = tight_box(gt.data[z1] == 1)
    boxes.data = []
    _draw_box(boxes, image, (max(0, box[0] - 6), max(0, box[1] - 6), box[2] + 6, box[3] + 6), z1)
    _wait(qtbot, widget.segment_slice())
    second = prediction.data.copy()
    assert not np.array_equal(second == 1, first == 1)
    changes = widget.objects.show_changes()
    assert changes is not None and set(np.unique(changes.data)) - {0} and "added" in widget.status.value
    np.testing.assert_array_equal(changes.data == 1, (second == 1) & (first != 1))
    _key(viewer, SEGMENT_SHORTCUTS["undo"])(viewer)  # Shift+Z
    np.testing.assert_array_equal(prediction.data, both)
    assert widget.status.value.startswith("undid")
    widget.objects.undo()  # object 2's attempt
    np.testing.assert_array_equal(prediction.data, first)
    widget.objects.undo()
    assert not prediction.data.any()
    assert widget.objects.undo() is None and widget.status.value == "nothing to undo"
    assert not errors


def test_inputs_locked_progress_options_and_shortcuts(make_napari_viewer, shared_data, backend, qtbot, errors):
    viewer = make_napari_viewer()
    image, gt = _open_hippocampus(viewer, shared_data)
    widget = _widget(viewer, backend)
    prompt = widget.prompt_from_ground_truth()
    z0 = prompt.slice_index
    widget.propagation_box.direction.value = "forward"
    worker = _key(viewer, SEGMENT_SHORTCUTS["propagate"])(viewer) or widget.runner.worker  # Shift+T
    inputs = (widget.image_layer, widget.model, widget.checkpoint, widget.target_label, widget.gt_layer,
              widget.box_layer, widget.point_layer, widget.propagation_box, widget.objects, widget.protocol)
    assert widget.busy and not any(control.enabled for control in inputs)
    _wait(qtbot, worker)
    assert all(control.enabled for control in inputs)
    result = widget.last_result
    assert not result.cancelled and widget.progress.value == widget.progress.max == result.total > 1
    mask = viewer.layers[f"{image.name} prediction"].data == 1
    assert mask[z0].any() and not mask[:z0].any() and mask[z0 + 1:].any()  # forward only
    # the status says what was segmented, where each direction stopped
    slices = np.flatnonzero(mask.any(axis=(1, 2)))
    assert f"segmented slices {slices[0]}-{slices[-1]} ({len(slices)} with the target)" in widget.status.value

    # a range that leaves out the prompt: a clear error, no job
    widget.propagation_box.direction.value = "both"
    widget.propagation_box.last.value = z0 - 1
    assert widget.propagate() is None and "outside the chosen range" in errors[-1]
    # MedSAM2 without a checkpoint: the GUI names its field
    widget.model.value = "medsam2"
    assert widget.load_model() is None and "'checkpoint' field" in errors[-1]
    # every control has a tooltip; the ground-truth controls fold away
    controls = [control for section in widget for control in section]  # the widget stacks its sections
    assert widget.segment_button in widget.footer.rows[0] and widget.anchor_list in controls
    for control in controls:
        if control in widget.footer.rows:  # the rows of action buttons: each button has its tooltip
            assert all(button.tooltip for button in control), control
            continue
        assert control.tooltip or control in (widget.objects, widget.propagation_box, widget.encode_box,
                                              widget.anchor_list, widget.progress, widget.status), control.label
    widget.use_gt.value = False
    assert not widget.gt_layer.visible and not widget.gt_prompt_button.visible
    # the widget's keys go when it closes
    widget.native.close()
    widget.native.deleteLater()
    qtbot.wait(50)
    assert not any(str(name) == key_text(SEGMENT_SHORTCUTS["propagate"]) for name in viewer.keymap)


def test_segment_dock_fits_a_1600_by_1000_window_and_long_errors_wrap(make_napari_viewer, shared_data, qtbot, errors):
    viewer = make_napari_viewer(show=True)
    _open_hippocampus(viewer, shared_data)
    widget = _widget(viewer)
    dock(viewer, "compare")
    window = viewer.window._qt_window
    window.resize(1600, 1000)
    qtbot.wait(300)
    hint = window.minimumSizeHint()
    assert window.height() <= 1000 and hint.height() <= 1000 and window.width() <= 1600, (window.size(), hint)
    width = widget.native.minimumSizeHint().width()
    widget.model.value = "medsam2"
    widget.checkpoint.value = "/a/very/long/folder/name/without/any/space" * 12 + "/MedSAM2_latest.pt"
    widget.load_model()  # a missing file: a long error on the status line
    qtbot.waitUntil(lambda: not widget.busy, timeout=60_000)
    qtbot.wait(100)
    assert "MedSAM2_latest.pt" in errors[-1] and widget.native.minimumSizeHint().width() == width
    assert window.width() <= 1600 and window.minimumSizeHint().height() <= 1000


def test_absent_label_lists_the_labels_present(shared_data):
    from napari_medsam_eval.io import read_label
    from napari_medsam_eval.session.session import Session

    label = read_label(shared_data / "hippocampus_mri" / "labelsTr" / "hippocampus_015.nii.gz").array
    with pytest.raises(ValueError, match=r"label 7 is absent .*labels present: 1, 2"):
        Session().prompt_from_ground_truth(label, 7)
