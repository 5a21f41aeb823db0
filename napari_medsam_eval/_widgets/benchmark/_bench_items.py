"""Items of the benchmark widget's tables: scores as text that sort by value, a target's name.

Plain Qt, no viewer: :class:`NumericItem` shows a score to four decimals
(``n/a`` for NaN) and sorts by the number behind it, NaN last. Every cell has its whole text as its
tooltip (a column too narrow elides it: ``hippoc...us_007``), and every column header says what the
column holds, in plain words (:func:`._words.header_tip`).
"""
from __future__ import annotations

import math
from typing import Any

from napari_medsam_eval.benchmark.schema import labels_text
from qtpy.QtCore import QSize, Qt
from qtpy.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from napari_medsam_eval._widgets.common._words import header_tip


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
        self.setToolTip(self.text())
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        self.setData(Qt.UserRole, number)
        self.setTextAlignment(int(Qt.AlignRight | Qt.AlignVCenter))

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        """Show ``text`` (its tooltip too); the number it sorts by stays."""
        super().setText(text)
        self.setToolTip(text)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        a, b = self.data(Qt.UserRole), other.data(Qt.UserRole)
        if not isinstance(a, float) or not isinstance(b, float):
            return super().__lt__(other)
        if math.isnan(a) or math.isnan(b):
            return not math.isnan(a) and math.isnan(b)
        return a < b


class _Table(QTableWidget):
    """A QTableWidget whose preferred height is ``preferred_height`` when given (Qt's is 192 pixels)."""

    def __init__(self, rows: int, columns: int, preferred_height: int | None) -> None:
        super().__init__(rows, columns)
        self.preferred_height = preferred_height

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = super().sizeHint()
        return hint if self.preferred_height is None else QSize(hint.width(), self.preferred_height)


def table(headers: tuple[str, ...], stretch: int | None = 0, preferred_height: int | None = None) -> QTableWidget:
    """A read-only row table; column ``stretch`` (the case names) takes the width the others leave and
    elides its text, so every column shows at the dock's width without scrolling sideways (its full text
    is in the tooltip of the cell). ``stretch=None``: columns sized to their contents. ``preferred_height``:
    the height it asks for in a scroll area that fits its page to its texts' heights (Qt's 192 pixels, else)."""
    table = _Table(0, len(headers), preferred_height)
    table.setHorizontalHeaderLabels(list(headers))
    for column, header in enumerate(headers):
        table.horizontalHeaderItem(column).setToolTip(header_tip(header) or header)
    table.setEditTriggers(QAbstractItemView.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectRows)
    table.verticalHeader().setVisible(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeToContents)
    if stretch is None:
        header.setStretchLastSection(True)
    else:
        header.setSectionResizeMode(stretch, QHeaderView.Stretch)
        header.setMinimumSectionSize(24)
        table.setTextElideMode(Qt.ElideMiddle)
        table.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
    return table


def text_item(text: str) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setToolTip(text)
    return item


def target_text(row: dict[str, Any]) -> str:
    """``anterior (1)``: the target's name and label value(s) (``whole_tumor (1,2,3)`` for a region)."""
    name = str(row.get("label_name") or "")
    labels = labels_text(row)
    if labels == "n/a":
        return name or "unknown"
    return f"{name} ({labels})"


def distinct_names(tasks: list[str]) -> list[str]:
    """Each task name without the leading ``dataset/`` parts every task shares: the part that tells them apart
    (``hippocampus_mri/anterior``, ``hippocampus_mri/posterior`` -> ``anterior``, ``posterior``; an elided
    ``hippocampus_mri/...`` read the same for both); a lone task keeps its last part."""
    parts = [str(task).split("/") for task in tasks]
    shared = 0
    while parts and all(len(p) > shared + 1 for p in parts) and len({p[shared] for p in parts}) == 1:
        shared += 1
    return ["/".join(p[shared:]) for p in parts]


__all__ = ["NumericItem", "distinct_names", "fmt", "table", "target_text", "text_item"]
