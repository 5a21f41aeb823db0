"""The benchmark widget's row table as a view: a sortable, read-only ``QTableView`` over a :class:`~._rows_model.RowsModel`.

It keeps the few ``QTableWidget`` calls the widget, its scripts and tests use (``rowCount``,
``item(line, column)``, ``sortItems``, ``scrollToItem``, ``visualItemRect``, ``setCurrentCell``,
``cellDoubleClicked``, ``itemSelectionChanged``), and shares the width so that the case column stays
readable in a narrow dock (:meth:`RowsTable._fit_columns`).
"""
from __future__ import annotations

from typing import Any

from qtpy.QtCore import Qt, Signal
from qtpy.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from napari_medsam_eval._widgets.benchmark._rows_model import Cell, RowsModel

#: the least width of the case column, in characters (the middle of a longer name is elided, whole on hover)
CASE_CHARACTERS = 14
#: columns shown whole whatever the width (a why cut to "mi..." said nothing); the case column gives way first
WHOLE = ("why",)


class RowsTable(QTableView):
    """A sortable read-only table over a :class:`RowsModel` (which sorts itself); the case column takes the
    width the others leave, at least :data:`CASE_CHARACTERS` characters (the other columns give up width
    to it, down to their headers'), and elides the middle of its text (the whole text in the tooltip)."""

    #: a line was double-clicked: (line, column), as ``QTableWidget.cellDoubleClicked``
    cellDoubleClicked = Signal(int, int)  # noqa: N815 - Qt's name
    #: the selection changed, as ``QTableWidget.itemSelectionChanged``
    itemSelectionChanged = Signal()  # noqa: N815

    def __init__(self, headers: tuple[str, ...], stretch: int = 0) -> None:
        super().__init__()
        self.rows_model = RowsModel(headers)
        self.setModel(self.rows_model)
        self.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.verticalHeader().setVisible(False)
        self._stretch = stretch
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.Interactive)  # sized by _fit_columns
        header.setMinimumSectionSize(24)
        # columns sized to the lines in view, not to every row (Qt's default reads 1,000 rows per column at each
        # change: a Python call per cell and role)
        header.setResizeContentsPrecision(0)
        self.setTextElideMode(Qt.ElideMiddle)
        for signal in (self.rows_model.rowsInserted, self.rows_model.modelReset, self.rows_model.layoutChanged):
            signal.connect(lambda *_: self._fit_columns())
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.doubleClicked.connect(lambda index: self.cellDoubleClicked.emit(index.row(), index.column()))
        self.selectionModel().selectionChanged.connect(lambda *_: self.itemSelectionChanged.emit())

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit_columns()

    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self._fit_columns()

    def _fit_columns(self) -> None:
        """Each column its content's width, the case column the rest but at least :data:`CASE_CHARACTERS`:
        when the others' contents leave less, they give up width in turn, each down to its header's. Not while
        hidden (another tab in front): Qt then measures every row, not the lines in view (2,000 rows: 0.5 s)."""
        header, columns = self.horizontalHeader(), self.rows_model.columnCount()
        if columns == 0 or not self.isVisible():
            return
        metrics = self.fontMetrics()
        pad = 2 * metrics.horizontalAdvance("M")
        title = [metrics.horizontalAdvance(str(h)) + pad for h in self.rows_model.headers]
        wanted = [max(title[c], self.sizeHintForColumn(c)) for c in range(columns)]
        room = max(self.viewport().width(), 1)
        least_case = metrics.horizontalAdvance("M" * CASE_CHARACTERS)
        others = [c for c in range(columns) if c != self._stretch]
        over = sum(wanted[c] for c in others) + least_case - room
        giving = [c for c in others if self.rows_model.headers[c] not in WHOLE]
        for column in sorted(giving, key=lambda c: wanted[c] - title[c], reverse=True):
            if over <= 0:
                break
            give = min(over, wanted[column] - title[column])
            wanted[column] -= give
            over -= give
        for column in others:
            header.resizeSection(column, wanted[column])
        header.resizeSection(self._stretch, max(least_case if over <= 0 else 24, room - sum(wanted[c] for c in others)))

    # -- as QTableWidget answers --------------------------------------------------------

    def rowCount(self) -> int:  # noqa: N802 - Qt's name
        return self.rows_model.rowCount()

    def columnCount(self) -> int:  # noqa: N802
        return self.rows_model.columnCount()

    def item(self, line: int, column: int) -> Cell | None:
        if not (0 <= line < self.rowCount() and 0 <= column < self.columnCount()):
            return None
        return Cell(self, line, column)

    def row_index(self, line: int) -> int:
        """The index in the model's rows of table line ``line`` (whatever the sort order)."""
        return self.rows_model.order[line]

    def sortItems(self, column: int, order: Qt.SortOrder = Qt.AscendingOrder) -> None:  # noqa: N802
        self.sortByColumn(column, order)

    def scrollToItem(self, cell: Cell) -> None:  # noqa: N802
        self.scrollTo(cell.index)

    def visualItemRect(self, cell: Cell) -> Any:  # noqa: N802
        return self.visualRect(cell.index)

    def setCurrentCell(self, line: int, column: int, flags: Any = None) -> None:  # noqa: N802
        index = self.rows_model.index(line, column)
        if flags is None:
            self.setCurrentIndex(index)
        else:
            self.selectionModel().setCurrentIndex(index, flags)


__all__ = ["CASE_CHARACTERS", "RowsTable", "WHOLE"]
