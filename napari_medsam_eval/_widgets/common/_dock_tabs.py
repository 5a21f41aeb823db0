"""Docks whose results come first: tabs over a fixed footer, and a fair share of the dock column's height.

:func:`tabbed_dock` lays a dock out as tabs over its footer (the main actions, the
progress and the status line, always in view): the result first (the Compare dock's
DSC lines and per-slice plot, the Benchmark dock's rows), the settings and the longer
sections on tabs of their own, each tab a scroll area given the dock's whole height.

Qt gives a dock added below another its least height, the first dock keeping the
rest: a Compare dock docked under the Segment dock would show only its tab bar and
footer. So a tabbed dock states the height its results need (:data:`DOCK_HEIGHT`, or
its own), and when it is first shown the docks of its column share the column's
height (:func:`share_column`): each tabbed dock gets what it states (all of them
scaled down together when the column is too short, the others kept at their least
heights), the other docks share the rest as they had it. Two docks share a 1366 x 768 window this way, three a 1600 x 1000 one.
The column is shared again whenever the main window changes height (:class:`_ShareOnResize`): a window
made smaller (1600 x 1000 to 1366 x 768) took the height from the lower dock and left the Compare plot
scrolled out of view.
"""
from __future__ import annotations

from typing import Sequence

from magicgui.widgets import Container
from qtpy.QtCore import QEvent, QObject, Qt, QTimer
from qtpy.QtWidgets import QApplication, QDockWidget, QMainWindow, QSizePolicy, QTabWidget, QVBoxLayout, QWidget

from napari_medsam_eval._widgets.common._dock_layout import MIN_DOCK_HEIGHT, add_footer, scroll_area
from napari_medsam_eval._widgets.common._status_text import scroll_footer_text

#: the height a tabbed dock states by default, its title bar, tabs and footer included
DOCK_HEIGHT = 360
#: the Qt property of a dock's widget holding the height it states
STATED_HEIGHT = "medsamEvalDockHeight"
#: how far apart two docks' left edges may be and still be one column, in pixels
_SAME_COLUMN_PX = 4


def tabbed_dock(container: Container, pages: Sequence[tuple[str, Sequence[QWidget]]], footer: Container,
                min_height: int = MIN_DOCK_HEIGHT, height: int = DOCK_HEIGHT) -> QTabWidget:
    """Show ``pages`` (a title and the Qt widgets of each page, top to bottom) as the tabs of ``container``,
    the first tab current, over ``footer`` (a section with the main actions and the status line, always
    in view; a wrapping status line scrolls within a few lines); returns the tabs. Docked, the dock
    states ``height`` pixels for its column's sharing (:func:`share_column`).

    Each page scrolls when the dock is too short for it; a widget that expands vertically (a plot, a
    table) takes the page's spare height, else the page's widgets sit at its top. Call it last in the
    widget's ``__init__``, with nothing put in the container's layout.
    """
    outer = container.native.layout()
    bottom = QWidget()
    below = QVBoxLayout(bottom)
    below.setContentsMargins(outer.contentsMargins())
    below.addWidget(footer.native)
    scroll_footer_text(list(footer))
    tabs = QTabWidget()
    tabs.setDocumentMode(True)
    tabs.setUsesScrollButtons(True)  # a narrow dock scrolls its tab bar instead of widening
    for title, widgets in pages:
        tabs.addTab(scroll_area(_page(widgets, outer.spacing()), min_height), title)
    outer.setContentsMargins(0, 0, 0, 0)
    outer.addWidget(tabs)
    add_footer(container, bottom)
    container.native.setProperty(STATED_HEIGHT, height)
    container.native.installEventFilter(_ShareOnShow(container.native))
    return tabs


def _page(widgets: Sequence[QWidget], spacing: int) -> QWidget:
    body = QWidget()
    inner = QVBoxLayout(body)
    inner.setContentsMargins(4, 4, 4, 4)
    inner.setSpacing(spacing)
    grows = False
    for widget in widgets:
        expanding = widget.sizePolicy().verticalPolicy() in (QSizePolicy.Expanding, QSizePolicy.MinimumExpanding)
        grows = grows or expanding
        inner.addWidget(widget, 1 if expanding else 0)
    if not grows:
        inner.addStretch(1)
    return body


def _dock_of(widget: QWidget) -> QDockWidget | None:
    while widget is not None and not isinstance(widget, QDockWidget):
        widget = widget.parentWidget()
    return widget


def bring_forward(widget: QWidget) -> None:
    """The dock holding ``widget`` in front of the docks it shares a place with as tabs (the dock in use)."""
    dock = _dock_of(widget)
    if dock is not None and not dock.visibleRegion().boundingRect().height():
        dock.raise_()


def stated_height(dock: QDockWidget) -> int | None:
    """The height ``dock``'s widget states (:func:`tabbed_dock`), None for any other dock."""
    value = dock.widget().property(STATED_HEIGHT) if dock.widget() is not None else None
    return int(value) if value else None


