"""The benchmark widget's results view: a sortable row table, a per-task summary and a box plot.

Plain Qt and matplotlib, no viewer: the benchmark widget feeds it result rows
(dicts with the columns of :mod:`napari_medsam_eval.benchmark.schema`) as
they arrive. The statistics come from the report package
(:func:`~napari_medsam_eval.report.summarize_tasks` on the rows typed by the
run folder's reader, :func:`~napari_medsam_eval.benchmark.store.table_of_rows`,
as ``medsam-eval report`` reads them), so the widget shows exactly what the
report writes.

The row table is a Qt model (:class:`._rows_model.RowsTable`): any number of rows, a 2,000-row run
folder included, is one insertion. Rows arriving during a run are appended to the table at once; the summary
and the plot, which are recomputed from all rows, follow at most every
:data:`REFRESH_MS` (``add_rows(rows, later=True)``; :meth:`ResultsView.refresh_soon`
at the end of a run), their statistics computed in a napari thread worker
(:func:`summarize_rows`, plain pandas; a quiet :class:`._worker.WorkerRunner`,
:attr:`ResultsView.summarizer`, that locks nothing and leaves the status line
alone) and only shown on the GUI thread, so rows arriving never keep the
viewer busy for long; a run folder's rows (:meth:`ResultsView.set_rows`) are summarized in the worker
too. The latest refresh asked for wins: an earlier one still computing is dropped when it returns.
"""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd
from qtpy.QtCore import QItemSelectionModel, QTimer
from qtpy.QtWidgets import QVBoxLayout, QWidget

from napari_medsam_eval.benchmark.store import table_of_rows
from napari_medsam_eval.core.palette import PLOT_LIGHT_THEME
from napari_medsam_eval.report import summarize_tasks
from napari_medsam_eval._widgets.benchmark._bench_boxes import Boxes, box_data, draw_boxes
from napari_medsam_eval._widgets.benchmark._bench_items import NumericItem, distinct_names, fmt, table as _table, \
    text_item as _text_item
from napari_medsam_eval._widgets.benchmark._row_cells import RowCells, row_cells
from napari_medsam_eval._widgets.benchmark._rows_model import ROW_INDEX_ROLE
from napari_medsam_eval._widgets.benchmark._rows_table import RowsTable
from napari_medsam_eval._widgets.benchmark._why_filter import WhyFilter
from napari_medsam_eval._widgets.common._dock_layout import fixed_margins
from napari_medsam_eval._widgets.common._theme import plot_canvas
from napari_medsam_eval._widgets.common._worker import WorkerRunner

#: columns of the row table
ROW_HEADERS = ("case", "target", "DSC", "NSD", "why", "status")
#: columns of the summary table
SUMMARY_HEADERS = ("task", "n", "median DSC", "DSC IQR", "median NSD")
#: least milliseconds between two refreshes of the summary and plot while rows arrive
REFRESH_MS = 1000


def table_cells(rows: list[dict[str, Any]]) -> list[RowCells]:
    """The row table's cells of ``rows``; no Qt, any thread (a worker makes a run folder's)."""
    return [row_cells(row, ROW_HEADERS) for row in rows]


def summarize_rows(rows: list[dict[str, Any]]) -> tuple[pd.DataFrame, Boxes]:
    """The per-task summary of ``rows`` and the box plot's data; no Qt, any thread."""
    if not rows:
        return pd.DataFrame(), box_data(None)
    table = table_of_rows(rows)
    return summarize_tasks(table, metrics=("dice", "nsd")), box_data(table)


