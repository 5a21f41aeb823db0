"""What a GUI test asserts about responsiveness without a stopwatch.

A busy machine stretches every interval, so no GUI test compares a time with a
limit (the freeze times themselves are measured by ``benchmarks/responsiveness.py``).
What keeps the viewer responsive is asserted instead, the same on any machine:

* :class:`ThreadLog`: the heavy work (reading a case, building its layers, an
  encoder pass) runs on a worker thread, never on the GUI thread;
* :class:`LoopTurns`: the GUI event loop kept turning while a job ran (a
  timer's ticks are counted, not timed), and two pieces of GUI work landed in
  different turns of it;
* :func:`from_the_event_loop`: an action run as a user's menu choice or file drop runs it, from inside
  the running event loop (``benchmarks/_first_use.py`` runs its actions so too).
"""
from __future__ import annotations

import functools
import threading
from typing import Any

import pytest
from qtpy.QtCore import QEventLoop, QTimer


def on_gui_thread() -> bool:
    """Whether the caller runs on the GUI thread (Qt's, which is Python's main thread here)."""
    return threading.current_thread() is threading.main_thread()


class ThreadLog:
    """Wrap functions or methods (``watch(owner, name)``) and log, for each call, its name and whether
    it ran on the GUI thread; ``on_gui`` lists the calls that did."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.calls: list[tuple[str, bool]] = []
        self._lock = threading.Lock()

    def watch(self, owner: Any, name: str, label: str | None = None) -> "ThreadLog":
        original = getattr(owner, name)
        label = label or name

        @functools.wraps(original)
        def logged(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls.append((label, on_gui_thread()))
            return original(*args, **kwargs)

        self.monkeypatch.setattr(owner, name, logged)
        return self

    def count(self, label: str) -> int:
        with self._lock:
            return sum(1 for name, _ in self.calls if name == label)

    @property
    def on_gui(self) -> list[str]:
        with self._lock:
            return [name for name, gui in self.calls if gui]


class LoopTurns:
    """Counts turns of the GUI event loop: a short timer ticks whenever the loop is free to run it.

    ``mark()`` returns the ticks so far, so a test can show that two pieces of
    GUI work were separated by at least one turn, or that the loop ticked
    while a worker ran. Use as a context manager (starts and stops the timer).
    """

    def __init__(self, interval_ms: int = 10) -> None:
        self.ticks = 0
        self.timer = QTimer()
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        self.ticks += 1

    def mark(self) -> int:
        return self.ticks

    def __enter__(self) -> "LoopTurns":
        self.timer.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.timer.stop()


def from_the_event_loop(action: Any) -> Any:
    """``action()`` run from inside a running event loop (a local one), as napari runs a menu choice or a file
    drop; its result, its exception raised here once the loop has ended."""
    loop, outcome = QEventLoop(), {}

    def run() -> None:
        try:
            outcome["value"] = action()
        except BaseException as error:  # noqa: BLE001 - raised again outside the loop
            outcome["error"] = error
        finally:
            loop.quit()

    QTimer.singleShot(0, run)
    loop.exec() if hasattr(loop, "exec") else loop.exec_()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
