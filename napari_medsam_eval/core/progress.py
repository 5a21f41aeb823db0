"""Progress and cancellation: the two callback types, and the one bridge from a callback to a generator.

The core reports progress through plain callbacks (micro-sam's way): a
long function calls ``progress(...)`` as it goes, and a callback that returns
``False`` asks it to stop. Two shapes exist, with two names:

* :data:`SliceProgress` ``(done, total)`` - slices/frames of one propagation
  (:mod:`napari_medsam_eval.propagation`, the model backends, the session);
* :data:`CaseProgress` ``(done, total, rows)`` - cases of a benchmark run, with
  the rows of the case just finished (:func:`napari_medsam_eval.benchmark.run_benchmark`
  calls it once before the first case with ``rows`` empty and ``done`` the
  cases a resumed folder already holds).

A GUI worker (napari's ``thread_worker``) wants a generator instead: it
yields progress to the GUI thread and can be aborted. :func:`iterate_progress`
is that bridge, used by :meth:`napari_medsam_eval.session.session.Session.iter_propagate`
and the Benchmark widget alike: the job runs in a helper thread, each callback
call becomes one yielded value, and the job's return value (or exception)
comes out of the generator.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Generator, TypeVar

#: ``(slices done, slices in the run)``; returning False (or raising) cancels the work
SliceProgress = Callable[[int, int], "bool | None"]
#: ``(cases done, cases in the run, that case's rows)``; returning False stops the run after that case
CaseProgress = Callable[[int, int, list[dict[str, Any]]], "bool | None"]

T = TypeVar("T")
_DONE = object()


#: seconds a closed :func:`iterate_progress` waits for its job to stop (it stops at its next report)
STOP_WAIT_S = 120.0


def until_cancelled(progress: Callable[..., "bool | None"] | None,
                    cancel: threading.Event | None) -> Callable[..., bool] | None:
    """``progress`` (any report: ``(done, total)``, a :class:`~..benchmark.case_progress.CaseStep`, ...) that also
    answers False (stop) once ``cancel`` is set; None when both are None."""
    if progress is None and cancel is None:
        return None

    def callback(*report: Any) -> bool:
        if progress is not None and progress(*report) is False:
            return False
        return cancel is None or not cancel.is_set()
    return callback


def iterate_progress(
    job: Callable[[Callable[..., bool]], T],
    cancel: threading.Event,
    *,
    convert: Callable[..., Any] = lambda *args: args,
    name: str = "medsam-eval-job",
) -> Generator[Any, None, T]:
    """Run ``job(callback)`` in a helper thread, yielding ``convert(*args)`` for every ``callback(*args)``.

    The callback answers ``False`` (stop) once ``cancel`` is set, so the job
    stops at its next progress report. Returns what ``job`` returned
    (``result = yield from iterate_progress(...)``) and re-raises what it
    raised. Closing the generator early (a GUI aborting its worker, or closing
    its window) sets ``cancel`` and waits, up to :data:`STOP_WAIT_S`, for the job
    to end at its next report: a job cut off by the process ending could leave
    a file half-written.
    """
    events: queue.Queue = queue.Queue()
    outcome: dict[str, Any] = {}

    def callback(*args: Any) -> bool:
        events.put(args)
        return not cancel.is_set()

    def target() -> None:
        try:
            outcome["result"] = job(callback)
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, raised there
            outcome["error"] = error
        finally:
            events.put(_DONE)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    finished = False
    try:
        while (args := events.get()) is not _DONE:
            yield convert(*args)
        finished = True
    finally:
        if not finished:  # closed early: ask the job to stop, and let it finish its running step
            cancel.set()
            thread.join(STOP_WAIT_S)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


class ProgressBar:
    """A callback that draws tqdm's bar (``tqdm.auto``: a widget in a notebook, text on stderr elsewhere): what
    ``progress=True`` means in the Python API. It takes either report, ``(done, total)`` or
    ``(done, total, rows)``, never asks to stop, and is closed by :meth:`close` (or a ``with`` block).

    Example::

        with ProgressBar("cases", "case") as bar:
            run_benchmark(config, progress=bar)
    """

    def __init__(self, description: str, unit: str = "it") -> None:
        self.description = description
        self.unit = unit
        self._bar: Any = None

    def __call__(self, done: int, total: int, *_rest: Any) -> None:
        if self._bar is None:
            import warnings

            with warnings.catch_warnings():  # a notebook without ipywidgets: the text bar, without tqdm's warning
                warnings.filterwarnings("ignore", message="IProgress not found")
                from tqdm.auto import tqdm
            self._bar = tqdm(total=int(total), desc=self.description, unit=self.unit, leave=True)
        if self._bar.total != int(total):
            self._bar.total = int(total)
            self._bar.refresh()
        if int(done) != self._bar.n:
            self._bar.update(int(done) - self._bar.n)  # tqdm's own pace: no line per slice on a terminal

    def close(self) -> None:
        """End the bar (a no-op when nothing was reported)."""
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()


def progress_callback(progress: Any, description: str, unit: str) -> tuple[Any, ProgressBar | None]:
    """``progress`` as the API takes it: ``True`` a new :class:`ProgressBar` (also returned, to be closed),
    ``False``/``None`` no callback, a callable itself."""
    if progress is True:
        bar = ProgressBar(description, unit)
        return bar, bar
    if progress is None or progress is False:
        return None, None
    if not callable(progress):
        from .errors import InputTypeError

        raise InputTypeError(f"progress takes True (a progress bar), a callback or None; got {progress!r}")
    return progress, None


__all__ = ["CaseProgress", "ProgressBar", "SliceProgress", "iterate_progress", "progress_callback"]
