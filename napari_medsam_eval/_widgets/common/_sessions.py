"""What the Segment widget of a viewer shares with the other docks: its session, and the object it is on.

The Compare widget's prompt sensitivity runs the model the Segment widget
loaded, on the image it prepared (its embedding cache included), so it asks
here (:func:`session_of`). The object the Segment widget is on (image and label
value, :class:`ChosenObject`) is said here too: the Compare widget's target
label follows it while it compares that image's prediction. Either dock may be
docked first: both ask :func:`chosen_object` for the viewer's one. Keyed by the
viewer's identity; a closed viewer's entries are dropped. No Qt.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from psygnal import Signal

if TYPE_CHECKING:
    from napari_medsam_eval.session.session import Session

_SESSIONS: dict[int, tuple[weakref.ref, "Session"]] = {}


class ChosenObject:
    """The object (image name, label value) a viewer's Segment widget is on; :attr:`changed` says so."""

    #: (image name, label value): the Segment widget went to another object or image
    changed = Signal(str, int)

    def __init__(self) -> None:
        self.image: str | None = None
        self.label: int | None = None

    def choose(self, image: str | None, label: int) -> None:
        """The Segment widget is on object ``label`` of ``image`` now (said once per change)."""
        if image is None or (image, int(label)) == (self.image, self.label):
            return
        self.image, self.label = image, int(label)
        self.changed.emit(image, int(label))


_CHOSEN: dict[int, tuple[weakref.ref, ChosenObject]] = {}


def chosen_object(viewer: Any) -> ChosenObject:
    """``viewer``'s :class:`ChosenObject` (made on the first ask, by whichever dock comes first)."""
    key = id(viewer)
    entry = _CHOSEN.get(key)
    if entry is None or entry[0]() is not viewer:
        entry = _CHOSEN[key] = (weakref.ref(viewer, lambda ref: _forget(key, ref)), ChosenObject())
    return entry[1]


def _forget(key: int, ref: weakref.ref) -> None:
    """A viewer went: its entry goes (not a later viewer's that got the same identity)."""
    if key in _CHOSEN and _CHOSEN[key][0] is ref:
        del _CHOSEN[key]


def register_session(viewer: Any, session: "Session") -> None:
    """``session`` is ``viewer``'s (the last Segment widget docked there wins)."""
    key = id(viewer)
    _SESSIONS[key] = (weakref.ref(viewer, lambda _ref: _SESSIONS.pop(key, None)), session)


def session_of(viewer: Any) -> "Session | None":
    """The session registered for ``viewer`` (None when no Segment widget was docked there)."""
    entry = _SESSIONS.get(id(viewer))
    if entry is None or entry[0]() is not viewer:
        return None
    return entry[1]


__all__ = ["ChosenObject", "chosen_object", "register_session", "session_of"]
