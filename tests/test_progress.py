"""iterate_progress: a job in a helper thread, its reports yielded; closing early stops it cleanly (core)."""
from __future__ import annotations

import threading
import time

from napari_medsam_eval.core.progress import iterate_progress


def test_yields_every_report_and_returns_the_result():
    def job(report):
        for i in range(3):
            report(i, 3)
        return "done"
    steps = iterate_progress(job, threading.Event())
    seen = []
    try:
        while True:
            seen.append(next(steps))
    except StopIteration as stop:
        assert stop.value == "done"
    assert seen == [(0, 3), (1, 3), (2, 3)]


def test_closing_early_cancels_and_waits_for_the_running_step():
    """A window closed during a run: the job is asked to stop and ends its running step (writing its files)
    before close() returns, so the process can end without cutting a write in half."""
    cancel, ended = threading.Event(), threading.Event()

    def job(report):
        try:
            step = 0
            while report(step):
                step += 1
                time.sleep(0.05)  # a slice
            time.sleep(0.3)  # the files written after the last step
        finally:
            ended.set()
    steps = iterate_progress(job, cancel)
    next(steps)
    next(steps)
    steps.close()
    assert cancel.is_set() and ended.is_set()
