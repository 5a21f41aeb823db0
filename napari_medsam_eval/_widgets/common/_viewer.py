"""The viewer a dock widget works on: napari's own, not the proxy the Plugins menu hands over.

napari gives each plugin widget a ``PublicOnlyProxy`` of the viewer (a new proxy
per widget), and everything reached through it (``viewer.layers``, each layer) is
proxied too, while layers arriving in events, in magicgui's layer choices or from
another widget are not. Identity then fails between them (``proxy is layer`` is
False, two widgets' proxies are different objects), so a widget that compares
layers or finds its sibling widgets by viewer would silently lose track. Each
widget therefore unwraps the viewer once, at its door, and works on napari's own
objects from then on: layers compare by identity, and :mod:`._sessions` keys the
viewer by the object itself.
"""
from __future__ import annotations

from typing import Any


def real_viewer(napari_viewer: Any) -> Any:
    """The viewer behind napari's ``PublicOnlyProxy`` (the viewer itself when it is not proxied)."""
    return getattr(napari_viewer, "__wrapped__", napari_viewer)


__all__ = ["real_viewer"]
