"""Slices for a volume, frames for a video: the docks' words follow the image they work on. No Qt.

:func:`in_units` puts a text in the image's unit ("Segment slice" -> "Segment frame", "3 slices" ->
"3 frames"); :class:`UnitWords` keeps the texts a dock wrote once (field labels, button texts, choice
names) and shows them in the unit of the image chosen now. Texts a dock writes as it works (a status, a
slice's DSC, the worst slices, the anchors) are written in the unit where they are made.
"""
from __future__ import annotations

import re
from typing import Any, Iterable

#: the words a volume's texts use, and what a video's say instead
_WORDS = {"slice": "frame", "slices": "frames", "Slice": "Frame", "Slices": "Frames"}
_PATTERN = re.compile(r"\b(slices|slice|Slices|Slice)\b")


def unit_of(kind: str | None) -> str:
    """``frame`` for a video, ``slice`` for anything else."""
    return "frame" if kind == "video" else "slice"


def in_units(text: str, unit: str) -> str:
    """``text`` (written for slices) in ``unit``: every "slice(s)" word made "frame(s)" for ``frame``."""
    return _PATTERN.sub(lambda m: _WORDS[m.group(1)], text) if unit == "frame" else text


class UnitWords:
    """The static texts of some magicgui widgets (their ``label``; a button's ``text``; a combo box's item
    names, its values kept), shown in the unit of the image a dock is on (:meth:`show`)."""

    def __init__(self, labels: Iterable[Any] = (), buttons: Iterable[Any] = (), combos: Iterable[Any] = ()) -> None:
        self._labels: list[tuple[Any, str]] = []
        self._buttons: list[tuple[Any, str]] = []
        self._combos: list[tuple[Any, list[tuple[str, Any]]]] = []
        self.unit = "slice"
        self.add(labels, buttons, combos)

    def add(self, labels: Iterable[Any] = (), buttons: Iterable[Any] = (), combos: Iterable[Any] = ()) -> None:
        """Keep these widgets' texts too (as written now, for slices)."""
        self._labels += [(w, w.label) for w in labels]
        self._buttons += [(w, w.text) for w in buttons]
        self._combos += [(w, [(w.native.itemText(i), w.native.itemData(i)) for i in range(w.native.count())])
                         for w in combos]

    def show(self, unit: str) -> None:
        """Every kept text in ``unit`` (``slice`` or ``frame``)."""
        if unit == self.unit:
            return
        self.unit = unit
        for widget, text in self._labels:
            widget.label = in_units(text, unit)
        for widget, text in self._buttons:
            widget.text = in_units(text, unit)
        for widget, items in self._combos:  # new names, the same values (a refresh of choices keeps them)
            value = widget.value
            named = [(in_units(name, unit), data) for name, data in items]
            widget.choices = lambda _widget, named=named: named  # a callable: a refresh keeps the new names
            widget.value = value


__all__ = ["UnitWords", "in_units", "unit_of"]