def column_heights(heights: Sequence[int], stated: Sequence[int | None], least: Sequence[int]) -> list[int]:
    """The docks' new heights in a column of ``sum(heights)`` pixels: each stated height given (all scaled
    down together when the column is short, the other docks kept at their ``least`` heights), the other
    docks sharing the rest in proportion to their ``heights``. Pure arithmetic."""
    total = sum(heights)
    others = [i for i, s in enumerate(stated) if s is None]
    claimed = sum(s for s in stated if s is not None)
    if not claimed:
        return list(heights)
    room = total - sum(least[i] for i in others)
    scale = min(1.0, max(room, 0) / claimed)
    given = {i: int(s * scale) for i, s in enumerate(stated) if s is not None}
    rest = total - sum(given.values())
    share = sum(heights[i] for i in others) or 1
    return [given[i] if i in given else int(rest * heights[i] / share) for i in range(len(heights))]


def share_column(dock: QDockWidget) -> None:
    """Resize the docks stacked with ``dock`` in its main window's column by :func:`column_heights`."""
    window = dock.parentWidget()
    if not isinstance(window, QMainWindow) or dock.isFloating():
        return
    area = window.dockWidgetArea(dock)
    column = sorted((d for d in window.findChildren(QDockWidget)
                     if d.isVisible() and not d.isFloating() and window.dockWidgetArea(d) == area
                     and abs(d.x() - dock.x()) <= _SAME_COLUMN_PX), key=lambda d: d.y())
    if len(column) < 2:
        return
    stated = [stated_height(d) for d in column]
    least = [d.minimumSizeHint().height() for d in column]
    if gives_way(sum(d.height() for d in column), stated, least):
        return tab_together(window, column, dock)
    window.resizeDocks(column, column_heights([d.height() for d in column], stated, least), Qt.Vertical)


def gives_way(total: int, stated: Sequence[int | None], least: Sequence[int]) -> bool:
    """Whether a column of ``total`` pixels is too short to give each tabbed dock the height it states (the
    others at their ``least``): then the docks give way to each other as tabs (a 1366 x 768 window with three docks
    showed one row of the Benchmark dock and Compare's plot cut, 86 pixels tall)."""
    claimed = sum(s for s in stated if s is not None)
    return claimed > 0 and total - sum(h for h, s in zip(least, stated) if s is None) < claimed


def tab_together(window: QMainWindow, column: Sequence[QDockWidget], in_use: QDockWidget) -> None:
    """Make ``column``'s docks tabs of one place (napari's own docking: Qt's tabified docks), ``in_use`` in front
    with the column's whole height; the others are a click away on their tabs."""
    first = column[0]
    for dock in column[1:]:
        if dock not in window.tabifiedDockWidgets(first):
            window.tabifyDockWidget(first, dock)
    in_use.raise_()


class _ShareOnShow(QObject):
    """Event filter on a tabbed dock's widget: shown docked for the first time, its column is shared."""

    def __init__(self, widget: QWidget) -> None:
        super().__init__(widget)
        self.widget, self.done = widget, False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.Show and not self.done:
            self.done = True
            QTimer.singleShot(0, self.share)  # once the window has laid out its docks
        return False

    def share(self) -> None:
        dock = _dock_of(self.widget)
        if dock is not None:
            share_column(dock)
            window = dock.parentWidget()
            if isinstance(window, QMainWindow) and not window.property(_RESIZE_FILTER):
                window.setProperty(_RESIZE_FILTER, True)
                window.installEventFilter(_ShareOnResize(window))


#: the main window's property saying it has a :class:`_ShareOnResize` filter
_RESIZE_FILTER = "medsamEvalShareOnResize"
#: quiet milliseconds after the window's last resize before the columns are shared again
_RESIZE_SETTLE_MS = 120


class _ShareOnResize(QObject):
    """Event filter on the main window: once it stopped changing height, every column holding a tabbed dock
    is shared again (:func:`share_column`), as when the dock was first shown."""

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.window, self.height = window, window.height()
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(_RESIZE_SETTLE_MS)
        self.timer.timeout.connect(self.share)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.Resize and watched is self.window and self.window.height() != self.height:
            self.height = self.window.height()
            self.timer.start()
        return False

    def share(self) -> None:
        done: set[int] = set()
        focus = _dock_of(QApplication.focusWidget())  # the dock in use comes first: in front, should they give way
        docks = self.window.findChildren(QDockWidget)
        for dock in sorted(docks, key=lambda d: d is not focus):
            if stated_height(dock) and dock.isVisible() and not dock.isFloating() and id(dock) not in done:
                done.add(id(dock))
                share_column(dock)


__all__ = ["DOCK_HEIGHT", "STATED_HEIGHT", "bring_forward", "column_heights", "gives_way", "share_column", "stated_height", "tab_together",
           "tabbed_dock"]
