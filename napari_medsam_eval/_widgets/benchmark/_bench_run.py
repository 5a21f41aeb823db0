"""The Benchmark widget's actions and footer (Run / Cancel / Resume, progress, status) and the run they drive.

:class:`RunFooter` is the section that stays in view below the dock's scroll
area: the buttons, the progress bar and the status line. :class:`BenchmarkRun`
is the run itself: it asks :class:`._bench_settings.RunSettings` for the
request, runs :func:`~napari_medsam_eval.benchmark.gui_job.benchmark_job` in the
widget's run :class:`._worker.WorkerRunner` (which locks the settings and
moves the footer's bar) and shows what the job yields in
:class:`._bench_results.ResultsBrowser`: a :class:`Progress` with the rows of
each case done, and a :class:`~napari_medsam_eval.benchmark.case_progress.CaseStep`
after each slice of the running case (the bar moves per slice). Cancel sets
the job's cancel event: the run stops within a slice, the case running is
not recorded, and Resume redoes it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pandas as pd
from magicgui.widgets import Container, Label, ProgressBar, PushButton
from napari.utils.notifications import show_info

from napari_medsam_eval.benchmark import ROWS_FILE
from napari_medsam_eval.benchmark.config import RunConfig
from napari_medsam_eval.benchmark.gui_job import CaseStep, Progress, RunOutcome, benchmark_job
from napari_medsam_eval.benchmark.local_executor import worker_cap
from napari_medsam_eval._widgets.benchmark._bench_results import ResultsBrowser
from napari_medsam_eval._widgets.benchmark._bench_settings import RunSettings, path_of
from napari_medsam_eval._widgets.common._dock_layout import button_row
from napari_medsam_eval._widgets.common._status_text import wrap_status
from napari_medsam_eval._widgets.common._worker import WorkerRunner

#: progress-bar units per case: the bar moves with the slices of the running case
STEP_SCALE = 100


class RunFooter(Container):
    """Run / Cancel / Resume in a row, the progress bar and the status line (the dock's footer)."""

    def __init__(self) -> None:
        super().__init__(labels=True)
        self.margins = (0, 0, 0, 0)
        self.run_button = PushButton(text="Run", tooltip="start the run the settings describe")
        self.cancel_button = PushButton(text="Cancel", enabled=False, tooltip=(
            "stop the run within a slice; the rows of finished cases are kept, Resume redoes the case that was "
            "running"))
        self.resume_button = PushButton(text="Resume", tooltip="finish the run in the output folder: only the cases "
                                                               "it does not hold yet are run")
        self.buttons = button_row(self.run_button, self.cancel_button, self.resume_button)
        self.progress = ProgressBar(label="progress", min=0, max=1, value=0,
                                    tooltip="cases done, moving with the slices of the case running")
        self.status = Label(label="status", value="choose a dataset folder and an output folder")
        wrap_status(self.status)
        self.extend([self.buttons, self.progress, self.status])


class BenchmarkRun:
    """Run / cancel / resume the run ``settings`` describe in ``runner``; rows go to ``results``.

    ``on_rows(count)`` is called on the GUI thread with the number of rows shown whenever rows arrive.
    """

    def __init__(self, settings: RunSettings, results: ResultsBrowser, runner: WorkerRunner,
                 on_rows: Callable[[int], Any] = lambda _count: None) -> None:
        self.settings, self.browser, self.runner, self.on_rows = settings, results, runner, on_rows
        #: the last finished run's table (as ``run_benchmark`` returned it) and its status
        self.last_table: pd.DataFrame | None = None
        self.last_status: str | None = None
        #: the run's cases done / in the run, and where the running case is (None between cases)
        self.cases: tuple[int, int] = (0, 0)
        self.case_step: CaseStep | None = None
        #: the run's worker cap in words ("" when it gets the workers asked: :class:`~.local_executor.WorkerCap`)
        self.cap_words = ""
        settings.out_dir.changed.connect(self._on_out_dir)

    @property
    def busy(self) -> bool:
        return self.runner.busy

    def _on_out_dir(self, _value: Any = None) -> None:
        """Show the rows already in a chosen run folder (to browse an earlier run)."""
        out = path_of(self.settings.out_dir)
        if not self.busy and out is not None and (out / ROWS_FILE).is_file():
            self.browser.load_results_soon(out)
        else:  # a folder without rows: what an earlier choice was still reading is not shown either
            self.browser.forget_loading()

    def run(self, resume: bool = False) -> Any:
        """Start the run the settings describe (``resume``: continue the output folder's run).

        Returns the worker, or None when a run is going or the settings are refused.
        """
        if self.busy:
            return None
        try:
            request: RunConfig = self.settings.request(resume)
        except ValueError as error:
            return self.runner.error(str(error))
        if resume:
            self.browser.load_results(request.out_dir)
        else:
            self.browser.clear()
        self.browser.rows_dir = Path(request.out_dir)
        self.last_table, self.last_status = None, None
        self.cases, self.case_step = (0, 0), None
        # the workers this machine gives the run, said where fewer than asked (as the command says it)
        self.cap_words = worker_cap(request.workers).words if request.executor == "local" and request.workers > 1 \
            else ""
        return self.runner.start(
            benchmark_job, request, cancellable=True, steps=lambda _done, _total: self.progress_text(),
            text=f"{'resuming' if resume else 'starting'} {request.model} on {request.dataset.name} ..."
                 + (f" ({self.cap_words})" if self.cap_words else ""),
            yielded=self.on_progress, returned=self._on_returned, errored=self._on_error)

    def cancel(self) -> None:
        """Stop the run within a slice; the rows of finished cases are kept (Resume finishes the run)."""
        self.runner.cancel("cancelling: the case running is dropped (Resume redoes it) ...")

    def progress_text(self) -> str:
        """The status line of a running job: cases done, and where the running case is."""
        done, total = self.cases
        return (f"{done}/{total} cases" + ("" if self.case_step is None else f"; {self.case_step}")
                + (f" ({self.cap_words})" if self.cap_words else ""))

    def on_progress(self, step: Progress | CaseStep) -> None:
        """A step of the run: a slice of the running case (moves the bar), or a case done with its rows."""
        done, total = self.cases
        if isinstance(step, CaseStep):
            self.case_step = step
            self.runner.step(done * STEP_SCALE + int(step.fraction * STEP_SCALE), total * STEP_SCALE)
            return
        self.cases, self.case_step = (step.done, step.total), None
        self.runner.step(step.done * STEP_SCALE, step.total * STEP_SCALE)
        count = self.browser.add_rows(step.rows)  # the summary and plot follow within a second
        if step.rows:
            self.on_rows(count)

    def _on_returned(self, table: pd.DataFrame) -> None:
        self.browser.settle()  # the last rows' summary and plot: now, in a worker
        self.last_table = table
        outcome = RunOutcome.of(table, self.browser.rows_dir)
        self.last_status = outcome.status
        self.runner.status.value = str(outcome)
        if outcome.status == "cancelled":
            show_info(f"run cancelled after {outcome.cases} cases; press Resume to finish it")

    def _on_error(self, _error: BaseException) -> None:
        self.last_status = "failed"


__all__ = ["BenchmarkRun", "RunFooter", "STEP_SCALE"]
