"""Fitting the dock widgets into a 1600 x 1000 window: scrolling, wrapping, fixed plot margins.

napari docks a magicgui container's ``native`` widget as it is, with no
scroll area, so two tall docks stacked on one side make the main window
taller than the screen. :func:`fit_in_dock` moves a container's contents
into a vertical scroll area of a modest minimum height; :func:`wrap_status`
makes a status label wrap (its full text in the tooltip) instead of
widening the dock; :func:`fixed_margins` gives an embedded plot fixed margins
instead of a tight layout, whose measuring of every text made each redraw
of the small plots cost tens of milliseconds on the GUI thread.
"""
from __future__ import annotations

from magicgui.widgets import Container, Label
from matplotlib.figure import Figure
from qtpy.QtCore import QEvent, QObject, Qt
from qtpy.QtWidgets import QFrame, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

#: the least height of a docked widget's scroll area, in pixels
MIN_DOCK_HEIGHT = 220


def fit_in_dock(container: Container, min_height: int = MIN_DOCK_HEIGHT) -> QScrollArea:
    """Move everything in ``container``'s layout into a vertical scroll area; returns the area.

    Call it last in the widget's ``__init__``: widgets appended to the
    container afterwards would land outside the scroll area.
    """
    outer = container.native.layout()
    body = QWidget()
    inner = QVBoxLayout(body)
    margins = outer.contentsMargins()
    inner.setContentsMargins(margins)
    inner.setSpacing(outer.spacing())
    while outer.count():
        item = outer.takeAt(0)
        if item.widget() is not None:
            inner.addWidget(item.widget())
        elif item.layout() is not None:
            inner.addLayout(item.layout())
        else:
            inner.addItem(item)
    inner.addStretch(1)
    area = QScrollArea()
    area.setWidget(body)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
    area.setVerticalScrollBarPolicy(Qt.ScrollBarAsNeeded)
    area.setMinimumHeight(min_height)
    area.setMinimumWidth(body.minimumSizeHint().width() + area.verticalScrollBar().sizeHint().width())
    outer.setContentsMargins(0, 0, 0, 0)
    outer.addWidget(area)
    # expanding: napari then adds no stretch below it, and the area takes the dock's height
    container.native.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Expanding)
    return area


class _FullTextTip(QObject):
    """Event filter: a label's tooltip is its whole text, read when the tooltip is asked for."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.ToolTip:
            watched.setToolTip(watched.text())
        return False


def wrap_status(label: Label) -> None:
    """Let ``label`` wrap its text and never ask for more width than the dock has; the whole text
    (a long path, an error) stays readable in its tooltip and can be selected."""
    native = label.native
    native.setWordWrap(True)
    native.setTextInteractionFlags(Qt.TextSelectableByMouse)
    native.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.MinimumExpanding)
    native.setMinimumWidth(40)
    native.setToolTip(native.text())
    native.installEventFilter(_FullTextTip(native))  # parented to the label: lives as long as it


def fixed_margins(figure: Figure, *, left: float = 0.16, bottom: float = 0.2, right: float = 0.97,
                  top: float = 0.94) -> None:
    """Fixed subplot margins instead of the figure's tight layout (see the module's docstring)."""
    figure.set_layout_engine("none")
    figure.subplots_adjust(left=left, bottom=bottom, right=right, top=top)


__all__ = ["MIN_DOCK_HEIGHT", "fit_in_dock", "fixed_margins", "wrap_status"]
