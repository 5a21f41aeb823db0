"""A section of a dock widget: a small labelled container its parent composes (napari-animation's way).

A section is built from what it works on (the ``Session``, the viewer, the
widget's one :class:`._worker.WorkerRunner`, other sections), never from the
widget that shows it; the widget only stacks its sections. Sections sit flush
(no margins), and :func:`._dock_layout.one_label_column` gives the labels of all of them one
column, so the stack looks like one form.
"""
from __future__ import annotations

from typing import Sequence

from magicgui.widgets import Container, Widget


class Section(Container):
    """A vertical, labelled container without margins (one section of a dock widget)."""

    def __init__(self, widgets: Sequence[Widget] = (), name: str = "") -> None:
        super().__init__(widgets=list(widgets), labels=True, name=name)
        self.margins = (0, 0, 0, 0)

    @property
    def locked(self) -> list[Widget]:
        """The controls the widget's runner disables while a job runs (none by default)."""
        return []


__all__ = ["Section"]
