"""Switching the image in the Segment widget, and Undo of corrections (real viewer, real LiteMedSAM, real MR).

Two hippocampus cases open at once: choosing the other image switches the ground truth,
the prompt layers, the object and the anchors with it, so a prompt from ground truth
fits, each object's propagation writes only its own label, and nothing of the first
image is touched. Undo of a correction removes that correction's anchor only.

Nothing is lost on a switch (issue 42): a CT propagated, an MR worked on, the CT chosen
again - its prediction, anchors, object and undo history are its own again, and a
correction there is the one made without the switch (the ``box`` baseline: fast). The view
follows the image chosen: it is shown, fitted, on its prompt's slice (without one, its object's middle).
"""
from __future__ import annotations

import numpy as np
import pytest

from plugin_dock import dock
from napari_medsam_eval._widgets.common._layers import current_index, go_to_index, image_args
from napari_medsam_eval._widgets.common._removal import RETIRED_KEY
from napari_medsam_eval.protocols.geometry import tight_box
from napari_medsam_eval.session.session import Session
from test_widgets_clinician import _draw_box
from test_widgets_segment import _wait, backend, errors  # noqa: F401 - shared fixtures

pytestmark = pytest.mark.gui

CASES = ("hippocampus_015", "hippocampus_007")
LESION = "CT_Lesion_000002_03_01_035-047.npz"


@pytest.fixture
def box_backend():
    return Session.build_backend("box")


def in_view(viewer, image) -> bool:
    """Whether the camera is fitted on ``image``: centred on it, with its whole extent on the canvas."""
    extent = np.asarray(image.extent.world)[:, -2:]
    centre, size = extent.mean(axis=0), float((extent[1] - extent[0]).max())
    camera = viewer.scene.camera if hasattr(viewer, "scene") else viewer.camera  # (napari 0.9 moved it)
    on_screen = size * camera.zoom  # canvas pixels across the image's longer side
    return bool(np.allclose(camera.center[-2:], centre, atol=0.01 * size)
                and 0.5 * min(viewer.canvas.size) <= on_screen <= max(viewer.canvas.size))


def _open(viewer, shared_data, case):
    root = shared_data / "hippocampus_mri"
    image, truth = viewer.open(str(root / "imagesTr" / f"{case}.nii.gz"), plugin="napari-medsam-eval")
    return image, truth


@pytest.mark.slow
def test_switching_the_image_switches_truth_prompts_objects_and_anchors(make_napari_viewer, shared_data, backend,
                                                                        qtbot, errors):
    viewer = make_napari_viewer()
    first, first_truth = _open(viewer, shared_data, CASES[0])
    widget = dock(viewer, "segment", backend)
    assert widget.image_layer.value is first and widget.gt_layer.value is first_truth
    widget.target_label.value = 2
    widget.prompt_from_ground_truth()
    first_boxes = widget.box_layer.value
    assert first_boxes.metadata["image"] == first.name
    _wait(qtbot, widget.propagate())
    first_prediction = viewer.layers[f"{first.name} prediction"].data.copy()
    assert widget.session.anchors(2)

    second, second_truth = _open(viewer, shared_data, CASES[1])
    assert second_truth.data.shape != first_truth.data.shape  # a mix-up would show as a shape mismatch
    widget.image_layer.value = second
    # its own ground truth; no prompt layer of the first image; an object its truth holds; no anchors
    assert widget.gt_layer.value is second_truth
    assert widget.box_layer.value is not first_boxes and widget.point_layer.value is None
    assert int(widget.target_label.value) in (1, 2) and widget.anchor_list.lines == []
    for label in (1, 2):  # one object after the other, each propagated from its ground-truth box
        widget.target_label.value = label
        prompt = widget.prompt_from_ground_truth()
        assert prompt is not None and prompt.target_label == label, widget.status.value
        assert widget.box_layer.value.metadata["image"] == second.name
        _wait(qtbot, widget.propagate())
        assert not errors, errors
    prediction = viewer.layers[f"{second.name} prediction"].data
    assert set(np.unique(prediction)) == {0, 1, 2}  # object 2 did not overwrite object 1
    # the first image's prediction is untouched, and choosing it brings back its own layers
    np.testing.assert_array_equal(viewer.layers[f"{first.name} prediction"].data, first_prediction)
    widget.image_layer.value = first
    assert widget.gt_layer.value is first_truth and widget.box_layer.value is first_boxes