class ResultsView(QWidget):
    """Rows of a run as they arrive: sortable table, per-task summary, DSC box plot per task (the last two in
    :attr:`summary_view`, which whoever shows the view places).

    ``on_open(row)`` is called with a row's dict when its line is double-clicked
    (or chosen by :meth:`next_line`); ``open_hint`` ends the table's tooltip.
    Whoever shows the view closes :attr:`summarizer` when it goes away.
    """

    def __init__(self, on_open: Callable[[dict[str, Any]], Any] | None = None,
                 colors: tuple[str, str] = PLOT_LIGHT_THEME, open_hint: str = "") -> None:
        super().__init__()
        self.rows: list[dict[str, Any]] = []
        self.on_open = on_open
        self.table = RowsTable(ROW_HEADERS)  # a Qt model: thousands of rows appended in one step
        self.table.setSortingEnabled(True)
        rows = self.table.verticalHeader()
        rows.setDefaultSectionSize(self.table.fontMetrics().height() + 5)  # compact lines: more rows in view
        rows.setMinimumSectionSize(self.table.fontMetrics().height() + 4)
        self.table.setMinimumHeight(120)  # grows with its tab: ten rows and more in a 1366 x 768 window
        self.table.cellDoubleClicked.connect(self._double_clicked)
        self.table.setToolTip("one line per case and target; click a header to sort (DSC and NSD by value); "
                              f"double-click a line to open its case, prediction and prompt in the viewer{open_hint}")
        self.summary = _table(SUMMARY_HEADERS)
        self.summary.setMinimumHeight(110)  # the header and four tasks
        self.summary.setMaximumHeight(150)
        self.summary.setToolTip("per task (dataset/target): cases, median DSC, DSC interquartile range and median "
                                "NSD of the scored rows, as 'medsam-eval report' writes them")
        background, self._text_color = colors
        self.figure, self.axes, self.canvas = plot_canvas(background, 170)
        fixed_margins(self.figure, bottom=0.24)
        self.canvas.setToolTip("DSC per task: the box spans the interquartile range, the orange line is the "
                               "median, each dot one case (failed rows left out)")
        self._refresh_timer = QTimer(self)
        self._refresh_timer.setSingleShot(True)
        self._refresh_timer.setInterval(REFRESH_MS)
        self._refresh_timer.timeout.connect(self.refresh_soon)
        #: the refresh asked for last, and the one shown
        self._asked = self._shown = 0
        #: the box plot of a summary from a worker is drawn in a turn of the event loop after its table
        self._boxes_waiting: tuple[int, Boxes] | None = None
        self._boxes_timer = QTimer(self)
        self._boxes_timer.setSingleShot(True)
        self._boxes_timer.timeout.connect(self._draw_waiting_boxes)
        #: computes the summary and the plot's data off the GUI thread (quiet: no status line, nothing locked)
        self.summarizer = WorkerRunner(None)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        #: the rows of one dominant error part only (why it missed)
        self.why_filter = WhyFilter(self.table.rows_model)
        layout.addWidget(self.why_filter)
        layout.addWidget(self.table)
        #: the per-task summary above the box plot, shown apart from the rows (the Benchmark dock's summary tab)
        self.summary_view = QWidget()
        below = QVBoxLayout(self.summary_view)
        below.setContentsMargins(0, 0, 0, 0)
        below.addWidget(self.summary)
        below.addWidget(self.canvas, 1)
        self.summary_frame = pd.DataFrame()
        self._show_summary(*summarize_rows([]))

    # -- rows ------------------------------------------------------------------------

    def clear(self) -> None:
        self.rows = []
        self.table.rows_model.clear()
        self.refresh_summary()

    @property
    def pending(self) -> bool:
        """Whether the summary and plot do not show every row yet (a refresh is due or computing)."""
        return self._refresh_timer.isActive() or self._shown != self._asked

    def refresh_soon(self) -> None:
        """Recompute the summary and plot in a worker now; they are shown when it is done."""
        self._refresh_timer.stop()
        self._asked += 1
        asked = self._asked
        self.summarizer.start(summarize_rows, list(self.rows), text="summarizing the rows",
                              returned=lambda result: self._on_summarized(asked, result),
                              errored=lambda _error: self._on_failed(asked), error_prefix="cannot summarize the rows: ")

    def _on_summarized(self, asked: int, result: tuple[pd.DataFrame, Boxes]) -> None:
        if asked == self._asked:  # else rows changed since: a later refresh shows them
            self._show_summary(*result, boxes_later=True)

    def _on_failed(self, asked: int) -> None:
        """The summary could not be computed (the runner notifies why): nothing is pending any more."""
        if asked == self._asked:
            self._shown = asked

    def set_rows(self, rows: list[dict[str, Any]], cells: list[RowCells] | None = None) -> None:
        """Show exactly ``rows`` (e.g. the results already in a run folder); the summary and plot follow
        from a worker. ``cells``: the rows' table cells, made beforehand (:func:`table_cells`, any thread)."""
        self.rows = []
        self.table.rows_model.clear()
        if rows:
            self.add_rows(rows, cells=cells)
        else:
            self.refresh_summary()

    def add_rows(self, rows: list[dict[str, Any]], later: bool = False, cells: list[RowCells] | None = None) -> None:
        """Append ``rows`` to the table (one insertion into its model, however many) and recompute the
        summary and plot in a worker (:meth:`refresh_soon`; ``later``: within :data:`REFRESH_MS`, once for
        all rows arriving until then). ``cells``: as for :meth:`set_rows`."""
        if not rows:
            return
        added = [dict(row) for row in rows]
        self.rows.extend(added)
        self.why_filter.show_unit("frame" if all(row.get("kind") == "video" for row in self.rows) else "slice")
        self.table.rows_model.append(table_cells(added) if cells is None else cells)
        if not later:
            self.refresh_soon()
        elif not self._refresh_timer.isActive():
            self._refresh_timer.start()

    def row_at(self, line: int) -> dict[str, Any]:
        """The row dict shown on table line ``line`` (whatever the sort order)."""
        return self.rows[self.table.row_index(line)]

    def column_values(self, header: str) -> list[str]:
        """The texts of one column, top to bottom (for scripts and tests)."""
        column = ROW_HEADERS.index(header)
        return [self.table.item(line, column).text() for line in range(self.table.rowCount())]

    def _double_clicked(self, line: int, _column: int) -> None:
        if self.on_open is not None:
            self.on_open(self.row_at(line))

    def next_line(self) -> dict[str, Any] | None:
        """Select the table line below the selected one (the first after the last, or when none is
        selected) and open its row; returns the row (None for an empty table)."""
        count = self.table.rowCount()
        if count == 0:
            return None
        lines = self.table.selectionModel().selectedRows()
        line = (lines[0].row() + 1) % count if lines else 0
        # (not selectRow: with the shortcut's Ctrl/Shift held, that would extend the selection)
        self.table.setCurrentCell(line, 0, QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows)
        self.table.scrollToItem(self.table.item(line, 0))
        row = self.row_at(line)
        if self.on_open is not None:
            self.on_open(row)
        return row

    # -- summary and plot ----------------------------------------------------------

    def refresh_summary(self) -> pd.DataFrame:
        """Recompute the per-task summary table and the box plot from :attr:`rows`, now."""
        self._refresh_timer.stop()
        self._asked += 1
        return self._show_summary(*summarize_rows(self.rows))

    def _show_summary(self, summary: pd.DataFrame, boxes: Boxes, boxes_later: bool = False) -> pd.DataFrame:
        """Fill the summary table and draw the box plot (``boxes_later``: in the next turn of the event loop,
        so the two never freeze the viewer together; shown, for :attr:`pending`, once both are)."""
        self.summary_frame = summary
        self.summary.setRowCount(len(self.summary_frame))
        shown = distinct_names([str(t) for t in self.summary_frame["task"]]) if len(self.summary_frame) else []
        for line, task in enumerate(self.summary_frame.itertuples(index=False)):
            iqr = f"[{fmt(task.dice_q25, 3)}, {fmt(task.dice_q75, 3)}]" if task.dice_n else "n/a"
            name = _text_item(shown[line])  # the part that tells the tasks apart; the whole name on hover
            name.setToolTip(str(task.task))
            items = (name, NumericItem(task.n), NumericItem(task.dice_median), _text_item(iqr),
                     NumericItem(task.nsd_median))
            items[1].setText(str(int(task.n)) if task.n_failed == 0 else f"{int(task.n)} ({int(task.n_failed)} failed)")
            for column, item in enumerate(items):
                self.summary.setItem(line, column, item)
        self._boxes_waiting = (self._asked, boxes)
        if boxes_later:
            self._boxes_timer.start(0)
        else:
            self._draw_waiting_boxes()
        return self.summary_frame

    def _draw_waiting_boxes(self) -> None:
        waiting, self._boxes_waiting = self._boxes_waiting, None
        if waiting is not None:
            asked, boxes = waiting
            draw_boxes(self.axes, boxes, self._text_color)
            self.canvas.draw_idle()
            self._shown = asked


__all__ = ["NumericItem", "ROW_HEADERS", "ROW_INDEX_ROLE", "ResultsView", "SUMMARY_HEADERS"]
