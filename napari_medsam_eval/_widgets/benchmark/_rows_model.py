"""The benchmark widget's row table as a Qt model: thousands of rows appended in one step.

A ``QTableWidget`` filled item by item costs five items per row on the GUI thread (a
2,000-row run folder: 10,000 items, then a sort through a Python ``__lt__``). Here the
rows live in a :class:`RowsModel` (one tuple of cell texts and sort keys per row, made
once when the row arrives); appending rows is one ``beginInsertRows`` / ``endInsertRows``,
whatever their number, and the view only asks for the cells on screen. The model sorts
itself (:meth:`RowsModel.sort`: Python's ``sorted`` over the keys made with the cells, text, or
the score as a float with NaN as infinity: after every number, as :class:`._bench_items.NumericItem`
sorts), keeping the selection; a ``QSortFilterProxyModel`` would instead ask the model for each
key through a Python call per comparison (a 2,000-row folder: some 40,000 calls).

:class:`~._rows_table.RowsTable` is the view (its own module); :class:`Cell` one of its cells, as a
``QTableWidgetItem`` answers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from qtpy.QtCore import QAbstractTableModel, QModelIndex, Qt
from qtpy.QtGui import QColor

from napari_medsam_eval.core.palette import ERROR_PART_COLORS

from napari_medsam_eval._widgets.benchmark._row_cells import NUMERIC, RowCells, row_cells
from napari_medsam_eval._widgets.common._words import header_tip

#: Qt item role holding the index of the row (in the model's rows) a table line shows
ROW_INDEX_ROLE = Qt.UserRole + 1
#: Qt item role of the key a column sorts by: the text, or the score (NaN as infinity)
SORT_ROLE = Qt.UserRole + 2
class RowsModel(QAbstractTableModel):
    """The rows of a run (dicts) as table lines; :meth:`append` adds any number in one insertion.

    :attr:`cells` are in the order the rows arrived (a row's index there is its index in the
    results view's rows); :attr:`order` is the order shown (line -> row index)."""

    def __init__(self, headers: tuple[str, ...]) -> None:
        super().__init__()
        self.headers = headers
        self.cells: list[RowCells] = []
        self.order: list[int] = []
        #: the column and order the lines are sorted by (None: in the order the rows arrived)
        self.sorted_by: tuple[int, Qt.SortOrder] | None = None
        #: which lines are shown (None: every row): :meth:`set_filter`
        self.keep: Callable[[RowCells], bool] | None = None
        #: how many insertions and resets the model made (tests: rows are appended, not rebuilt per row)
        self.insertions = 0
        self.resets = 0

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: N802, B008 - Qt's names
        return 0 if parent.isValid() else len(self.order)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.headers)

    def data(self, index: QModelIndex, role: int = Qt.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row = self.order[index.row()]
        cells, column = self.cells[row], index.column()
        if role == Qt.DisplayRole:
            return cells.texts[column]
        if role == Qt.ToolTipRole:
            return cells.tips[column]
        if role == SORT_ROLE:
            return cells.keys[column]
        if role == Qt.UserRole:
            return cells.numbers[column]
        if role == ROW_INDEX_ROLE:
            return row
        if role == Qt.DecorationRole and self.headers[column] == "why" and cells.why in ERROR_PART_COLORS:
            return QColor(ERROR_PART_COLORS[cells.why])  # the colour of the part in an opened row's "why" layer
        if role == Qt.TextAlignmentRole and self.headers[column] in NUMERIC:
            return int(Qt.AlignRight | Qt.AlignVCenter)
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.DisplayRole) -> Any:  # noqa: N802
        if orientation != Qt.Horizontal:
            return None
        if role == Qt.DisplayRole:
            return self.headers[section]
        if role == Qt.ToolTipRole:
            return header_tip(self.headers[section]) or self.headers[section]
        return None

    def append(self, cells: list[RowCells]) -> None:
        """Add ``cells`` (one per row) at the end, in one insertion; then into their sorted places."""
        if not cells:
            return
        first = len(self.cells)
        self.cells.extend(cells)
        shown = [first + i for i, cell in enumerate(cells) if self.keep is None or self.keep(cell)]
        if not shown:
            return
        self.beginInsertRows(QModelIndex(), len(self.order), len(self.order) + len(shown) - 1)
        self.order.extend(shown)
        self.endInsertRows()
        self.insertions += 1
        if self.sorted_by is not None:
            self.sort(*self.sorted_by)

    def set_filter(self, keep: Callable[[RowCells], bool] | None) -> None:
        """Show only the rows ``keep`` answers True for (None: every row), in the current sort order."""
        self.beginResetModel()
        self.keep = keep
        self.order = [row for row, cell in enumerate(self.cells) if keep is None or keep(cell)]
        self.endResetModel()
        self.resets += 1
        if self.sorted_by is not None:
            self.sort(*self.sorted_by)

    def clear(self) -> None:
        self.beginResetModel()
        self.cells, self.order = [], []
        self.endResetModel()
        self.resets += 1

    def sort(self, column: int, order: Qt.SortOrder = Qt.AscendingOrder) -> None:
        """Sort the lines by ``column``'s keys (stable), keeping the selection and current line."""
        self.sorted_by = (column, order)
        self.layoutAboutToBeChanged.emit()
        kept = self.persistentIndexList()
        rows = [self.order[index.row()] for index in kept]
        cells = self.cells
        self.order = sorted(self.order, key=lambda row: cells[row].keys[column],
                            reverse=order == Qt.DescendingOrder)
        line_of = {row: line for line, row in enumerate(self.order)}
        self.changePersistentIndexList(kept, [self.index(line_of[row], index.column())
                                              for row, index in zip(rows, kept)])
        self.layoutChanged.emit()


@dataclass(frozen=True)
class Cell:
    """One cell of a :class:`RowsTable` line, as a ``QTableWidgetItem`` answers (text, tooltip, data)."""

    table: Any  # the RowsTable (the view's module imports this one)
    line: int
    column: int

    @property
    def index(self) -> QModelIndex:
        return self.table.rows_model.index(self.line, self.column)

    def text(self) -> str:
        return str(self.index.data(Qt.DisplayRole))

    def toolTip(self) -> str:  # noqa: N802 - Qt's name
        return str(self.index.data(Qt.ToolTipRole))

    def data(self, role: int) -> Any:
        return self.index.data(role)

    def row(self) -> int:
        return self.line


__all__ = ["Cell", "ROW_INDEX_ROLE", "RowCells", "RowsModel", "SORT_ROLE", "row_cells"]
