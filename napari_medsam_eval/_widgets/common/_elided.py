"""A one-line label that never widens its dock: a long text is elided (``...``), whole in its tooltip.

magicgui's :class:`~magicgui.widgets.Label` asks for its whole text's width (a fixed size), so a long
name in a row of buttons (the Segment widget's object title, ``label 1 (anterior)`` and longer ones)
pushed the form past the dock's right edge, where it was clipped. :class:`ElidedLabel` takes the width
its row leaves, draws what fits with ``...`` at the end, and keeps its whole text as its value and its
tooltip, so hovering shows it.
"""
from __future__ import annotations

from typing import Any

from magicgui.widgets import Label
from qtpy.QtCore import QEvent, QObject, Qt
from qtpy.QtGui import QPainter
from qtpy.QtWidgets import QLabel, QSizePolicy

#: the least width of an elided label, in pixels (about three letters and the dots)
MIN_WIDTH = 32


class _ElidedPaint(QObject):
    """Event filter: paint a label's text elided to its width (its text itself stays whole)."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() != QEvent.Paint or not isinstance(watched, QLabel):
            return False
        rect = watched.contentsRect()
        shown = watched.fontMetrics().elidedText(watched.text(), Qt.ElideRight, rect.width())
        painter = QPainter(watched)
        try:
            watched.style().drawItemText(painter, rect, int(watched.alignment()), watched.palette(),
                                         watched.isEnabled(), shown, watched.foregroundRole())
        finally:
            painter.end()
        return True


def elided_text(label: Label) -> str:
    """What ``label`` shows at its width now (its text, or the text cut with ``...``)."""
    native = label.native
    return native.fontMetrics().elidedText(native.text(), Qt.ElideRight, native.contentsRect().width())


class ElidedLabel(Label):
    """A :class:`~magicgui.widgets.Label` elided to the width its row leaves, its whole text in its tooltip."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        native = self.native
        native.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        native.setMinimumWidth(MIN_WIDTH)
        native.setAlignment(Qt.AlignLeft | Qt.AlignVCenter)
        native.installEventFilter(_ElidedPaint(native))  # parented to the label: lives as long as it
        native.setToolTip(native.text())

    def set_value(self, value: Any) -> None:
        super().set_value(value)
        self.native.setToolTip(self.native.text())


__all__ = ["ElidedLabel", "MIN_WIDTH", "elided_text"]
