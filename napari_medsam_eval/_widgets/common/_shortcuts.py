"""Keyboard shortcuts of the dock widgets, defined once: bound on the viewer, shown in tooltips.

Keys are napari key names (``Shift-S``); they are bound on the viewer and
unbound when the widget closes. In napari's keymap an active layer's own
binding of the same key wins (Shift+P is the Shapes layer's polygon lasso,
Ctrl+Z the Labels layer's paint undo), and the window's menu shortcuts come
before any layer's, so every key here is one that napari leaves free for every
layer type, the viewer and the window: tests/test_key_clash.py enumerates
napari's own bindings (each layer class's keymap with the shortcuts napari's
action manager binds there from its settings, the viewer's keymap, the
app-model keybindings of the menus) and fails on a clash, and presses every
key through the canvas with each kind of layer active. Ctrl+Z is bound on the
prediction layer as well (``_objects.py``: its own Ctrl+Z would undo a paint
stroke). docs/napari.md, "Keyboard shortcuts", lists the same table
(tests/test_docs.py compares).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

#: action (a widget method's name) -> key
SEGMENT_SHORTCUTS: dict[str, str] = {
    "segment_slice": "Shift-S",
    "propagate": "Shift-T",  # through the volume (Shift+P: the Shapes lasso)
    "correct_slice": "Shift-C",
    "cancel": "Shift-X",
    "undo": "Shift-Z",  # the Ctrl+Z letter (Ctrl+Z: the Labels paint undo)
    "next_object": "Shift-N",
    "previous_object": "Shift-B",
}
#: the Compare widget's keys (viewer-wide while it is open)
COMPARE_SHORTCUTS: dict[str, str] = {"next_worst": "Shift-W"}
#: the Benchmark widget's keys (a Qt shortcut of the viewer's window: a table has the focus there)
BENCHMARK_SHORTCUTS: dict[str, str] = {"next_row": "Control-Shift-N"}


def key_text(key: str) -> str:
    """``Shift-S`` -> ``Shift+S`` (as people write shortcuts)."""
    return key.replace("Control", "Ctrl").replace("-", "+")


def with_shortcut(tooltip: str, action: str, shortcuts: Mapping[str, str] = SEGMENT_SHORTCUTS) -> str:
    """``tooltip`` followed by the action's key, e.g. ``segment the slice on screen (Shift+S)``."""
    return f"{tooltip} ({key_text(shortcuts[action])})" if action in shortcuts else tooltip


def bind_shortcuts(target: Any, actions: Mapping[str, Callable[[], Any]],
                   shortcuts: Mapping[str, str] = SEGMENT_SHORTCUTS) -> Callable[[], None]:
    """Bind each action's key on ``target`` (a viewer or a layer); returns a function that unbinds them."""
    bound: list[str] = []
    for action, call in actions.items():
        key = shortcuts[action]
        target.bind_key(key, _ignoring_argument(call), overwrite=True)
        bound.append(key)

    def unbind() -> None:
        for key in bound:
            target.bind_key(key, None)
        bound.clear()
    return unbind


def _ignoring_argument(call: Callable[[], Any]) -> Callable[[Any], None]:
    def on_key(_target: Any) -> None:  # napari passes the viewer / layer; return nothing (no key-release part)
        call()
    return on_key


__all__ = ["BENCHMARK_SHORTCUTS", "COMPARE_SHORTCUTS", "SEGMENT_SHORTCUTS", "bind_shortcuts", "key_text", "with_shortcut"]
