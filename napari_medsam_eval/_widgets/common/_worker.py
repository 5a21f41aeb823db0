"""Worker glue, written once: a napari thread worker with a busy UI, errors, progress and Cancel.

Every long job of the dock widgets (building a model, segmenting,
propagating, a benchmark run, opening a benchmark row) runs in a napari
``create_worker`` thread. Its ``returned`` / ``yielded`` / ``finished``
callbacks run on the GUI thread, so layers change only there. A
:class:`WorkerRunner` holds one such worker for a widget: while it runs the
widget's controls are disabled (Cancel enabled for a cancellable job), its
exception becomes an error notification and the status line, its progress
goes to the status line and a progress bar (napari's activity dock or the
widget's own), and Cancel sets the job's ``cancel`` event.

A worker must never outlive the widgets its callbacks touch: :meth:`WorkerRunner.close`
(called when the widget's Qt object is destroyed, and for every runner still open when
the interpreter exits) sets each running job's cancel event, disconnects the worker's
callbacks and waits for the job to end, so no callback reaches a deleted Qt object and
no job is cut off half-way through writing a file when the process ends.
Steps are shown at most every :data:`._step_pacer.STEP_MS` (:class:`._step_pacer.StepPacer`), the
job's last one before it ends.
"""
from __future__ import annotations

import atexit
import threading
import time
import weakref
from typing import Any, Callable, Sequence

from magicgui.widgets import Label, ProgressBar, PushButton, Widget
from napari.qt.threading import create_worker
from napari.utils import progress as napari_progress
from napari.utils.notifications import show_error

from napari_medsam_eval._widgets.common._jobs import CLOSE_WAIT_S, Job, end_job, room_in_the_pool, tracked
from napari_medsam_eval._widgets.common._step_pacer import STEP_MS, StepPacer

#: every runner not yet closed, closed at interpreter exit (before Qt and the interpreter go away)
_OPEN_RUNNERS: "weakref.WeakSet[WorkerRunner]" = weakref.WeakSet()


def _close_open_runners() -> None:
    for runner in list(_OPEN_RUNNERS):
        runner.close()


atexit.register(_close_open_runners)


def report_error(status: Label | None, message: str) -> None:
    """An error as a napari notification and, whole, on the ``status`` label (it wraps; in a dock's
    footer a long message scrolls within a few lines, readable in full and selectable)."""
    if status is not None:
        status.value = message
    show_error(message)


