"""The life of one worker job, as :class:`._worker.WorkerRunner` starts and closes it.

:func:`tracked` wraps a job so that it reports, on the worker's thread, when it starts,
runs, waits at a ``yield`` and ends (:class:`Job`); :func:`end_job` waits for a closed
runner's job to end, skipping one that never started and closing a generator its worker
stopped driving (napari aborts every worker when the application quits, leaving generators
suspended); :func:`room_in_the_pool` keeps Qt's global thread pool from filling up with
workers (Qt needs a free thread there while it repaints).
"""
from __future__ import annotations

import inspect
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

#: seconds a closed runner waits for its jobs to end (a cancelled job ends within a slice)
CLOSE_WAIT_S = 120.0


@dataclass
class Job:
    """One started job's state, set by the job itself (:func:`tracked`) on the worker's thread."""

    name: str
    cancel: threading.Event | None
    started: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    #: a generator job: set while it runs, clear while it waits at a ``yield`` for the worker to go on
    active: threading.Event = field(default_factory=threading.Event)
    #: set by :meth:`WorkerRunner.close` for a job not started yet: it then returns at once
    skip: bool = False
    #: a generator job's own generator (closed by :func:`end_job` when its worker stopped driving it)
    generator: Any = None


def tracked(job: Callable[..., Any], state: Job) -> Callable[..., Any]:
    """``job`` that reports into ``state`` when it starts, runs, waits at a yield and ends (however it
    ends); a generator function stays one. A job its runner closed before it started does nothing."""
    if inspect.isgeneratorfunction(job):
        def generator(*args: Any, **kwargs: Any) -> Any:
            state.started.set()
            state.active.set()
            inner = None
            try:
                if state.skip:
                    return None
                inner = state.generator = job(*args, **kwargs)
                value = next(inner)
                while True:
                    state.active.clear()
                    sent = yield value
                    state.active.set()
                    value = inner.send(sent)
            except StopIteration as stop:
                return stop.value
            finally:
                if inner is not None:
                    inner.close()  # a job closed at a yield runs its own clean-up
                state.active.clear()
                state.done.set()
        return generator

    def function(*args: Any, **kwargs: Any) -> Any:
        state.started.set()
        state.active.set()
        try:
            return None if state.skip else job(*args, **kwargs)
        finally:
            state.active.clear()
            state.done.set()
    return function


def end_job(state: Job, deadline: float) -> None:
    """Wait for a closed runner's job to end, until ``deadline``: one that never started does nothing
    when it starts; a generator left waiting at a yield (its worker stopped driving it) is closed."""
    while not state.done.is_set() and time.monotonic() < deadline:
        if not state.started.is_set():
            return  # queued (napari starts a worker on the next turn of the event loop): it will skip
        if state.done.wait(0.5):
            return
        if state.generator is not None and not state.active.is_set():
            time.sleep(0.5)
            if not state.active.is_set() and not state.done.is_set():
                try:
                    state.generator.close()  # the job's own clean-up runs (its finally blocks)
                except ValueError:  # it is running again after all
                    continue
                state.done.set()
                print(f"medsam-eval: closed the job {state.name}, which its worker had stopped driving",
                      file=sys.stderr)
                return
    if not state.done.is_set():
        print(f"medsam-eval: gave up waiting for the job {state.name} to end", file=sys.stderr)


def room_in_the_pool() -> None:
    """Keep threads free in Qt's global thread pool beside the workers running there.

    napari's workers run in ``QThreadPool.globalInstance()``, whose size is the number of CPU cores
    (2 on a small machine). Qt uses the same pool on the GUI thread, for example to convert a large
    image while it repaints, and waits for those tasks while holding Python's GIL. With every pool
    thread taken by workers that need the GIL, those tasks never run and the viewer hangs (seen: a
    slice segmented while its prompt-log row was computed). So the pool always keeps as many threads
    free as the machine has cores.
    """
    from qtpy.QtCore import QThread, QThreadPool

    pool = QThreadPool.globalInstance()
    wanted = pool.activeThreadCount() + 1 + max(2, QThread.idealThreadCount())
    if pool.maxThreadCount() < wanted:
        pool.setMaxThreadCount(wanted)


__all__ = ["CLOSE_WAIT_S", "Job", "end_job", "room_in_the_pool", "tracked"]
