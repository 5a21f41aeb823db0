"""The Segment widget's :class:`~napari_medsam_eval.session.session.Session` of a viewer, for the other docks.

The Compare widget's prompt sensitivity runs the model the Segment widget
loaded, on the image it prepared (its embedding cache included), so it asks
here. Keyed by the viewer's identity; a closed viewer's entry is dropped.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session.session import Session

_SESSIONS: dict[int, tuple[weakref.ref, "Session"]] = {}


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


__all__ = ["register_session", "session_of"]