class WorkerRunner:
    """One worker at a time for a widget: busy controls, errors, progress, Cancel.

    ``controls`` are disabled while a job runs; ``cancel_button`` is enabled
    while a cancellable job runs; steps (:meth:`step`) go to ``status``, to
    ``progress_bar`` when given and to a napari progress bar when a job is
    started with ``progress=`` a description.

    ``status=None`` makes a quiet runner, for background work the user did not start (e.g. a
    summary recomputed as rows arrive): no status line, and with no ``controls`` nothing is locked;
    an error is still a notification.
    """

    def __init__(self, status: Label | None, controls: Sequence[Widget] = (), cancel_button: PushButton | None = None,
                 progress_bar: ProgressBar | None = None) -> None:
        self.status = status
        self.controls = list(controls)
        self.cancel_button = cancel_button
        self.progress_bar = progress_bar
        #: the running worker (None when idle) and its job's cancel event (None when not cancellable)
        self.worker: Any = None
        self.cancel_event: threading.Event | None = None
        self._pbar: Any = None
        self._steps: Callable[[int, int], str] = lambda done, total: f"{done}/{total}"
        #: shows the steps at most every STEP_MS
        self.pacer = StepPacer(self._show_step)
        #: every job started and not yet ended, by its worker
        self._jobs: dict[Any, Job] = {}
        self.closed = False
        _OPEN_RUNNERS.add(self)

    @property
    def busy(self) -> bool:
        return self.worker is not None

    @property
    def running(self) -> int:
        """How many of this runner's jobs have not ended yet."""
        return len(self._jobs)

    @property
    def cancelling(self) -> bool:
        return self.cancel_event is not None and self.cancel_event.is_set()

    def error(self, message: str) -> None:
        """Report ``message`` (notification and status line); returns None, for ``return runner.error(...)``."""
        report_error(self.status, message)

    def start(self, job: Callable[..., Any], *args: Any, text: str,
              returned: Callable[[Any], Any] | None = None, yielded: Callable[[Any], Any] | None = None,
              finished: Callable[[], Any] | None = None, errored: Callable[[BaseException], Any] | None = None,
              error_prefix: str = "", cancellable: bool = False, progress: str | None = None,
              steps: Callable[[int, int], str] | None = None, total: int | None = None, **kwargs: Any) -> Any:
        """Run ``job(*args, **kwargs)`` in a worker and return it (started).

        ``cancellable``: the job is called with ``cancel=`` a new
        :class:`threading.Event` that :meth:`cancel` (and napari's own abort)
        sets. ``returned`` / ``yielded`` get the job's return value / yielded
        values; ``finished`` runs after the UI is idle again; an exception is
        reported as ``error_prefix`` + its type and message, after ``errored``.
        ``progress``: a napari progress bar with that description. ``steps``
        formats the status text of a step (:meth:`step`); without
        ``yielded``, the job yields ``(done, total)`` steps. ``total``: show
        step ``(0, total)`` at once.
        """
        if self.closed:
            return None
        self.cancel_event = threading.Event() if cancellable else None
        if cancellable:
            kwargs["cancel"] = self.cancel_event
        state = Job(getattr(job, "__name__", str(job)), self.cancel_event)

        def failed(error: BaseException) -> None:
            self.pacer.flush()  # the last step before the error's message, never over it
            if errored is not None:
                errored(error)
            self.error(f"{error_prefix}{type(error).__name__}: {error}")

        worker = create_worker(tracked(job, state), *args, _start_thread=False, _connect={"errored": failed},
                               **kwargs)
        self._jobs[worker] = state
        worker.finished.connect(lambda: self._jobs.pop(worker, None))
        if self.cancel_event is not None:
            worker.aborted.connect(self.cancel_event.set)  # napari's own cancel (worker.quit) stops the job too
        if progress is not None:
            self._pbar = napari_progress(total=0, desc=progress)
        if self.progress_bar is not None:
            self.progress_bar.value = 0
        if steps is not None:
            self._steps = steps
            yielded = yielded or (lambda step: self.step(*step))
        # the last step is shown before the job's result (whose message it must not overwrite)
        for name, callback in (("returned", lambda *_: self.pacer.flush()), ("returned", returned),
                               ("yielded", yielded), ("finished", self._finished),
                               ("finished", finished)):
            if callback is not None:  # (a FunctionWorker has no ``yielded``)
                getattr(worker, name).connect(callback)
        self.worker = worker
        self._set_busy(True, text)
        room_in_the_pool()
        worker.start()
        if total is not None:
            self.step(0, total)
        return worker

    def step(self, done: int, total: int) -> None:
        """Show a step of the running job: its text on the status line (unless cancelling), the bars; at once
        when none was shown in the last :data:`STEP_MS`, else when that interval ends (the latest step then)."""
        if self.worker is not None:  # (not a step delivered after the run ended)
            self.pacer.step(done, total)

    def _show_step(self, done: int, total: int) -> None:
        if self.worker is None:
            return
        if not self.cancelling and self.status is not None:
            self.status.value = self._steps(done, total)
        if self.progress_bar is not None:
            self.progress_bar.max = max(1, total)
            self.progress_bar.value = min(done, total)
        pbar = self._pbar
        if pbar is not None:  # last: napari's progress bar may process events (and end the run) here
            if pbar.total != total:
                pbar.total = total
            pbar.update(done - pbar.n)

    def cancel(self, text: str = "cancelling ...") -> None:
        """Ask the running job to stop (its cancel event); Cancel greys out, ``text`` on the status line."""
        if self.cancel_event is None:
            return
        self.stop()
        if self.cancel_button is not None:
            self.cancel_button.enabled = False
        if self.status is not None:
            self.status.value = text

    def stop(self) -> None:
        """Set the running job's cancel event without touching the UI (the widget is going away)."""
        if self.cancel_event is not None:
            self.cancel_event.set()

    def close(self, timeout: float = CLOSE_WAIT_S) -> None:
        """The widget is going away: cancel every job, disconnect its worker's callbacks (none may touch a
        deleted widget) and wait up to ``timeout`` seconds in all for the running jobs to end. A job not
        started yet will do nothing; a generator job its worker no longer drives (it waits at a yield) is
        closed here. No UI is touched; the runner starts nothing afterwards."""
        self.closed = True
        _OPEN_RUNNERS.discard(self)
        jobs = list(self._jobs.items())
        for worker, state in jobs:
            state.skip = True
            if state.cancel is not None:
                state.cancel.set()
            for name in ("returned", "yielded", "finished", "errored", "aborted"):
                try:
                    getattr(worker, name).disconnect()
                except (AttributeError, TypeError, RuntimeError):  # none connected, or Qt's side gone
                    pass
        deadline = time.monotonic() + timeout
        for _worker, state in jobs:
            end_job(state, deadline)
        self._jobs.clear()
        self.pacer.stop()
        self.worker = self.cancel_event = None
        if self._pbar is not None:
            try:
                self._pbar.close()
            except RuntimeError:
                pass
            self._pbar = None

    def _set_busy(self, busy: bool, text: str | None = None) -> None:
        for widget in self.controls:
            widget.enabled = not busy
        if self.cancel_button is not None:
            self.cancel_button.enabled = busy and self.cancel_event is not None
        if text is not None and self.status is not None:
            self.status.value = text

    def _finished(self) -> None:
        self.pacer.stop()  # its last step was shown when it returned or failed (a cancelled job's is dropped)
        self.worker = self.cancel_event = None
        if self._pbar is not None:
            self._pbar.close()
            self._pbar = None
        self._set_busy(False)


__all__ = ["STEP_MS", "WorkerRunner", "report_error"]
