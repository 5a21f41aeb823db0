"""Two views side by side when the dock is wide enough, else on two tabs of their own.

A table and its plot stacked one above the other do not fit a dock on a 768-pixel screen under the
statistics above them, and side by side they do not fit a narrow dock (the table's columns would
scroll out of view). :class:`BesideOrTabs` puts them beside each other while its width allows
(``min_beside`` pixels), else on two tabs, the first current; a width crossing the threshold moves
them (a few pixels of hysteresis, so that a width at the threshold does not flip back and forth).
"""
from __future__ import annotations

from typing import Sequence

from qtpy.QtCore import QSize
from qtpy.QtWidgets import QHBoxLayout, QSizePolicy, QStackedLayout, QTabWidget, QWidget

#: pixels of width between going to tabs and coming back beside
HYSTERESIS = 24


class BesideOrTabs(QWidget):
    """``pages`` (a title and a widget each) beside each other (the first stretching) from ``min_beside``
    pixels of width, else on tabs; :attr:`beside` says which."""

    def __init__(self, pages: Sequence[tuple[str, QWidget]], min_beside: int) -> None:
        super().__init__()
        self.pages, self.min_beside = list(pages), min_beside
        self.row = QWidget()
        self._row_layout = QHBoxLayout(self.row)
        self._row_layout.setContentsMargins(0, 0, 0, 0)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self._stack = QStackedLayout(self)
        self._stack.addWidget(self.row)
        self._stack.addWidget(self.tabs)
        self.beside: bool | None = None
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Expanding)
        self._place(True)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        """Its least height: a scroll area that fits its page to the heights its texts need adds the preferred
        heights up (a matplotlib canvas prefers the size it has), and the spare height comes to it anyway."""
        return QSize(super().sizeHint().width(), self.minimumSizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        width = event.size().width()
        if self.beside and width < self.min_beside:
            self._place(False)
        elif not self.beside and width >= self.min_beside + HYSTERESIS:
            self._place(True)
        super().resizeEvent(event)

    def _place(self, beside: bool) -> None:
        if beside == self.beside:
            return
        for index, (title, widget) in enumerate(self.pages):
            if beside:
                self.tabs.removeTab(self.tabs.indexOf(widget))
                self._row_layout.addWidget(widget, 1 if index == 0 else 0)
            else:
                self._row_layout.removeWidget(widget)
                self.tabs.addTab(widget, title)
            widget.show()
        self._stack.setCurrentWidget(self.row if beside else self.tabs)
        self.beside = beside


__all__ = ["BesideOrTabs", "HYSTERESIS"]
