"""The benchmark widget's results view: a sortable row table, a per-task summary and a box plot.

Plain Qt and matplotlib, no viewer: the benchmark widget feeds it result rows
(dicts with the columns of :mod:`napari_medsam_eval.benchmark.schema`) as
they arrive. The statistics come from the report package
(:func:`~napari_medsam_eval.report.summarize_tasks` on a table normalised by
:func:`~napari_medsam_eval.report.load_run`), so the widget shows exactly
what ``medsam-eval report`` writes.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pandas as pd
from qtpy.QtCore import Qt
from qtpy.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from ..benchmark.schema import to_dataframe
from ..report import load_run, summarize_tasks
from ..report.stats import natural_key
from ._theme import plot_canvas, style_axes

#: columns of the row table
ROW_HEADERS = ("case", "target", "DSC", "NSD", "status")
#: columns of the summary table
SUMMARY_HEADERS = ("task", "n", "median DSC", "DSC IQR", "median NSD")
#: Qt item role holding the index of the row (in :attr:`ResultsView.rows`) a table line shows
ROW_INDEX_ROLE = Qt.UserRole + 1


def fmt(value: Any, digits: int = 4) -> str:
    """A score as text; NaN/None as ``n/a``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if math.isnan(number) else f"{number:.{digits}f}"


class NumericItem(QTableWidgetItem):
    """A table item that sorts by its number (NaN after every number), not by its text."""

    def __init__(self, value: Any) -> None:
        super().__init__(fmt(value))
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        self.setData(Qt.UserRole, number)
        self.setTextAlignment(int(Qt.AlignRight | Qt.AlignVCenter))

    def __lt__(self, other: QTableWidgetItem) -> bool:
        a, b = self.data(Qt.UserRole), other.data(Qt.UserRole)
        if not isinstance(a, float) or not isinstance(b, float):
            return super().__lt__(other)
        if math.isnan(a) or math.isnan(b):
            return not math.isnan(a) and math.isnan(b)
        return a < b


