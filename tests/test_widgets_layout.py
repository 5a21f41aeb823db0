"""Results in view without scrolling, docked from the Plugins menu in a real viewer (Xvfb).

In a 1366 x 768 window with the Segment and Compare docks stacked, a comparison's DSC lines, its
per-slice plot (at least 140 pixels) and Next worst slice are shown whole (not clipped by a scroll area or the
window); with the Benchmark and Compare docks stacked (1600 x 1000, as in docs/napari.md), the rows arriving
bring the row table to the front with ten rows and more in view, the summary one click away. Where a column is too
short for its docks (three at 1366 x 768), they give way to each other as tabs: the dock in use shows its results
whole, the others are a click away.

No test waits a fixed time for the layout: each waits until what it checks holds (the docks share a column in a
later turn of the event loop, and a window resize 120 ms after the last one; under a loaded machine a fixed wait
of 600 ms was sometimes too short: the suite's one order- and load-dependent failure, issue 67).
"""
from __future__ import annotations

import numpy as np
import pytest
from napari.layers import Labels
from test_report_data import rows_a

from plugin_dock import dock
from napari_medsam_eval._widgets.benchmark.dock import Progress

pytestmark = pytest.mark.gui


def _whole(widget) -> bool:
    """Shown, and all of it in view (its visible region is its whole rectangle)."""
    return widget.isVisible() and widget.visibleRegion().boundingRect() == widget.rect()


def _sample_pair(viewer) -> tuple[Labels, Labels]:
    """The CT phantom's ground truth and a prediction shifted from it (so the DSC is below 1)."""
    viewer.open_sample("napari-medsam-eval", "phantom_ct")
    truth = next(layer for layer in viewer.layers if layer.metadata.get("role") == "ground_truth")
    prediction = viewer.add_layer(Labels(np.roll(np.asarray(truth.data), 3, axis=2), name="shifted prediction",
                                         metadata={"role": "prediction", "image": truth.metadata.get("image")}))
    return prediction, truth


#: the least height of Compare's per-slice plot after any resize (issue 65)
PLOT_LEAST = 140
#: how long a test waits for the layout to settle
SETTLE_MS = 10_000


def _compare_in_view(compare) -> list[str]:
    """What of Compare's results is not wholly in view (empty: all of it is, the plot at least PLOT_LEAST tall)."""
    missing = [name for name, native in (
        ("DSC (all)", compare.volume_dice.native), ("DSC (slice)", compare.slice_dice.native),
        ("worst", compare.worst_info.native), ("per-slice plot", compare.canvas),
        ("Next worst slice", compare.worst_button.native), ("Compare", compare.compare_button.native),
        ("status", compare.status.native)) if not _whole(native)]
    return missing + ([f"plot {compare.canvas.height()} px"] if compare.canvas.height() < PLOT_LEAST else [])


def test_compare_results_in_view_beside_segment_at_1366_by_768(make_napari_viewer, qtbot):
    viewer = make_napari_viewer(show=True)
    window = viewer.window._qt_window
    window.resize(1366, 768)
    prediction, truth = _sample_pair(viewer)
    segment = dock(viewer, "segment")
    compare = dock(viewer, "compare")
    compare.pred_layer.value, compare.gt_layer.value = prediction, truth
    assert compare.update_comparison() is not None
    qtbot.waitUntil(lambda: not _compare_in_view(compare), timeout=SETTLE_MS)
    assert window.width() <= 1366 and window.height() <= 768, window.size()
    assert compare.volume_dice.value not in ("", "-")
    for name in ("segment_button", "propagate_button", "correct_button", "cancel_button", "progress", "status"):
        assert _whole(getattr(segment, name).native), f"segment: {name} is not wholly in view"


