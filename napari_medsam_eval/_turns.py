"""GUI work one piece per turn of the event loop, a pause between two pieces, whichever widget queued them.

A result landing is several pieces of GUI work, each started by a worker's signal: a
benchmark row's layers one by one and the view moved to the slice that matters, the
Compare widget's overlay layer, then its numbers and plot. Qt delivers the signals that
arrived while the GUI thread was busy in one go and paints only after them, so two
pieces of different widgets that happen to arrive together freeze the viewer for their
sum and the paints both cause (measured: 220-270 ms when a row's last layer, the Compare
overlay and the view landed together, against 110-130 ms for one of them and its paint).

:func:`soon` queues a piece instead. One timer runs the queue, one piece at a time and
:data:`TURN_PAUSE_MS` apart (the first at the next turn when none ran in the last pause):
between two pieces the event loop paints what the first changed and handles input. A
piece is run from a timer, never inside the burst of signals that queued it. A piece
whose ``owner`` (a Qt object: the widget) has been deleted is dropped, and its ``dropped``
callback runs instead (a job waiting for the piece is told to go on).
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable

from qtpy.QtCore import QTimer

#: milliseconds the event loop runs (paints, input, other timers) between two pieces of GUI work
TURN_PAUSE_MS = 30


def _deleted(owner: Any) -> bool:
    """Whether the Qt object ``owner`` has been deleted (its Python wrapper left behind)."""
    try:
        owner.objectName()
    except RuntimeError:  # PyQt and PySide: the wrapped C++ object has been deleted
        return True
    return False


class Turns:
    """The queue of pieces of GUI work (:func:`soon`); one per process, on the GUI thread."""

    def __init__(self) -> None:
        self._queue: deque[tuple[Any, Callable[[], Any], Callable[[], Any] | None]] = deque()
        self._timer: QTimer | None = None
        self._last_end = 0.0
        #: pieces run so far (tests: each in a turn of its own)
        self.ran = 0

    def soon(self, owner: Any, piece: Callable[[], Any], dropped: Callable[[], Any] | None = None) -> None:
        """Run ``piece()`` in a turn of its own, after the pieces queued before it (GUI thread only);
        ``dropped()`` instead when the Qt object ``owner`` is deleted by then."""
        self._queue.append((owner, piece, dropped))
        if self._timer is None:
            self._timer = QTimer()
            self._timer.setSingleShot(True)
            self._timer.timeout.connect(self._next)
        if not self._timer.isActive():
            self._arm()

    @property
    def waiting(self) -> int:
        """Pieces queued and not run yet."""
        return len(self._queue)

    def _arm(self) -> None:
        since_ms = (time.perf_counter() - self._last_end) * 1000
        self._timer.start(int(max(0.0, TURN_PAUSE_MS - since_ms)))

    def _next(self) -> None:
        while self._queue:
            owner, piece, dropped = self._queue.popleft()
            if owner is None or not _deleted(owner):
                break
            if dropped is not None:
                dropped()
        else:
            return
        try:
            self.ran += 1
            piece()
        finally:
            self._last_end = time.perf_counter()
            if self._queue:
                self._arm()


#: the process's queue of GUI work
TURNS = Turns()


def soon(owner: Any, piece: Callable[[], Any], dropped: Callable[[], Any] | None = None) -> None:
    """Run ``piece()`` on the GUI thread in a turn of the event loop of its own (:class:`Turns`); dropped
    when the Qt object ``owner`` is deleted first (None: always run), ``dropped()`` run then."""
    TURNS.soon(owner, piece, dropped)


__all__ = ["TURNS", "TURN_PAUSE_MS", "Turns", "soon"]
