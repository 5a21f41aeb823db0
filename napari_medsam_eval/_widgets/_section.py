"""A section of a dock widget: a small labelled container its parent composes (napari-animation's way).

A section is built from what it works on (the ``Session``, the viewer, the
widget's one :class:`._worker.WorkerRunner`, other sections), never from the
widget that shows it; the widget only stacks its sections. Sections sit flush
(no margins), and :func:`align_labels` gives the labels of all of them one
column, so the stack looks like one form.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from magicgui.application import use_app
from magicgui.widgets import Container, Widget
from magicgui.widgets.bases import ButtonWidget


class Section(Container):
    """A vertical, labelled container without margins (one section of a dock widget)."""

    def __init__(self, widgets: Sequence[Widget] = (), name: str = "") -> None:
        super().__init__(widgets=list(widgets), labels=True, name=name)
        self.margins = (0, 0, 0, 0)

    @property
    def locked(self) -> list[Widget]:
        """The controls the widget's runner disables while a job runs (none by default)."""
        return []


def align_labels(sections: Iterable[Container]) -> None:
    """One label column for ``sections``: every label as wide as the widest (as one labelled form)."""
    labelled = [w for s in sections if s.labels for w in s if not isinstance(w, ButtonWidget)]
    if not labelled:
        return
    measure = use_app().get_obj("get_text_width")
    widest = max(measure(w.label) for w in labelled)
    for widget in labelled:
        wrapper = widget._labeled_widget()
        if wrapper is not None:
            wrapper.label_width = widest


__all__ = ["Section", "align_labels"]
