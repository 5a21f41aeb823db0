"""What a user waits for on first use, done on a thread while the viewer keeps painting and answering.

napari calls a sample-data, reader or dock command on its GUI thread and adds what the command returns
in the same turn of the event loop. What our command does before it returns (importing our code,
building or reading the data, the one-time set-up napari does for its first Image and Labels layers:
pandas for a Labels layer's features, the unit registry for a layer's scale) used to freeze the window
for up to a second on first use. :func:`meanwhile` runs that part on a thread of its own while a local
event loop keeps the viewer live (it paints, takes input, runs other widgets' timers), and napari's
activity indicator names what is loading. Outside a Qt application, or off its GUI thread, the job just
runs.

napari then adds every layer the command returned in one turn and draws them in it; the first Image
and Labels layers of a session take 260 ms together (their controls, visuals and shaders).
:func:`in_turns` returns the first layer only, hidden, when the command runs inside the viewer's event
loop (a user's menu choice or file drop), and shows it and adds each other one in turns of their own
(:func:`._turns.soon`); a script's call, outside the event loop, gets every layer at once, as before.

Never call it while a module is being imported on the GUI thread (at import time): the job's own imports
could then wait for that module, which waits for the job.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

from qtpy.QtCore import QEventLoop, QThread, QTimer
from qtpy.QtWidgets import QApplication

from napari_medsam_eval._turns import TURN_PAUSE_MS, soon

T = TypeVar("T")
LayerData = tuple[Any, dict[str, Any], str]
#: how often the local event loop looks whether the job has ended, milliseconds
POLL_MS = 10

_warmed = False
_warm_lock = threading.Lock()


def on_gui_thread() -> bool:
    """Whether this is the running Qt application's GUI thread."""
    app = QApplication.instance()
    return app is not None and QThread.currentThread() is app.thread()


def meanwhile(job: Callable[[], T], note: str) -> T:
    """``job()``'s result, computed on a thread while the GUI thread's event loop runs; its exception
    raised here. ``note``: what loads, shown by napari's activity indicator while it runs."""
    if not on_gui_thread():
        return job()
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = job()
        except BaseException as error:  # noqa: BLE001 - handed to the GUI thread whole
            outcome["error"] = error
        finally:
            done.set()

    thread = threading.Thread(target=run, name=f"medsam-eval: {note}", daemon=True)
    with _activity(note):
        thread.start()
        _wait(done)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _wait(done: threading.Event) -> None:
    """Run a local event loop until ``done`` is set."""
    if done.wait(POLL_MS / 1000):
        return
    loop = QEventLoop()
    timer = QTimer()
    timer.timeout.connect(lambda: done.is_set() and loop.quit())
    timer.start(POLL_MS)
    try:
        (loop.exec() if hasattr(loop, "exec") else loop.exec_())
    finally:
        timer.stop()


class _activity:
    """napari's indeterminate progress (the activity indicator in the status bar) for the length of a block."""

    def __init__(self, note: str) -> None:
        self.note = note
        self.bar: Any = None

    def __enter__(self) -> "_activity":
        try:
            from napari.utils import progress

            self.bar = progress(total=0, desc=self.note)
        except Exception:  # noqa: BLE001 - a note must never stop the work it names
            self.bar = None
        return self

    def __exit__(self, *_exc: Any) -> None:
        if self.bar is not None:
            self.bar.close()


def warm_layer_kinds() -> None:
    """Once per process, on the calling thread: what napari sets up when it builds its first Image and Labels
    layer (the unit registry a layer's scale goes through, pandas for a Labels layer's features), so that
    the layers a command returns are built on the GUI thread without it."""
    global _warmed
    with _warm_lock:
        if _warmed:
            return
        import numpy as np
        from napari.layers import Image, Labels

        Image(np.zeros((2, 2), np.uint8), scale=(1.0, 1.0))
        Labels(np.zeros((2, 2), np.uint8), scale=(1.0, 1.0))
        _warmed = True


#: the characters vispy measures before it lays out any text (``_text_to_vbo``): a new text visual's first draw
#: has its font render them, and every napari layer has a text visual (a first Shapes layer: 200 ms, 140 after)
MEASURED_GLYPHS = "ÅÉÑŐjgpqy "


def warm_canvas_text(viewer: Any) -> None:
    """GUI thread (a turn of its own, 50 ms): the glyphs of :data:`MEASURED_GLYPHS` rendered once into the font
    ``viewer``'s canvas shares among its text visuals, so that the first layer with a text visual (a prompt's
    Shapes layer) does not render them while it is first drawn. Skipped where napari keeps no such font."""
    info = getattr(getattr(getattr(viewer.window, "_qt_viewer", None), "canvas", None), "_font_info", None)
    if info is None or not hasattr(info, "font_manager"):
        return
    font = info.font_manager.get_font(info.face)
    for char in MEASURED_GLYPHS:
        font[char]


def in_turns(layers: list[LayerData], **source: Any) -> list[LayerData]:
    """The layers napari is to add now. Inside the viewer's running event loop: the first one, hidden; then,
    each in a turn of its own (:func:`._turns.soon`), the first one shown and each other one added hidden and
    shown, with napari's ``source`` (``sample=(plugin, key)`` or ``path=..., reader_plugin=...``): a layer's
    first draw is a turn of its own. Elsewhere (a script, a test): all of them, as they are."""
    if not layers or not on_gui_thread() or QThread.currentThread().loopLevel() == 0:
        return layers
    import napari

    viewer = napari.current_viewer()
    if viewer is None:
        return layers
    owner = getattr(viewer.window, "_qt_window", None)
    (data, kwargs, kind), rest = layers[0], layers[1:]

    def queue() -> None:
        soon(owner, lambda: _show([layer for layer in viewer.layers if layer.data is data], kwargs))
        for layer_data in rest:
            added: list[Any] = []
            soon(owner, lambda layer_data=layer_data, added=added: added.extend(_add_hidden(viewer, layer_data, source)))
            soon(owner, lambda layer_data=layer_data, added=added: _show(added, layer_data[1]))

    # queued once napari has added the first layer and the loop has turned (a 0 ms timer would run in the
    # same pass of the loop as napari's add, before anything is painted)
    QTimer.singleShot(TURN_PAUSE_MS, queue)
    return [(data, {**kwargs, "visible": False}, kind)]


def _add_hidden(viewer: Any, layer_data: LayerData, source: dict[str, Any]) -> list[Any]:
    from napari.layers._source import layer_source

    data, kwargs, kind = layer_data
    with layer_source(**source):
        return viewer._add_layer_from_data(data, {**kwargs, "visible": False}, kind)


def _show(layers: list[Any], kwargs: dict[str, Any]) -> None:
    """Give ``layers`` the visibility their layer data asked for."""
    for layer in layers:
        layer.visible = kwargs.get("visible", True)


__all__ = ["MEASURED_GLYPHS", "in_turns", "meanwhile", "on_gui_thread", "warm_canvas_text", "warm_layer_kinds"]