def test_benchmark_rows_in_view_beside_compare(make_napari_viewer, qtbot):
    viewer = make_napari_viewer(show=True)
    window = viewer.window._qt_window
    window.resize(1600, 1000)
    benchmark = dock(viewer, "benchmark")
    dock(viewer, "compare")
    rows = [dict(row, case_id=f"{row['case_id']}-{i}") for i in range(3) for row in rows_a()]
    benchmark.job.on_progress(Progress(done=1, total=1, rows=rows))  # rows arriving, as from a run
    table = benchmark.results.table
    qtbot.waitUntil(lambda: _whole(table) and table.viewport().height() >= 10 * table.rowHeight(0), timeout=SETTLE_MS)
    assert window.width() <= 1600 and window.height() <= 1000, window.size()
    assert table.rowCount() == len(rows) >= 12
    summary = benchmark.results.summary
    assert not summary.isVisible()  # on its own tab, one click away
    benchmark.tabs.tabBar().setCurrentIndex(2)
    qtbot.waitUntil(lambda: not benchmark.results.pending and _whole(summary) and _whole(benchmark.results.canvas),
                    timeout=SETTLE_MS)
    assert summary.rowCount() > 0


def test_the_column_is_shared_by_the_heights_the_docks_state():
    """Segment (no stated height) above Compare (360): Compare gets 360, Segment the rest; a column too
    short for two stated heights scales them down together, the others kept at their least heights."""
    from napari_medsam_eval._widgets.common._dock_tabs import column_heights

    assert column_heights([443, 265], [None, 360], [294, 265]) == [348, 360]
    assert column_heights([600, 200, 150], [None, 360, 400], [294, 265, 300]) == [295, 310, 345]
    assert column_heights([500, 200], [None, None], [100, 100]) == [500, 200]


def test_three_docks_at_1366_by_768_give_way_to_the_dock_in_use(make_napari_viewer, qtbot):
    """Issues 58 and 65: Segment, Compare and Benchmark docked in a 1366 x 768 window keep it on the screen (it
    grew to 921), and the dock in use shows its results whole (one row and a cut plot when all three shared the
    column): the others give way as tabs, one click away; Compare, when its button is pressed, comes in front."""
    viewer = make_napari_viewer(show=True)
    window = viewer.window._qt_window
    window.resize(1366, 768)
    prediction, truth = _sample_pair(viewer)
    segment = dock(viewer, "segment")
    compare = dock(viewer, "compare")
    benchmark = dock(viewer, "benchmark")
    rows = [dict(row, case_id=f"{row['case_id']}-{i}") for i in range(3) for row in rows_a()]
    benchmark.job.on_progress(Progress(done=1, total=1, rows=rows))
    table = benchmark.results.table
    qtbot.waitUntil(lambda: _whole(table) and _whole(benchmark.run_button.native)
                    and table.viewport().height() >= 8 * table.rowHeight(0), timeout=SETTLE_MS)
    assert window.width() <= 1366 and window.height() <= 768, window.size()
    assert not _whole(segment.propagate_button.native)  # gave way: a tab behind
    compare.pred_layer.value, compare.gt_layer.value = prediction, truth
    compare.compare_button.changed.emit(True)  # the button, as a click
    qtbot.waitUntil(lambda: not _compare_in_view(compare), timeout=SETTLE_MS)


def test_a_window_made_smaller_keeps_the_compare_plot_in_view(make_napari_viewer, qtbot):
    """Issue 58: docked at 1600 x 1000, then the window made 1366 x 768: the column is shared again, and
    Compare's plot stays in view (it was scrolled out: Qt took the height from the lower dock)."""
    viewer = make_napari_viewer(show=True)
    window = viewer.window._qt_window
    window.resize(1600, 1000)
    prediction, truth = _sample_pair(viewer)
    dock(viewer, "segment")
    compare = dock(viewer, "compare")
    compare.pred_layer.value, compare.gt_layer.value = prediction, truth
    assert compare.update_comparison() is not None
    qtbot.waitUntil(lambda: not _compare_in_view(compare), timeout=SETTLE_MS)
    window.resize(1366, 768)
    qtbot.waitUntil(lambda: window.height() <= 768 and not _compare_in_view(compare), timeout=SETTLE_MS)