@pytest.mark.slow
def test_undo_of_a_correction_removes_its_anchor_only(make_napari_viewer, shared_data, backend, qtbot, errors):
    viewer = make_napari_viewer()
    image, truth = _open(viewer, shared_data, CASES[0])
    widget = dock(viewer, "segment", backend)
    prompt = widget.prompt_from_ground_truth()
    _wait(qtbot, widget.propagate())
    propagated = viewer.layers[f"{image.name} prediction"].data.copy()
    assert len(widget.anchor_list.lines) == 1
    slices = np.nonzero((truth.data == 1).any(axis=(1, 2)))[0]
    z = int(slices[0]) if int(slices[0]) != prompt.slice_index else int(slices[-1])
    boxes = widget.box_layer.value
    boxes.data = []
    _draw_box(boxes, image, tight_box(truth.data[z] == 1), z)
    viewer.dims.set_point(0, image.data_to_world([z, 0, 0])[0])
    _wait(qtbot, widget.correct_slice())
    assert len(widget.anchor_list.lines) == 2 and not errors
    widget.objects.undo()  # the correction: its anchor goes, the propagation's stays
    assert widget.anchor_list.lines == [widget.anchor_list.lines[0]] and len(widget.anchor_list.lines) == 1
    assert f"slice {prompt.slice_index}:" in widget.anchor_list.lines[0]
    np.testing.assert_array_equal(viewer.layers[f"{image.name} prediction"].data, propagated)
    # a correction after the undo corrects the propagated result again (its anchors are back)
    _wait(qtbot, widget.correct_slice())
    assert len(widget.anchor_list.lines) == 2
    widget.objects.undo()
    widget.objects.undo()  # the propagation itself: no anchor left
    assert widget.anchor_list.lines == [] and not viewer.layers[f"{image.name} prediction"].data.any()


