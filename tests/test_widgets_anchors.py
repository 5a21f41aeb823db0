"""Correct slice in the Segment widget: a real viewer (Xvfb), the real LiteMedSAM, real CT.

The 13-slice DeepLesion npz whose propagation from the ground-truth key-slice box
misses part of the lesion: the user propagates, goes to the worst slice, draws the
lesion's box there and presses Correct slice.
"""
from __future__ import annotations

import numpy as np
import pytest

from plugin_dock import dock
from napari_medsam_eval._widgets import SegmentWidget
from napari_medsam_eval._widgets.segment._anchors import describe_anchor
from napari_medsam_eval._widgets.common._layers import current_index, from_image_coords, go_to_index
from napari_medsam_eval._widgets.common._prompt_layers import box_vertices
from napari_medsam_eval.evaluation.metrics import compute_dice
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.propagation.anchors import absent_prompt, merge_prompt
from napari_medsam_eval.protocols.geometry import tight_box
from test_widgets_segment import _wait, backend, errors  # noqa: F401 - the same fixtures and wait


pytestmark = pytest.mark.gui

LESION = "CT_Lesion_000010_01_01_078-090.npz"


def _lines(widget: SegmentWidget) -> list[str]:
    """What the anchor list shows, top to bottom."""
    return widget.anchor_list.lines


def test_correct_slice_updates_that_slice_and_lists_the_anchors(make_napari_viewer, shared_data, backend, qtbot,
                                                                errors):
    viewer = make_napari_viewer()
    image, gt = viewer.open(str(shared_data / "deeplesion_ct_npz" / LESION), plugin="napari-medsam-eval")
    widget = dock(viewer, "segment")
    widget.set_backend(backend)
    assert _lines(widget) == []
    first = widget.prompt_from_ground_truth()
    z0 = first.slice_index
    _wait(qtbot, widget.propagate())
    layer = viewer.layers[f"{image.name} prediction"]
    before = layer.data.copy()
    assert _lines(widget) == [describe_anchor(first)] and _lines(widget)[0].startswith(f"slice {z0}: box (")

    # nothing drawn on the slice on screen: a notification, no job
    truth = gt.data == 1
    errs = ((before == 1) != truth).reshape(len(truth), -1).sum(axis=1)
    errs[z0] = -1
    k = int(np.argmax(errs))  # the worst slice
    go_to_index(viewer, image, k)
    assert current_index(viewer, image) == k
    assert widget.correct_slice() is None and f"on slice {k}" in errors[-1]

    # the user's box on that slice, then Correct slice
    box = tight_box(truth[k])
    boxes = widget.box_layer.value
    boxes.add_rectangles(from_image_coords(boxes, image, box_vertices(box, k)))
    worker = widget.correct_slice()
    assert widget.busy and not widget.correct_button.enabled and not widget.propagate_button.enabled
    assert widget.cancel_button.enabled
    _wait(qtbot, worker)
    assert not widget.busy and widget.correct_button.enabled

    result = widget.last_result
    assert not result.cancelled and result.prompt.slice_index == k
    assert viewer.layers[f"{image.name} prediction"] is layer  # replaced, not added
    after = layer.data == 1
    assert (after[k] != (before[k] == 1)).any()
    assert compute_dice(after[k], truth[k]) > compute_dice(before[k] == 1, truth[k])
    np.testing.assert_array_equal(layer.data[z0], before[z0])  # the first anchor's slice is kept
    np.testing.assert_array_equal(after, result.mask)
    x0, y0, x1, y1 = box
    lines = _lines(widget)
    assert len(lines) == 2 and f"slice {k}: box ({x0}, {y0}, {x1}, {y1})" in lines
    assert lines == sorted(lines, key=lambda line: int(line.split(":")[0].split()[1]))  # slice order
    assert describe_anchor(first) in lines

    # another image chosen: the list shows its anchors (none); the first image chosen again: its own come back
    other = viewer.add_image(np.zeros((4, 16, 16), dtype=np.uint8), name="other")
    widget.image_layer.value = other
    assert _lines(widget) == [] and widget.session.anchors(image=other.name) == []
    widget.image_layer.value = image
    assert _lines(widget) == lines
    assert errors == [errors[0]]


def test_anchor_lines():
    box = Prompt(1, slice_index=11, boxes=[(250, 220, 330, 290)])
    clicks = Prompt(1, slice_index=11, points=[(260.0, 230.5), (300.0, 250.0)], point_labels=[1, 0])
    assert describe_anchor(box) == "slice 11: box (250, 220, 330, 290)"
    assert describe_anchor(merge_prompt(box, clicks)) == "slice 11: box (250, 220, 330, 290) + 2 points (1 +, 1 -)"
    assert describe_anchor(absent_prompt(1, 4)) == "slice 4: absent"
