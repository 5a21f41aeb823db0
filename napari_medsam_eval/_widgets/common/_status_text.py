"""A dock's status lines: wrapping at the dock's width (the whole text in the tooltip, selectable), and in
the footer scrolling inside a few lines (:data:`STATUS_LINES`) instead of pushing the actions out of view."""
from __future__ import annotations

from typing import Sequence

from magicgui.widgets import Label, Widget
from qtpy.QtCore import QEvent, QObject, Qt
from qtpy.QtWidgets import QFrame, QScrollArea, QSizePolicy, QWidget

#: lines of a status message shown in a footer before it scrolls
STATUS_LINES = 4


def scroll_footer_text(footer: Sequence[Widget]) -> None:
    for widget in footer:
        if isinstance(widget, Label) and widget.native.wordWrap():
            _scroll_long_text(widget)


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


__all__ = ["STATUS_LINES", "scroll_footer_text", "wrap_status"]
