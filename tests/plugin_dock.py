"""Widgets docked the way napari's Plugins menu docks them, the only way a user gets them.

``viewer.window.add_plugin_dock_widget`` builds each widget through npe2 and hands it
a ``PublicOnlyProxy`` of the viewer (a different proxy for each widget), so a test
that builds a widget class on the real viewer object would miss what users meet.
Every widget test docks through :func:`dock`.
"""
from __future__ import annotations

from typing import Any

PLUGIN = "napari-medsam-eval"
#: the widgets' display names in napari.yaml, by a short name
WIDGETS = {"segment": "Segment", "compare": "Compare / failure analysis", "benchmark": "Benchmark"}


def dock(viewer: Any, which: str, backend: Any = None) -> Any:
    """Dock widget ``which`` (segment, compare, benchmark) from the plugin's menu entry; returns the
    widget. ``backend``: an already built model given to a Segment widget (as a script would)."""
    _dock_widget, widget = viewer.window.add_plugin_dock_widget(PLUGIN, WIDGETS[which])
    if backend is not None:
        widget.set_backend(backend)
    return widget


def undock(viewer: Any, widget: Any) -> None:
    """Close ``widget``'s dock as the user does with its close button (napari docks a widget once: docking the
    same menu entry again gives the docked widget back, so a test wanting a fresh one undocks the old one)."""
    viewer.window.remove_dock_widget(widget.native)
