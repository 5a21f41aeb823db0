"""Fitting the dock widgets into a 1600 x 1000 window: scrolling, a fixed footer, wrapping, plot margins.

napari docks a magicgui container's ``native`` widget as it is, with no
scroll area, so tall docks stacked on one side make the main window taller
than the screen. :func:`fit_in_dock` moves a container's contents into a
vertical scroll area, but for its *footer*: the main actions (buttons in
rows, :func:`button_row`), the progress bar and the status line stay below
the scroll area, in view whatever the dock's height, so three docks stacked
at 1600 x 1000 each show what a user clicks and what a job is doing.
:func:`wrap_status` makes a status label wrap (its full text selectable and
in the tooltip) instead of widening the dock; in the footer a long message
scrolls inside a few lines (:data:`STATUS_LINES`) instead of pushing the
actions out of view. :func:`fixed_margins` gives an embedded plot fixed
margins instead of a tight layout, whose measuring of every text made each
redraw of the small plots cost tens of milliseconds on the GUI thread.

The tabbed docks (results first, over the same kind of footer) are in :mod:`._dock_tabs`.
"""
from __future__ import annotations

from typing import Sequence

from magicgui.widgets import Container, Label, Widget
from matplotlib.figure import Figure
from qtpy.QtCore import QEvent, QObject, Qt
from qtpy.QtWidgets import QFrame, QLayout, QLayoutItem, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

#: the least height of a docked widget's scroll area, in pixels (its footer comes on top)
MIN_DOCK_HEIGHT = 30
#: lines of a status message shown in a footer before it scrolls
STATUS_LINES = 4


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


def scroll_footer_text(footer: Sequence[Widget]) -> None:
    for widget in footer:
        if isinstance(widget, Label) and widget.native.wordWrap():
            _scroll_long_text(widget)


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


class _FullTextTip(QObject):
    """Event filter: a label's tooltip is its whole text, read when the tooltip is asked for."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.ToolTip:
            watched.setToolTip(watched.text())
        return False


def _scroll_long_text(label: Label) -> None:
    """Cap a wrapping footer label at :data:`STATUS_LINES` lines; a longer text scrolls, readable in full."""
    native = label.native
    line = native.fontMetrics().lineSpacing()
    holder = native.parentWidget()
    layout = holder.layout() if holder is not None else None
    area = QScrollArea()
    area.setFrameShape(QFrame.NoFrame)
    area.setWidgetResizable(True)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
    area.setMaximumHeight(line * STATUS_LINES + 6)
    area.setMinimumHeight(line + 6)
    area.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Maximum)
    if layout is not None and layout.indexOf(native) >= 0:
        index = layout.indexOf(native)
        layout.removeWidget(native)
        area.setWidget(native)
        layout.insertWidget(index, area)
    native.setAlignment(Qt.AlignLeft | Qt.AlignTop)
    policy = QSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
    policy.setHeightForWidth(True)  # the area holds it at the height of its wrapped text: no scroll bar when it fits
    native.setSizePolicy(policy)
    fit = _TextHeight(area, native, line)
    area.viewport().installEventFilter(fit)  # parented to the area: lives as long as it (a new text: LayoutRequest)


class _TextHeight(QObject):
    """Event filter on a footer status line's scroll area: as high as its text, wrapped at the area's width,
    from one line to :data:`STATUS_LINES` (a short message leaves the room to the dock's results)."""

    def __init__(self, area: QScrollArea, label: QWidget, line: int) -> None:
        super().__init__(area)
        self.area, self.label, self.line = area, label, line
        #: the label's padding by font (:meth:`_padding`), and whether it is being measured
        self._metrics: dict[str, int] = {}
        self._measuring = False

    def fit(self) -> None:
        """As high as the text up to :data:`STATUS_LINES` lines; a longer text scrolls in a box that ends
        where a line ends, so none is cut mid-height (the style's padding measured on the label)."""
        if self._measuring:
            return
        width = max(self.area.viewport().width(), 1)
        metrics = self.label.fontMetrics()
        padding = self._padding(width)
        shown = max(self.label.heightForWidth(width), padding + metrics.height())
        fits = padding + metrics.height() + (STATUS_LINES - 1) * metrics.lineSpacing()
        height = shown if shown <= fits else padding // 2 + STATUS_LINES * metrics.lineSpacing()
        height += self.area.height() - self.area.viewport().height()
        if (self.area.minimumHeight(), self.area.maximumHeight()) != (height, height):
            self.area.setFixedHeight(height)

    def _padding(self, width: int) -> int:
        """The label's height around one line of text (its style's padding), measured once per font."""
        key = self.label.font().key()
        if key not in self._metrics:
            self._measuring = True
            text = self.label.text()
            try:
                self.label.setText("x")
                self._metrics[key] = max(self.label.heightForWidth(width) - self.label.fontMetrics().height(), 0)
            finally:
                self.label.setText(text)
                self._measuring = False
        return self._metrics[key]

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() in (QEvent.Resize, QEvent.Show, QEvent.LayoutRequest):
            self.fit()
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


__all__ = ["MIN_DOCK_HEIGHT", "STATUS_LINES", "add_footer", "button_row", "fit_in_dock", "fixed_margins",
           "one_label_column", "scroll_area", "scroll_footer_text", "wrap_status"]
