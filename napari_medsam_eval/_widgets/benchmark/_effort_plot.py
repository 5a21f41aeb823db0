"""The Benchmark widget's effort plot: DSC vs interactions of one task of a ``corrections`` run.

Plain Qt and matplotlib, no viewer. It reads the rows the results view shows
(their ``dice_after`` curves, :mod:`napari_medsam_eval.evaluation.interaction_effort`) and draws the
median DSC after 0..K interactions with its IQR band and the mean (dashed), as
the report's ``dsc_vs_interactions.png`` does for every task. The task is the
one of the line last selected in the row table or in the per-task summary,
else the first task. A run without curves hides the plot.

Work on the GUI thread stays small: the curves are parsed once per change of
rows (a JSON list per row, cheaper than the summary the results view already
recomputes), a selection only redraws the cached summary, and the canvas is
redrawn with ``draw_idle``.
"""
from __future__ import annotations

from typing import Any

import pandas as pd
from qtpy.QtWidgets import QTableWidget, QVBoxLayout, QWidget

from napari_medsam_eval.core.palette import PLOT_LIGHT_THEME, PLOT_SERIES, PLOT_SUMMARY
from napari_medsam_eval.evaluation.interaction_effort import correction_tools, curve_summary, curves_by_task, has_curves
from napari_medsam_eval.report.stats import natural_key
from napari_medsam_eval._widgets.common._dock_layout import fixed_margins
from napari_medsam_eval._widgets.benchmark._results_table import ResultsView
from napari_medsam_eval._widgets.common._theme import plot_canvas, style_axes

LINE_COLOR = PLOT_SERIES
MEAN_COLOR = PLOT_SUMMARY


def effort_summaries(rows: list[dict[str, Any]]) -> dict[str, pd.DataFrame]:
    """Per task, :func:`~napari_medsam_eval.evaluation.interaction_effort.curve_summary` of its ok rows' DSC curves ({} without curves)."""
    frame = _frame(rows)
    if not has_curves(frame):  # a run of another protocol: no curve to parse
        return {}
    return {task: curve_summary(curves) for task, curves in curves_by_task(frame).items()}


def effort_of(rows: list[dict[str, Any]]) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """What :class:`EffortPlot` shows of ``rows``: :func:`effort_summaries` and, where there are curves, each
    task's corrections (:func:`~napari_medsam_eval.evaluation.interaction_effort.correction_tools`); no Qt, any
    thread (a run folder's rows are read and summarized in a worker)."""
    summaries = effort_summaries(rows)
    return summaries, (correction_tools(_frame(rows)) if summaries else {})  # "28 paint, 2 absent" per task


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame({"task": [str(r.get("task")) for r in rows], "status": [r.get("status") for r in rows],
                         "dice_after": [r.get("dice_after") for r in rows], "prompt": [r.get("prompt") for r in rows]})


def _selected_line(table: QTableWidget) -> int | None:
    """The first selected line of ``table`` (None when nothing is selected)."""
    lines = table.selectionModel().selectedRows()
    return lines[0].row() if lines else None


class EffortPlot(QWidget):
    """Median DSC (IQR band, dashed mean) after 0..K interactions of one task; hidden when no row has curves."""

    def __init__(self, colors: tuple[str, str] = PLOT_LIGHT_THEME) -> None:
        super().__init__()
        #: task -> its curve summary (interactions, n, mean, median, q25, q75)
        self.summaries: dict[str, pd.DataFrame] = {}
        #: task -> the corrections its rows were given (effort.correction_tools), shown in the title
        self.tools: dict[str, str] = {}
        #: the task shown (None: nothing shown)
        self.task: str | None = None
        #: the artists of the curve shown, for scripts and tests
        self.median_line: Any = None
        self.mean_line: Any = None
        self.band: Any = None
        background, self._text_color = colors
        self.figure, self.axes, self.canvas = plot_canvas(background, 170)
        fixed_margins(self.figure, bottom=0.2, top=0.88)
        self.canvas.setToolTip("DSC after 0, 1, ... interactions of the simulated user (corrections runs): median "
                               "with its interquartile band, mean dashed; select a line of the table or summary "
                               "to see its task")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas)
        self.setVisible(False)

    def follow(self, view: ResultsView) -> None:
        """Show the task of the line selected in ``view``'s row table or per-task summary."""
        def row_task() -> None:
            line = _selected_line(view.table)
            if line is not None:
                self.show_task(str(view.row_at(line).get("task")))

        def summary_task() -> None:
            line = _selected_line(view.summary)
            item = None if line is None else view.summary.item(line, 0)
            if item is not None:
                self.show_task(item.text())

        view.table.itemSelectionChanged.connect(row_task)
        view.summary.itemSelectionChanged.connect(summary_task)

    def set_rows(self, rows: list[dict[str, Any]]) -> None:
        """Recompute the curves from ``rows`` (all the rows shown); keep the task shown when it still has one."""
        self.show_effort(*effort_of(rows))

    def show_effort(self, summaries: dict[str, pd.DataFrame], tools: dict[str, str]) -> None:
        """Show curves computed already (:func:`effort_of`); keep the task shown when it still has one."""
        self.summaries, self.tools = summaries, tools
        self.setVisible(bool(self.summaries))
        self.show_task(self.task)

    def show_task(self, task: str | None) -> None:
        """Draw ``task``'s curve; the first task when it has none (a task of another protocol's rows)."""
        if not self.summaries:
            self.task = self.median_line = self.mean_line = self.band = None
            return
        self.task = task if task in self.summaries else min(self.summaries, key=natural_key)
        self._draw(self.summaries[self.task])

    def _draw(self, summary: pd.DataFrame) -> None:
        ax = self.axes
        ax.clear()
        style_axes(ax, self.figure.get_facecolor(), self._text_color)
        x = summary["interactions"].to_numpy()
        self.band = ax.fill_between(x, summary["q25"], summary["q75"], color=LINE_COLOR, alpha=0.3, linewidth=0)
        (self.median_line,) = ax.plot(x, summary["median"], "o-", markersize=3, linewidth=1.5, color=LINE_COLOR,
                                      label="median (band: IQR)")
        (self.mean_line,) = ax.plot(x, summary["mean"], "--", linewidth=1, color=MEAN_COLOR, label="mean")
        ax.set_ylim(-0.05, 1.05)
        ax.set_xticks(x)
        ax.set_xlabel("interactions", fontsize=8)
        ax.set_ylabel("DSC", fontsize=8)
        n = int(summary["n"].max()) if len(summary) else 0
        tools = self.tools.get(self.task)
        ax.set_title(f"{self.task} (n={n}{'; ' + tools if tools else ''}): DSC vs interactions", fontsize=8,
                     color=self._text_color)
        ax.legend(loc="lower right", fontsize=6)
        self.canvas.draw_idle()


__all__ = ["EffortPlot", "effort_of", "effort_summaries"]