def _table(headers: tuple[str, ...]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(list(headers))
    table.setEditTriggers(QAbstractItemView.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectRows)
    table.verticalHeader().setVisible(False)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
    table.horizontalHeader().setStretchLastSection(True)
    return table


def _text_item(text: str) -> QTableWidgetItem:
    return QTableWidgetItem(text)


def target_text(row: dict[str, Any]) -> str:
    """``anterior (1)``: the target's name and label value."""
    value = row.get("target_label")
    name = str(row.get("label_name") or "")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return name or "unknown"
    return f"{name} ({int(value)})"


class ResultsView(QWidget):
    """Rows of a run as they arrive: sortable table, per-task summary, DSC box plot per task.

    ``on_open(row)`` is called with a row's dict when its line is double-clicked.
    """

    def __init__(self, on_open: Callable[[dict[str, Any]], Any] | None = None,
                 colors: tuple[str, str] = ("white", "black")) -> None:
        super().__init__()
        self.rows: list[dict[str, Any]] = []
        self.on_open = on_open
        self.table = _table(ROW_HEADERS)
        self.table.setSortingEnabled(True)
        self.table.setMinimumHeight(160)
        self.table.cellDoubleClicked.connect(self._double_clicked)
        self.summary = _table(SUMMARY_HEADERS)
        self.summary.setMaximumHeight(150)
        background, self._text_color = colors
        self.figure, self.axes, self.canvas = plot_canvas(background, 170)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.table, self.summary, self.canvas):
            layout.addWidget(widget)
        self.summary_frame = pd.DataFrame()
        self._draw_boxes()

    # -- rows ------------------------------------------------------------------------

    def clear(self) -> None:
        self.rows = []
        self.table.setRowCount(0)
        self.refresh_summary()

    def set_rows(self, rows: list[dict[str, Any]]) -> None:
        """Show exactly ``rows`` (e.g. the results already in a run folder)."""
        self.rows = []
        self.table.setRowCount(0)
        self.add_rows(rows)

    def add_rows(self, rows: list[dict[str, Any]]) -> None:
        """Append ``rows`` to the table and recompute the summary and plot."""
        if not rows:
            return
        self.table.setSortingEnabled(False)  # else a row moves while its cells are being set
        for row in rows:
            self._append(row)
        self.table.setSortingEnabled(True)
        self.refresh_summary()

    def _append(self, row: dict[str, Any]) -> None:
        index = len(self.rows)
        self.rows.append(dict(row))
        line = self.table.rowCount()
        self.table.insertRow(line)
        case_item = _text_item(str(row.get("case_id", "")))
        case_item.setData(ROW_INDEX_ROLE, index)
        status = str(row.get("status", ""))
        status_item = _text_item(status)
        if status != "ok":
            status_item.setToolTip(str(row.get("error", "")))
        for column, item in enumerate((case_item, _text_item(target_text(row)), NumericItem(row.get("dice")),
                                       NumericItem(row.get("nsd")), status_item)):
            self.table.setItem(line, column, item)

    def row_at(self, line: int) -> dict[str, Any]:
        """The row dict shown on table line ``line`` (whatever the sort order)."""
        return self.rows[int(self.table.item(line, 0).data(ROW_INDEX_ROLE))]

    def column_values(self, header: str) -> list[str]:
        """The texts of one column, top to bottom (for scripts and tests)."""
        column = ROW_HEADERS.index(header)
        return [self.table.item(line, column).text() for line in range(self.table.rowCount())]

    def _double_clicked(self, line: int, _column: int) -> None:
        if self.on_open is not None:
            self.on_open(self.row_at(line))

    # -- summary and plot ----------------------------------------------------------

    def frame(self) -> pd.DataFrame:
        """The rows as the report package's normalised table."""
        return load_run(to_dataframe(self.rows)).table

    def refresh_summary(self) -> pd.DataFrame:
        """Recompute the per-task summary table and the box plot from :attr:`rows`."""
        if not self.rows:
            self.summary_frame = pd.DataFrame()
            self.summary.setRowCount(0)
            self._draw_boxes()
            return self.summary_frame
        table = self.frame()
        self.summary_frame = summarize_tasks(table, metrics=("dice", "nsd"))
        self.summary.setRowCount(len(self.summary_frame))
        for line, task in enumerate(self.summary_frame.itertuples(index=False)):
            iqr = f"[{fmt(task.dice_q25, 3)}, {fmt(task.dice_q75, 3)}]" if task.dice_n else "n/a"
            items = (_text_item(str(task.task)), NumericItem(task.n), NumericItem(task.dice_median), _text_item(iqr),
                     NumericItem(task.nsd_median))
            items[1].setText(str(int(task.n)) if task.n_failed == 0 else f"{int(task.n)} ({int(task.n_failed)} failed)")
            for column, item in enumerate(items):
                self.summary.setItem(line, column, item)
        self._draw_boxes(table)
        return self.summary_frame

    def _draw_boxes(self, table: pd.DataFrame | None = None) -> None:
        """DSC per task: a box and every case as a point (failed rows left out, as in the report)."""
        ax = self.axes
        ax.clear()
        style_axes(ax, self.figure.get_facecolor(), self._text_color)
        ax.set_ylabel("DSC", fontsize=8, color=self._text_color)
        ax.set_ylim(-0.05, 1.05)
        data, names = self._box_data(table)
        if data:
            positions = np.arange(1, len(data) + 1)
            ax.boxplot(data, positions=positions, widths=0.5, showfliers=False, patch_artist=True,
                       boxprops={"facecolor": "#4fc3f7", "alpha": 0.4, "edgecolor": self._text_color},
                       medianprops={"color": "orange", "linewidth": 1.5},
                       whiskerprops={"color": self._text_color}, capprops={"color": self._text_color})
            rng = np.random.default_rng(0)
            for position, values in zip(positions, data):
                ax.scatter(position + rng.uniform(-0.12, 0.12, values.size), values, s=8,
                           color=self._text_color, alpha=0.7, linewidths=0, zorder=3)
            ax.set_xticks(positions)
            ax.set_xticklabels([f"{n}\n(n={d.size})" for n, d in zip(names, data)], fontsize=7)
        else:
            ax.text(0.5, 0.5, "no scored cases yet", ha="center", va="center", transform=ax.transAxes,
                    color=self._text_color, fontsize=8)
            ax.set_xticks([])
        self.canvas.draw_idle()

    @staticmethod
    def _box_data(table: pd.DataFrame | None) -> tuple[list[np.ndarray], list[str]]:
        if table is None or table.empty:
            return [], []
        scored = table[table["status"].eq("ok") & np.isfinite(table["dice"].to_numpy(dtype=float))]
        tasks = sorted(scored["task"].astype(str).unique(), key=natural_key)
        data = [scored.loc[scored["task"].astype(str) == t, "dice"].to_numpy(dtype=float) for t in tasks]
        return data, [t.split("/")[-1] for t in tasks]


__all__ = ["NumericItem", "ResultsView", "ROW_HEADERS", "SUMMARY_HEADERS"]
