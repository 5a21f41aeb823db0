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
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from magicgui.widgets import Label, ProgressBar, PushButton, Widget
from napari.qt.threading import create_worker
from napari.utils import progress as napari_progress
from napari.utils.notifications import show_error


def report_error(status: Label | None, message: str) -> None:
    """An error as a napari notification, its first line on the ``status`` label."""
    if status is not None:
        status.value = message.splitlines()[0][:200]
    show_error(message)


class WorkerRunner:
    """One worker at a time for a widget: busy controls, errors, progress, Cancel.

    ``controls`` are disabled while a job runs; ``cancel_button`` is enabled
    while a cancellable job runs; steps (:meth:`step`) go to ``status``, to
    ``progress_bar`` when given and to a napari progress bar when a job is
    started with ``progress=`` a description.
    """

    def __init__(self, status: Label, controls: Sequence[Widget] = (), cancel_button: PushButton | None = None,
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

    @property
    def busy(self) -> bool:
        return self.worker is not None

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
        self.cancel_event = threading.Event() if cancellable else None
        if cancellable:
            kwargs["cancel"] = self.cancel_event

        def failed(error: BaseException) -> None:
            if errored is not None:
                errored(error)
            self.error(f"{error_prefix}{type(error).__name__}: {error}")

        worker = create_worker(job, *args, _start_thread=False, _connect={"errored": failed}, **kwargs)
        if self.cancel_event is not None:
            worker.aborted.connect(self.cancel_event.set)  # napari's own cancel (worker.quit) stops the job too
        if progress is not None:
            self._pbar = napari_progress(total=0, desc=progress)
        if self.progress_bar is not None:
            self.progress_bar.value = 0
        if steps is not None:
            self._steps = steps
            yielded = yielded or (lambda step: self.step(*step))
        for name, callback in (("returned", returned), ("yielded", yielded), ("finished", self._finished),
                               ("finished", finished)):
            if callback is not None:  # (a FunctionWorker has no ``yielded``)
                getattr(worker, name).connect(callback)
        self.worker = worker
        self._set_busy(True, text)
        worker.start()
        if total is not None:
            self.step(0, total)
        return worker

    def step(self, done: int, total: int) -> None:
        """Show a step of the running job: its text on the status line (unless cancelling), the bars."""
        if self.worker is None:  # a step delivered after the run ended
            return
        if not self.cancelling:
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
        self.status.value = text

    def stop(self) -> None:
        """Set the running job's cancel event without touching the UI (the widget is going away)."""
        if self.cancel_event is not None:
            self.cancel_event.set()

    def _set_busy(self, busy: bool, text: str | None = None) -> None:
        for widget in self.controls:
            widget.enabled = not busy
        if self.cancel_button is not None:
            self.cancel_button.enabled = busy and self.cancel_event is not None
        if text is not None:
            self.status.value = text

    def _finished(self) -> None:
        self.worker = self.cancel_event = None
        if self._pbar is not None:
            self._pbar.close()
            self._pbar = None
        self._set_busy(False)


__all__ = ["WorkerRunner", "report_error"]
