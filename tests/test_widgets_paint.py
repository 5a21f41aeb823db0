"""Paint to correct in the Segment widget: a real viewer (Xvfb), the real LiteMedSAM, real CT.

The user propagates the lesion's key-slice box, goes to the worst slice, paints the lesion
there on the prediction layer (napari's own Labels editing, as the brush does) and presses
Correct slice: the painted slice stays exactly as painted, the slices next to it change, the
anchor list says "painted"; Undo puts the object back and drops the painted anchor.
"""
from __future__ import annotations

import numpy as np
import pytest

from plugin_dock import dock
from napari_medsam_eval._widgets.common._layers import current_index, go_to_index
from napari_medsam_eval.core.anchor_prompts import is_painted
from test_widgets_segment import _wait, backend, errors  # noqa: F401 - the same fixtures and wait

pytestmark = pytest.mark.gui

LESION = "CT_Lesion_000010_01_01_078-090.npz"


def _paint(layer, k: int, wanted: np.ndarray, value: int) -> None:
    """Paint and erase slice ``k`` of ``layer`` into ``wanted`` through napari's own editing path."""
    current = np.asarray(layer.data[k]) == value
    for target, new in ((wanted & ~current, value), (current & ~wanted, 0)):
        ys, xs = np.nonzero(target)
        if len(ys):
            layer.data_setitem((np.full(len(ys), k), ys, xs), new)


def test_paint_on_a_slice_then_correct_keeps_it_and_moves_its_neighbours(make_napari_viewer, shared_data, backend,
                                                                        qtbot, errors):
    viewer = make_napari_viewer()
    image, gt = viewer.open(str(shared_data / "deeplesion_ct_npz" / LESION), plugin="napari-medsam-eval")
    widget = dock(viewer, "segment")
    widget.set_backend(backend)
    first = widget.prompt_from_ground_truth()
    z0, value = first.slice_index, first.target_label
    _wait(qtbot, widget.propagate())
    layer = viewer.layers[f"{image.name} prediction"]
    before = layer.data.copy()
    truth = gt.data == value
    errs = ((before == value) != truth).reshape(len(truth), -1).sum(axis=1)
    errs[z0] = -1
    k = int(np.argmax(errs))  # the worst slice
    go_to_index(viewer, image, k)
    assert current_index(viewer, image) == k

    painted = truth[k].copy()
    painted[:, : int(np.nonzero(painted.any(axis=0))[0].mean())] = False  # the user paints part of it: not the truth
    _paint(layer, k, painted, value)
    assert widget.box_layer.value is None or len(widget.box_layer.value.data) <= 1  # no box drawn on slice k
    worker = widget.correct_slice()
    assert worker is not None and widget.busy
    _wait(qtbot, worker)
    assert errors == []
    result = widget.last_result
    assert not result.cancelled and result.prompt.slice_index == k and is_painted(result.prompt)
    after = layer.data == value
    np.testing.assert_array_equal(after[k], painted)  # kept exactly as painted
    np.testing.assert_array_equal(layer.data[z0], before[z0])  # the first anchor's slice is kept
    near = [j for j in (k - 1, k + 1) if 0 <= j < len(truth) and j != z0]
    assert any(not np.array_equal(after[j], before[j] == value) for j in near)  # its neighbours moved
    lines = widget.anchor_list.lines
    assert f"slice {k}: painted ({int(painted.sum())} pixels)" in lines and len(lines) == 2
    assert [is_painted(p) for p in widget.session.anchors(value)].count(True) == 1

    widget.objects.undo()  # the paint and the painted anchor go
    np.testing.assert_array_equal(layer.data, before)
    assert widget.anchor_list.lines == [lines[0] if "box" in lines[0] else lines[1]]
    assert not any(is_painted(p) for p in widget.session.anchors(value))

    # nothing painted, nothing drawn on the slice: no painted anchor, the usual notification
    assert widget.correct_slice() is None and f"on slice {k}" in errors[-1]


def test_the_benchmark_effort_curve_names_painted_corrections(make_napari_viewer):
    """A ``corrections`` run with ``paint`` in the Benchmark widget: its curve, titled with what was painted."""
    from test_report_effort import corrections_rows

    viewer = make_napari_viewer()
    widget = dock(viewer, "benchmark")
    widget.effort.set_rows(corrections_rows())
    assert not widget.effort.isHidden() and set(widget.effort.summaries) == {"ct/liver", "ct/spleen"}
    widget.effort.show_task("ct/spleen")
    title = widget.effort.axes.get_title()
    assert "ct/spleen" in title and "3 paint, 1 absent" in title
    assert list(widget.effort.median_line.get_ydata()) == pytest.approx([0.40, 0.55, 0.70, 0.79, 0.81, 0.84])