def test_switching_to_another_image_and_back_loses_nothing(make_napari_viewer, shared_data, box_backend, qtbot,
                                                           errors):
    """Issue 42: CT propagated, MR worked on, CT again: its result, anchors, object and undo come back, and
    Correct slice there equals the same correction made without the switch."""
    viewer = make_napari_viewer()
    ct, ct_truth = viewer.open(str(shared_data / "deeplesion_ct_npz" / LESION), plugin="napari-medsam-eval")
    widget = dock(viewer, "segment", box_backend)
    assert widget.image_layer.value is ct
    prompt = widget.prompt_from_ground_truth()
    _wait(qtbot, widget.propagate())
    propagation = widget.last_result.prompt  # what the propagation ran with
    ct_prediction = viewer.layers[f"{ct.name} prediction"]
    propagated = ct_prediction.data.copy()
    ct_lines = list(widget.anchor_list.lines)
    assert (propagated == 1).sum(axis=(1, 2)).astype(bool).sum() > 1 and len(ct_lines) == 1

    mr, mr_truth = _open(viewer, shared_data, CASES[0])  # the MR: another object, propagated there
    go_to_index(viewer, ct, prompt.slice_index)
    viewer.reset_view()  # (the camera on everything: the CT, larger)
    widget.image_layer.value = mr
    assert widget.anchor_list.lines == []
    # the view follows: the MR shown (the CT and its layers hidden), fitted, on its object's middle slice (no prompt)
    held = np.nonzero((mr_truth.data == int(widget.target_label.value)).any(axis=(1, 2)))[0]
    assert current_index(viewer, mr) == held[len(held) // 2] and mr.visible and mr_truth.visible
    assert not ct.visible and not ct_truth.visible and not ct_prediction.visible and in_view(viewer, mr)
    widget.target_label.value = 2
    widget.prompt_from_ground_truth()
    _wait(qtbot, widget.propagate())
    mr_prediction = viewer.layers[f"{mr.name} prediction"].data.copy()
    assert mr_prediction.any() and widget.anchor_list.lines and not errors, errors

    widget.image_layer.value = ct  # back: the CT's result, anchors and object as they were
    np.testing.assert_array_equal(ct_prediction.data, propagated)
    # in view again, on the slice of its prompt; the MR's layers hidden
    assert current_index(viewer, ct) == prompt.slice_index and ct.visible and ct_prediction.visible
    assert ct_truth.visible and not mr.visible and not mr_truth.visible and in_view(viewer, ct)
    assert widget.anchor_list.lines == ct_lines and int(widget.target_label.value) == 1

    # Correct slice on a slice the propagation did not prompt: only what that correction changes changes
    z = max(np.nonzero((ct_truth.data == 1).any(axis=(1, 2)))[0], key=lambda k: abs(int(k) - prompt.slice_index))
    box = tight_box(ct_truth.data[int(z)] == 1)
    boxes = widget.box_layer.value
    assert boxes.metadata["image"] == ct.name
    _draw_box(boxes, ct, box, int(z))
    go_to_index(viewer, ct, int(z))
    _wait(qtbot, widget.correct_slice())
    assert not errors, errors
    fix = widget.last_result.prompt
    assert fix.slice_index == int(z) and len(widget.anchor_list.lines) == 2

    # the same correction without any switch, through the core session
    data, kwargs = image_args(ct)
    reference = Session(box_backend)
    reference.set_image(data, **kwargs)
    options = widget.propagation_section.session_options("volume", reference.n_slices, prompt.slice_index)
    reference.propagate(propagation, **options)
    expected = reference.correct(fix).mask
    corrected = ct_prediction.data == 1
    np.testing.assert_array_equal(corrected, expected)
    np.testing.assert_array_equal(corrected[prompt.slice_index], propagated[prompt.slice_index] == 1)
    assert corrected.sum() > (corrected[int(z)]).sum()  # more than the corrected slice alone

    # Undo on the CT undoes the CT's correction (its own history), the MR's result stays
    widget.objects.undo()
    np.testing.assert_array_equal(ct_prediction.data, propagated)
    assert widget.anchor_list.lines == ct_lines
    np.testing.assert_array_equal(viewer.layers[f"{mr.name} prediction"].data, mr_prediction)


def test_a_refresh_of_the_choices_keeps_the_view(make_napari_viewer, shared_data, box_backend, qtbot):
    """napari has every docked widget refresh its choices when a layer is added or renamed (a benchmark
    row opening renames its layers): the Segment image still chosen is not brought into view again, so
    the slice and camera stay where the user (or the widget changing the layers) put them."""
    viewer = make_napari_viewer()
    image, truth = _open(viewer, shared_data, CASES[0])
    widget = dock(viewer, "segment", box_backend)
    assert widget.image_layer.value is image
    chosen = []
    widget.image_layer.changed.connect(chosen.append)
    go_to_index(viewer, image, 3)
    viewer.camera.zoom *= 3
    zoom = viewer.camera.zoom
    image.name = f"{image.name} renamed"  # what a row opening does to the layers it reuses
    viewer.add_labels(np.zeros_like(truth.data), name="another layer", scale=image.scale)
    assert chosen and all(value is image for value in chosen)  # the choices were refreshed, the image kept
    assert current_index(viewer, image) == 3 and viewer.camera.zoom == pytest.approx(zoom)
    mr, _mr_truth = _open(viewer, shared_data, CASES[1])  # another image chosen: into view
    widget.image_layer.value = mr
    assert current_index(viewer, mr) != 3 or in_view(viewer, mr)
    widget.image_layer.value = image  # and back: into view again
    assert in_view(viewer, image) and image.visible and not mr.visible


def test_compare_shows_nothing_stale_after_a_switch_of_image(make_napari_viewer, shared_data, box_backend, qtbot,
                                                             errors):
    """Issue 58: Compare follows the image Segment is on. A case compared, then another image chosen that has
    no prediction yet: no number, overlay or plot of the first is left; once it is segmented its own pair is
    compared; back on the first, the first's."""
    viewer = make_napari_viewer()
    first, first_truth = _open(viewer, shared_data, CASES[0])
    second, second_truth = _open(viewer, shared_data, CASES[1])
    widget = dock(viewer, "segment", box_backend)
    compare = dock(viewer, "compare")
    widget.image_layer.value = first
    widget.target_label.value = 1
    widget.prompt_from_ground_truth()
    _wait(qtbot, widget.propagate())
    qtbot.waitUntil(lambda: compare.comparison is not None and not compare.metrics.pending, timeout=30_000)
    first_dice = compare.comparison.dice
    assert compare.pred_layer.value.metadata["image"] == first.name and compare.overlay_layer is not None
    widget.image_layer.value = second  # no prediction of it yet
    qtbot.waitUntil(lambda: compare.comparison is None and not compare.metrics.pending, timeout=30_000)
    assert compare.pred_layer.value is None and compare.volume_dice.value == "-" and compare.why.value == "-"
    assert not any(layer.metadata.get("role") == "overlay" for layer in viewer.layers)
    # the overlay layer is retired, not removed (napari collects garbage in full at a removal): nothing shows
    (retired,) = [layer for layer in viewer.layers if layer.metadata.get(RETIRED_KEY) == "overlay"]
    assert not retired.visible and not np.asarray(retired.data).any() and retired.name == "unused: TP/FP/FN"
    assert retired not in [layer for _name, layer in compare.layer_choice.layer_choices()]
    assert compare.plot.line is None and "nothing compared" in compare.status.value
    widget.target_label.value = 1
    widget.prompt_from_ground_truth()
    _wait(qtbot, widget.propagate())
    qtbot.waitUntil(lambda: compare.comparison is not None and not compare.metrics.pending, timeout=30_000)
    assert compare.pred_layer.value.metadata["image"] == second.name and compare.gt_layer.value is second_truth
    widget.image_layer.value = first
    qtbot.waitUntil(lambda: compare.pred_layer.value is not None
                    and compare.pred_layer.value.metadata["image"] == first.name, timeout=30_000)
    qtbot.waitUntil(lambda: compare.comparison is not None and abs(compare.comparison.dice - first_dice) < 1e-9
                    and not compare.metrics.pending, timeout=30_000)
    assert compare.gt_layer.value is first_truth
    assert not errors, errors
