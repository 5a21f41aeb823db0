"""The Benchmark widget's DSC-vs-interactions plot in a real viewer (Xvfb), on synthetic run folders.

The corrections rows are those of tests/test_report_effort.py (two tasks, K = 5); the
expected curves are recomputed here from the rows with :mod:`napari_medsam_eval.evaluation.interaction_effort`
and checked against the hand-worked medians of that module's notes.
"""
from __future__ import annotations

import numpy as np
import pytest
from qtpy.QtCore import Qt
from test_report_data import rows_a, write_run
from test_report_effort import corrections_rows

from plugin_dock import dock
from napari_medsam_eval._widgets import BenchmarkWidget
from napari_medsam_eval._widgets.benchmark.dock import Progress
from napari_medsam_eval.benchmark.schema import to_dataframe
from napari_medsam_eval.evaluation.interaction_effort import curve_summary, curves_by_task

pytestmark = pytest.mark.gui


@pytest.fixture
def expected() -> dict:
    """task -> curve summary of the corrections rows (ok rows only)."""
    return {task: curve_summary(c) for task, c in curves_by_task(to_dataframe(corrections_rows())).items()}


def _widget(viewer, qtbot, out=None) -> BenchmarkWidget:
    widget = dock(viewer, "benchmark")
    if out is not None:
        _choose(widget, qtbot, out)
    return widget


def _choose(widget: BenchmarkWidget, qtbot, out) -> None:
    """Choose the run folder ``out`` in the dock, as for an earlier run: its rows shown once read (in a worker)."""
    widget.out_dir.value = out
    qtbot.waitUntil(lambda: not widget.loading, timeout=60_000)


def _shows(widget: BenchmarkWidget, summary) -> None:
    """The plot's median line, mean line and IQR band are exactly ``summary``'s."""
    effort = widget.effort
    np.testing.assert_allclose(effort.median_line.get_xdata(), np.arange(6))
    np.testing.assert_allclose(effort.median_line.get_ydata(), summary["median"].to_numpy())
    np.testing.assert_allclose(effort.mean_line.get_ydata(), summary["mean"].to_numpy())
    band = effort.band.get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(summary["q25"].min()) and band.max() == pytest.approx(summary["q75"].max())


def _click_line(qtbot, table, line: int) -> None:
    item = table.item(line, 0)
    table.scrollToItem(item)
    qtbot.mouseClick(table.viewport(), Qt.LeftButton, pos=table.visualItemRect(item).center())


def test_plot_follows_the_selected_task(make_napari_viewer, tmp_path, qtbot, expected):
    rows = corrections_rows()
    viewer = make_napari_viewer()
    widget = _widget(viewer, qtbot, write_run(tmp_path / "corrections", rows, formats=("jsonl",)))
    view, effort = widget.results, widget.effort
    assert view.table.rowCount() == len(rows) and not effort.isHidden()
    assert set(expected) == {"ct/liver", "ct/spleen"}
    assert expected["ct/spleen"]["median"].iloc[[0, -1]].tolist() == pytest.approx([0.40, 0.84])  # by hand
    # nothing selected: the first task
    assert effort.task == "ct/liver"
    _shows(widget, expected["ct/liver"])

    # a click on a spleen row shows spleen's curve
    line = next(i for i in range(view.table.rowCount()) if view.row_at(i)["case_id"] == "spleen_1")
    _click_line(qtbot, view.table, line)
    assert effort.task == "ct/spleen"
    _shows(widget, expected["ct/spleen"])
    assert "ct/spleen (n=3; 3 paint, 1 absent)" in effort.axes.get_title()  # the failed case not counted; the tools given

    # a line of the per-task summary selects its task too
    qtbot.waitUntil(lambda: not view.pending, timeout=30_000)  # the summary: computed in a worker
    summary_line = next(i for i in range(view.summary.rowCount()) if view.summary.item(i, 0).toolTip() == "ct/liver")
    _click_line(qtbot, view.summary, summary_line)
    assert effort.task == "ct/liver"
    _shows(widget, expected["ct/liver"])
    effort.canvas.draw()  # renders without error


def test_no_curves_no_plot_and_rows_arriving(make_napari_viewer, tmp_path, qtbot, expected):
    viewer = make_napari_viewer()
    widget = _widget(viewer, qtbot, write_run(tmp_path / "plain", rows_a(), formats=("jsonl",)))
    effort = widget.effort
    assert widget.results.table.rowCount() == len(rows_a())
    assert effort.isHidden() and effort.task is None and effort.median_line is None
    widget.results.table.selectRow(0)  # selecting a row of a run without curves draws nothing
    assert effort.task is None and effort.isHidden()

    # a corrections run's rows arriving case by case (as from a running job): the plot appears and grows
    widget.results.clear()
    rows = corrections_rows()
    spleen = [r for r in rows if r["task"] == "ct/spleen"]
    widget.job.on_progress(Progress(done=1, total=2, rows=spleen[:2]))
    assert not effort.isHidden() and effort.task == "ct/spleen"
    assert effort.axes.get_title().startswith("ct/spleen (n=2; 2 paint, 1 absent)")
    widget.job.on_progress(Progress(done=2, total=2, rows=spleen[2:]))
    _shows(widget, expected["ct/spleen"])

    # back to a folder without curves: the plot goes away
    _choose(widget, qtbot, write_run(tmp_path / "plain2", rows_a(), formats=("jsonl",)))
    assert widget.results.table.rowCount() == len(rows_a()) and effort.isHidden()
