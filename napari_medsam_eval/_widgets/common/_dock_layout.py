"""Fitting the dock widgets into a 1600 x 1000 window: scrolling, a fixed footer, wrapping, plot margins.

napari docks a magicgui container's ``native`` widget as it is, with no
scroll area, so tall docks stacked on one side make the main window taller
than the screen. :func:`fit_in_dock` moves a container's contents into a
vertical scroll area, but for its *footer*: the main actions (buttons in
rows, :func:`button_row`), the progress bar and the status line stay below
the scroll area, in view whatever the dock's height, so three docks stacked
at 1600 x 1000 each show what a user clicks and what a job is doing.
Status lines (wrapping, scrolling in the footer) are in :mod:`._status_text`.
:func:`fixed_margins` gives an embedded plot fixed
margins instead of a tight layout, whose measuring of every text made each
redraw of the small plots cost tens of milliseconds on the GUI thread.

The tabbed docks (results first, over the same kind of footer) are in :mod:`._dock_tabs`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from magicgui.widgets import Container, Widget
from qtpy.QtCore import QEvent, QObject, Qt
from qtpy.QtWidgets import QFrame, QLayout, QLayoutItem, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from napari_medsam_eval._widgets.common._status_text import scroll_footer_text

if TYPE_CHECKING:  # matplotlib is imported by the docks that plot, not by every dock
    from matplotlib.figure import Figure

#: the least height of a docked widget's scroll area, in pixels (its footer comes on top)
MIN_DOCK_HEIGHT = 30


def button_row(*buttons: Widget) -> Container:
    """``buttons`` side by side, sharing the dock's width (a footer row)."""
    row = Container(widgets=list(buttons), layout="horizontal", labels=False)
    row.margins = (0, 0, 0, 0)
    return row


def one_label_column(*sections: Container) -> None:
    """Give the labels of ``sections`` (containers shown one above the other in a dock) one width, so
    their fields line up as one container's do (magicgui sizes the labels of each container apart)."""
    from magicgui.application import use_app

    labeled = [(widget, widget._labeled_widget()) for section in sections for widget in section]
    labeled = [(widget, holder) for widget, holder in labeled if holder is not None]
    if not labeled:
        return
    measure = use_app().get_obj("get_text_width")  # as magicgui measures a container's labels
    widest = max(measure(widget.label) for widget, _holder in labeled)
    for _widget, holder in labeled:
        holder.label_width = widest


def _holds(item: QLayoutItem, widgets: Sequence[Widget]) -> bool:
    shown = item.widget()
    return shown is not None and any(shown is w.native or shown.isAncestorOf(w.native) for w in widgets)


def _move_items(source: QLayout, body: QVBoxLayout, footer: QVBoxLayout, footer_widgets: Sequence[Widget]) -> None:
    while source.count():
        item = source.takeAt(0)
        target = footer if _holds(item, footer_widgets) else body
        if item.widget() is not None:
            target.addWidget(item.widget())
        elif item.layout() is not None:
            target.addLayout(item.layout())
        else:
            target.addItem(item)


def fit_in_dock(container: Container, footer: Sequence[Widget] = (), min_height: int = MIN_DOCK_HEIGHT
                ) -> QScrollArea:
    """Move ``container``'s contents into a vertical scroll area, but for ``footer`` (widgets of the
    container, e.g. rows of main actions, the progress bar, the status line), which stays below it,
    always in view; returns the area.

    Call it last in the widget's ``__init__``: widgets appended to the
    container afterwards would land outside the scroll area.
    """
    outer = container.native.layout()
    body, bottom = QWidget(), QWidget()
    inner, below = QVBoxLayout(body), QVBoxLayout(bottom)
    margins = outer.contentsMargins()
    for layout in (inner, below):
        layout.setContentsMargins(margins)
        layout.setSpacing(outer.spacing())
    _move_items(outer, inner, below, footer)
    inner.addStretch(1)
    scroll_footer_text(footer)
    area = scroll_area(body, min_height)
    outer.setContentsMargins(0, 0, 0, 0)
    outer.addWidget(area)
    add_footer(container, bottom)
    return area


def scroll_area(body: QWidget, min_height: int) -> QScrollArea:
    """A frameless vertical scroll area showing ``body`` at its width (it never scrolls sideways)."""
    area = QScrollArea()
    area.setWidget(body)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
    area.setVerticalScrollBarPolicy(Qt.ScrollBarAsNeeded)
    area.setMinimumHeight(min_height)
    _follow_body_width(area, body)
    return area


def add_footer(container: Container, bottom: QWidget) -> None:
    """``bottom`` (the footer) below the rest of ``container``, at its own height."""
    if bottom.layout().count():
        bottom.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)
        container.native.layout().addWidget(bottom)
    # expanding: napari then adds no stretch below it, and the body takes the dock's height
    container.native.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Expanding)


class _BodyWidth(QObject):
    """Event filter on a dock's scrolling body: the scroll area is at least as wide as the body needs, as
    laid out now (styled, its texts set), so the body is never cut at the dock's right edge (it does not
    scroll sideways)."""

    def __init__(self, area: QScrollArea, body: QWidget) -> None:
        super().__init__(body)
        self.area, self.body = area, body
        self.fit()

    def fit(self) -> None:
        width = self.body.minimumSizeHint().width() + self.area.verticalScrollBar().sizeHint().width()
        if width != self.area.minimumWidth():
            self.area.setMinimumWidth(width)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() in (QEvent.LayoutRequest, QEvent.Show, QEvent.StyleChange, QEvent.FontChange):
            self.fit()
        return False


def _follow_body_width(area: QScrollArea, body: QWidget) -> None:
    """Keep ``area`` as wide as ``body`` needs, now and whenever the body's layout changes (styles are
    applied when the dock is shown, after the widget was built: measured then, a body could be cut)."""
    body.installEventFilter(_BodyWidth(area, body))  # parented to the body: lives as long as it


def fixed_margins(figure: Figure, *, left: float = 0.16, bottom: float = 0.2, right: float = 0.97,
                  top: float = 0.94) -> None:
    """Fixed subplot margins instead of the figure's tight layout (see the module's docstring)."""
    figure.set_layout_engine("none")
    figure.subplots_adjust(left=left, bottom=bottom, right=right, top=top)


__all__ = ["MIN_DOCK_HEIGHT", "add_footer", "button_row", "fit_in_dock", "fixed_margins", "one_label_column",
           "scroll_area"]
