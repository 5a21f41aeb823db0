"""Progress steps shown at most every :data:`STEP_MS`: the first at once, the latest when the interval ends.

A progress bar's ``setValue`` repaints the window at once, so a job yielding hundreds of
steps a second (the box baseline's slices) would queue hundreds of repaints into one turn
of the event loop. :class:`StepPacer` holds the step waiting and shows it when the interval
is over (:meth:`flush` shows it at once: the job's last step, before it ends).
"""
from __future__ import annotations

from typing import Callable

from qtpy.QtCore import QTimer

#: least milliseconds between two steps shown (status line, bars)
STEP_MS = 50


class StepPacer:
    """Calls ``show(done, total)`` for the steps given to :meth:`step`, at most every :data:`STEP_MS`."""

    def __init__(self, show: Callable[[int, int], None]) -> None:
        self._show = show
        self._waiting: tuple[int, int] | None = None
        self._timer: QTimer | None = None
        #: how many steps were shown (tests: a burst of steps is shown as a few)
        self.shown = 0

    def step(self, done: int, total: int) -> None:
        """Show this step now when none was shown in the last :data:`STEP_MS`, else when that interval ends
        (unless a later step replaces it)."""
        self._waiting = (done, total)
        if self._timer is None:
            self._timer = QTimer()
            self._timer.setSingleShot(True)
            self._timer.setInterval(STEP_MS)
            self._timer.timeout.connect(self._next)
        if not self._timer.isActive():
            self._next()

    def _next(self) -> None:
        waiting, self._waiting = self._waiting, None
        if waiting is None:
            return
        self._timer.start()
        self.shown += 1
        self._show(*waiting)

    def flush(self) -> None:
        """Show the step waiting (if any) now; then none waits."""
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            self.shown += 1
            self._show(*waiting)
        self.stop()

    def stop(self) -> None:
        """Forget the step waiting."""
        self._waiting = None
        try:
            if self._timer is not None:
                self._timer.stop()
        except RuntimeError:  # Qt's side is gone (the interpreter is exiting)
            pass


__all__ = ["STEP_MS", "StepPacer"]
