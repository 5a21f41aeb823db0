"""The objects that exist once a dock has loaded, set aside from Python's garbage collector until napari collects.

Python's collector walks every tracked object in a full collection, and starts one whenever the objects that
survived its younger collections have grown by a quarter since the last. With napari, Qt, our docks and their
libraries loaded some 400,000 objects are tracked (a full walk: about 200 ms of frozen viewer on the 2-vCPU VM
of docs/performance.md), and a dock's loading adds a quarter (its warm-up: numba's type system for napari's
Shapes layer, OpenVINO for the precisions): the walk came a few turns after the first dock appeared, the
largest part of its first use (205 ms against napari's own 68 ms for a dock).

:func:`set_aside` (``gc.freeze``) moves the objects that exist after a dock has loaded (modules, compiled code,
the viewer) out of the collector's walk: later collections walk what was made since. Cyclic garbage among them
would stay until it is given back, so it is given back (``gc.unfreeze``) before napari's own collection of a
removed layer (napari collects in full then: ``VispyCanvas._clean_and_update_scenegraph``) and when the viewer
closes: a removed layer's memory is freed as before, and napari's leak check finds its viewer collected.
"""
from __future__ import annotations

import gc
from typing import Any

#: the viewers whose removals and close give the objects back (each hooked once)
_hooked: set[int] = set()


def set_aside(viewer: Any | None) -> None:
    """Set the objects that exist now aside from the collector's walk, until ``viewer`` removes a layer or
    closes: then every object is given back to the collector, as if never set aside. No viewer (None): nothing is
    set aside (nothing would give it back)."""
    if viewer is None:
        return
    gc.freeze()
    if id(viewer) in _hooked:
        return
    _hooked.add(id(viewer))
    viewer.layers.events.removing.connect(give_back)
    window = getattr(getattr(viewer, "window", None), "_qt_window", None)
    if window is not None:
        window.installEventFilter(_close_filter())
        window.destroyed.connect(lambda *_a, key=id(viewer): _hooked.discard(key))


def give_back(*_event: Any) -> None:
    """Give every object set aside back to the collector (its next full collection walks them again)."""
    if gc.get_freeze_count():
        gc.unfreeze()


_close_watch: Any = None


def _close_filter() -> Any:
    """The one Qt event filter that gives the objects back when a viewer's window is closing (made at first
    use: Qt's application exists by then)."""
    global _close_watch
    if _close_watch is None:
        from qtpy.QtCore import QEvent, QObject

        close = QEvent.Type.Close if hasattr(QEvent, "Type") else QEvent.Close

        class CloseWatch(QObject):
            def eventFilter(self, _watched: Any, event: Any) -> bool:  # noqa: N802 - Qt's name
                if event.type() == close:
                    give_back()
                return False

        _close_watch = CloseWatch()
    return _close_watch


__all__ = ["give_back", "set_aside"]
