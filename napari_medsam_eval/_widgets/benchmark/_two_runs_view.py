"""The "Two runs" view: per-task paired statistics, per-case DSC A / B / B-A beside their scatter, unpaired rows.

Plain Qt and matplotlib, no viewer: it shows a
:class:`~napari_medsam_eval.report.run_pairs.RunPair`. The statistics table holds the
cells ``medsam-eval compare A B`` prints (the same
:func:`~napari_medsam_eval.report.compare_report.comparison_rows`, each cell
as :func:`~napari_medsam_eval.report.markup.cell_text` writes it); the pairs
table is sorted by B - A, lowest first (click a header to sort otherwise);
rows that do not pair are listed below with the reason. ``on_open(key)``
gets a line's pair key ``(case_id, task, target_label)`` when it is
double-clicked in either table.
"""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd
from napari_medsam_eval.benchmark.schema import labels_text
from qtpy.QtCore import Qt
from qtpy.QtWidgets import QLabel, QSizePolicy, QTableWidget, QVBoxLayout, QWidget

from napari_medsam_eval.core.palette import PLOT_CATEGORIES, PLOT_LIGHT_THEME
from napari_medsam_eval.report.compare_report import comparison_rows
from napari_medsam_eval.report.markup import cell_text
from napari_medsam_eval.report.paired import COLUMNS
from napari_medsam_eval.report.run_pairs import PairKey, RunPair, pair_key
from napari_medsam_eval._widgets.benchmark._bench_items import NumericItem, distinct_names, table as _table, text_item
from napari_medsam_eval._widgets.common._beside_or_tabs import BesideOrTabs
from napari_medsam_eval._widgets.common._dock_layout import fixed_margins
from napari_medsam_eval._widgets.common._theme import plot_canvas, style_axes

#: columns of the pairs and the unpaired tables
PAIR_HEADERS = ("case", "target", "DSC A", "DSC B", "B-A")
UNPAIRED_HEADERS = ("case", "target", "DSC A", "DSC B", "why not paired")
#: Qt item role holding a line's pair key (on its first item)
KEY_ROLE = Qt.UserRole + 1
#: one colour per task in the scatter
POINT_COLORS = PLOT_CATEGORIES


def _target(row: Any) -> str:
    label = labels_text(row)  # n/a: a case that failed before its labels were known; 1,2,3: a region
    return f"{row.label_name} ({label})" if row.label_name else label


#: the most pixels the per-task statistics take (more tasks scroll)
STATS_MAX_HEIGHT = 150
#: the scatter's least width, pixels (beside the pairs table)
SCATTER_SIDE = 160
#: the least height of the pairs table and of the scatter, pixels (about four lines of the table)
PAIRS_MIN_HEIGHT = 120
#: the least width, pixels, for the pairs table (five columns) and the scatter side by side
PAIRS_BESIDE_WIDTH = 540


class TwoRunsView(QWidget):
    """What a :class:`RunPair` holds, in tables and a scatter; :meth:`show_pair` fills them."""

    def __init__(self, on_open: Callable[[PairKey], Any] | None = None,
                 colors: tuple[str, str] = PLOT_LIGHT_THEME) -> None:
        super().__init__()
        self.on_open = on_open
        self.pair: RunPair | None = None
        self.runs = QLabel("")
        self.runs.setWordWrap(True)
        # long lines wrap, never widen; the height its width needs (a minimum height of its text at its least width
        # made the tab scroll: 500 pixels)
        self.runs.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.runs.setMinimumWidth(40)
        self.stats: QTableWidget = _table(tuple(comparison_rows(pd.DataFrame(columns=COLUMNS))[0]))
        self.stats.setMinimumHeight(60)
        self.stats.setMaximumHeight(STATS_MAX_HEIGHT)
        self.stats.setToolTip("per task, B - A over the cases scored in both runs, as 'medsam-eval compare A B' "
                              "prints it: median difference with its bootstrap 95% CI (10000 resamples, seed 0), "
                              "Wilcoxon signed-rank p (n/a below 6 non-zero differences); (all) pools every task")
        self.table = _table(PAIR_HEADERS, preferred_height=PAIRS_MIN_HEIGHT)
        self.table.setSortingEnabled(True)
        self.table.setMinimumHeight(PAIRS_MIN_HEIGHT)
        self.table.setToolTip("DSC of each case and target in run A and run B, sorted by B - A (lowest first); "
                              "double-click a line to open the case with both predictions and the A/B overlay")
        self.unpaired_label = QLabel("rows that do not pair: none")
        self.unpaired = _table(UNPAIRED_HEADERS)
        self.unpaired.setMaximumHeight(130)
        self.unpaired.setToolTip("rows missing from one run, or failed / unscored in one: not in the statistics; "
                                 "double-click to open what there is")
        for widget in (self.table, self.unpaired):
            widget.cellDoubleClicked.connect(lambda line, _col, w=widget: self._double_clicked(w, line))
        self._background, self._text_color = colors
        self.figure, self.axes, self.canvas = plot_canvas(self._background, PAIRS_MIN_HEIGHT)
        # no height of its own to ask for (matplotlib's canvas asks for the size it has: it would keep the tab taller
        # than a 768-pixel screen allows); it takes the height beside or under the table
        self.canvas.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Ignored)
        self.canvas.setMinimumWidth(SCATTER_SIDE)
        self.canvas.setMaximumWidth(SCATTER_SIDE + 60)
        fixed_margins(self.figure, left=0.26, bottom=0.24)
        self.canvas.setToolTip("DSC in run B against run A, a dot per case and target (colour: task); above the "
                               "diagonal B did better")
        # the pairs beside their scatter in a wide dock, on two tabs in a narrow one: stacked, they did not fit
        # a 768-pixel screen under the statistics
        self.pairs = BesideOrTabs((("pairs", self.table), ("scatter", self.canvas)), PAIRS_BESIDE_WIDTH)
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Expanding)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.runs, self.stats):
            layout.addWidget(widget)
        layout.addWidget(self.pairs, 1)
        for widget in (self.unpaired_label, self.unpaired):
            layout.addWidget(widget)
        self.unpaired.setVisible(False)
        self._draw(None)

    def show_pair(self, pair: RunPair) -> None:
        """Fill the tables and the scatter from ``pair``."""
        self.pair = pair
        a, b = pair.describe
        notes = "".join(f"\nnote: {n}" for n in pair.notes)
        changes = [f"why it failed, {r['task']} ({r['n']} pairs): {r['sentence']}"
                   for _, r in pair.part_changes.iterrows()]
        # the pooled line ((all), the last) in view, every task's on hover: the tables and the scatter stay in view
        why = f"\n{changes[-1]} (each task's: hover)" if len(changes) > 1 else "".join(f"\n{c}" for c in changes)
        # the run folders are the fields above: here how each run was made (the folders on hover)
        self.runs.setText(f"A: {a}\nB: {b}{notes}{why}")
        self.runs.setToolTip("\n".join([f"A = {pair.run_a.path}", f"B = {pair.run_b.path}", *changes]))
        header, rows = comparison_rows(pair.comparison)
        self.stats.setRowCount(len(rows))
        tasks = [cell_text(values[0]) for values in rows]
        named = [task for task in tasks if "/" in task]  # ((all) pools them)
        shown = dict(zip(named, distinct_names(named)))  # the part that tells the tasks apart
        for line, values in enumerate(rows):
            for column, value in enumerate(values):
                item = text_item(shown.get(tasks[line], tasks[line]) if column == 0 else cell_text(value))
                if column == 0:
                    item.setToolTip(tasks[line])  # the whole name on hover
                self.stats.setItem(line, column, item)
        lines = sum(self.stats.rowHeight(line) for line in range(len(rows)))  # no empty space below the lines
        self.stats.setFixedHeight(min(STATS_MAX_HEIGHT, self.stats.horizontalHeader().sizeHint().height() + lines
                                      + 2 * self.stats.frameWidth() + 2))
        self._fill(self.table, pair.pairs, ("a", "b", "diff"))
        self._fill(self.unpaired, pair.unpaired, ("a", "b", "reason"))
        count = len(pair.unpaired)
        self.unpaired_label.setText(f"rows that do not pair: {count or 'none'}")
        self.unpaired.setVisible(bool(count))
        self._draw(pair)

    def _fill(self, table: QTableWidget, frame: Any, columns: tuple[str, ...]) -> None:
        table.setSortingEnabled(False)
        table.setRowCount(len(frame))
        for line, row in enumerate(frame.itertuples()):
            first = text_item(str(row.case_id))
            first.setData(KEY_ROLE, pair_key(row.case_id, row.task, row.target_label))
            table.setItem(line, 0, first)
            table.setItem(line, 1, text_item(_target(row)))
            for column, name in enumerate(columns, start=2):
                value = getattr(row, name)
                table.setItem(line, column, text_item(value) if isinstance(value, str) else NumericItem(value))
        if table is self.table:  # sorted by B - A, lowest first (the header shows it; a click sorts otherwise)
            table.setSortingEnabled(True)
            table.sortItems(PAIR_HEADERS.index("B-A"), Qt.AscendingOrder)

    def key_at(self, table: QTableWidget, line: int) -> PairKey:
        return pair_key(*table.item(line, 0).data(KEY_ROLE))

    def column_values(self, table: QTableWidget, column: str | int) -> list[str]:
        index = column if isinstance(column, int) else [table.horizontalHeaderItem(i).text()
                                                        for i in range(table.columnCount())].index(column)
        return [table.item(line, index).text() for line in range(table.rowCount())]

    def _double_clicked(self, table: QTableWidget, line: int) -> None:
        if self.on_open is not None and table.item(line, 0) is not None:
            self.on_open(self.key_at(table, line))

    def _draw(self, pair: RunPair | None) -> None:
        ax = self.axes
        ax.clear()
        style_axes(ax, self._background, self._text_color)
        ax.plot([0, 1], [0, 1], color=self._text_color, linewidth=0.8, linestyle=":")
        if pair is not None and not pair.pairs.empty:
            for index, (task, part) in enumerate(pair.pairs.groupby("task", sort=True)):
                ax.scatter(part["a"], part["b"], s=14, color=POINT_COLORS[index % len(POINT_COLORS)],
                           label=str(task).split("/")[-1])
            ax.legend(fontsize=6, loc="upper left", frameon=False, labelcolor=self._text_color)
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("DSC run A", fontsize=8)
        ax.set_ylabel("DSC run B", fontsize=8)
        self.canvas.draw_idle()


__all__ = ["KEY_ROLE", "PAIR_HEADERS", "TwoRunsView", "UNPAIRED_HEADERS"]
