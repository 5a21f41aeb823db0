"""The Benchmark dock widget: run a dataset through a model, watch the rows arrive, open a case.

A thin shell around :func:`napari_medsam_eval.benchmark.run_benchmark`, the
function ``medsam-eval run`` calls: the widget only gathers its arguments
(a :class:`~napari_medsam_eval.benchmark.config.RunConfig`), runs
:func:`~napari_medsam_eval.benchmark.gui_job.benchmark_job` in a napari generator
worker (:class:`._worker.WorkerRunner`) and shows what it yields: a
:class:`Progress` with the rows of each case done, and a
:class:`~napari_medsam_eval.benchmark.case_progress.CaseStep` after each slice of the
running case (the progress bar moves per slice). Cancel sets the job's cancel
event, which the runner passes into the case's propagation: the run stops
within a slice, the case running is not recorded, and Resume redoes it.
Every layer change happens in the worker's callbacks on the GUI thread;
errors become napari notifications and the status line.

The results view (table, per-task summary, box plot) is
:class:`._results_table.ResultsView`; below it, for a ``corrections`` run, the
DSC-vs-interactions curve of the selected task (:class:`._effort_plot.EffortPlot`,
hidden for other runs); opening a row in the viewer is :mod:`._open_row`
(read in the worker, layers added one per turn of the event loop), and
:data:`NEXT_ROW_KEY` opens the next line of the table. The whole dock
scrolls (:mod:`._dock_layout`), so it fits a 1000 px screen beside the Compare widget.
At its end, two run folders side by side (run A vs run B): :class:`._two_runs.TwoRunsWidget`.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from magicgui.widgets import Container, FileEdit
from napari.utils.notifications import show_info, show_warning
from psygnal import Signal
from qtpy.QtCore import Qt, QTimer
from qtpy.QtGui import QKeySequence
from qtpy.QtWidgets import QShortcut

from ..benchmark import ROWS_FILE, ResultStore
from ..benchmark.config import RunConfig
from ..benchmark.gui_job import NEEDS_CHECKPOINT, CaseStep, Progress, RunOutcome, benchmark_job, checked_request
from . import _open_row
from ..core.options import json_object
from ._bench_controls import AUTO_LAYOUT, add_run_controls, propagation_choice
from ._dock_layout import fit_in_dock
from ._effort_plot import EffortPlot
from ._layers import follow_viewer
from ._results_table import ResultsView
from ._shortcuts import BENCHMARK_SHORTCUTS, key_text
from ._theme import theme_colors
from ._two_runs import TwoRunsWidget
from ._worker import WorkerRunner
from ._viewer import real_viewer

if TYPE_CHECKING:
    import napari

#: the key that opens the next line of the results table (anywhere in the viewer window)
NEXT_ROW_KEY = key_text(BENCHMARK_SHORTCUTS["next_row"])  # Qt writes keys as people do
#: progress-bar units per case: the bar moves with the slices of the running case
STEP_SCALE = 100


def _path(widget: FileEdit) -> Path | None:
    value = widget.value
    if value is None or str(value) in ("", "."):
        return None
    return Path(value).expanduser()


class BenchmarkWidget(Container):
    """Run / cancel / resume a benchmark on a dataset folder; results table, summary and box plot."""

    #: emitted on the GUI thread with the number of rows shown, whenever rows arrive
    rows_added = Signal(int)

    def __init__(self, napari_viewer: "napari.viewer.Viewer") -> None:
        super().__init__(labels=True)
        self.viewer = napari_viewer = real_viewer(napari_viewer)  # not napari's proxy (._viewer)
        #: the last finished run's table (as ``run_benchmark`` returned it) and its status
        self.last_table: pd.DataFrame | None = None
        self.last_status: str | None = None
        #: layers of the last row opened, by role
        self.opened: dict[str, Any] = {}
        #: the run folder whose rows the table shows (rows open from there)
        self.rows_dir: Path | None = None

        #: the run's cases done / in the run, and where the running case is (None between cases)
        self._cases: tuple[int, int] = (0, 0)
        self._case_step: CaseStep | None = None

        inputs, buttons = add_run_controls(self)
        self.extend([*inputs, buttons, self.progress, self.status])
        #: the run's worker (busy inputs, Cancel, progress) and the worker opening a row
        self.runner = WorkerRunner(self.status, [*inputs, self.run_button, self.resume_button], self.cancel_button,
                                   self.progress)
        self.opener = WorkerRunner(self.status)

        self.results = ResultsView(on_open=self.open_row, colors=theme_colors(napari_viewer),
                                   open_hint=f"; {NEXT_ROW_KEY} opens the next line")
        self.native.layout().addWidget(self.results)
        self.effort = EffortPlot(colors=theme_colors(napari_viewer))  # shown for runs with DSC curves only
        self.native.layout().addWidget(self.effort)
        self.effort.follow(self.results)
        self.two_runs = TwoRunsWidget(napari_viewer)  # run A vs run B: a section of its own
        self.native.layout().addWidget(self.two_runs.native)

        self.model.changed.connect(lambda value: setattr(self.checkpoint, "visible", value in NEEDS_CHECKPOINT))
        self.out_dir.changed.connect(self._on_out_dir)
        self.run_button.changed.connect(lambda: self.run())
        self.resume_button.changed.connect(lambda: self.run(resume=True))
        self.cancel_button.changed.connect(lambda: self.cancel())
        self.next_row_shortcut = QShortcut(QKeySequence(NEXT_ROW_KEY), self.native)
        self.next_row_shortcut.setContext(Qt.WindowShortcut)  # anywhere in the viewer's window
        self.next_row_shortcut.activated.connect(self.next_row)
        follow_viewer(self, [], on_close=self._close)  # a closed widget ends its jobs
        fit_in_dock(self, footer=[buttons, self.progress, self.status])  # Run/Cancel/Resume always in view

    def _close(self) -> None:
        """The Qt widget is gone: cancel the run (its finished cases stay stored), end every job."""
        for runner in (self.runner, self.opener, self.two_runs.loader, self.two_runs.opener):
            runner.close()

    @property
    def busy(self) -> bool:
        return self.runner.busy

    def _on_out_dir(self, _value: Any = None) -> None:
        """Show the rows already in a chosen run folder (to browse an earlier run)."""
        out = _path(self.out_dir)
        if not self.busy and out is not None and (out / ROWS_FILE).is_file():
            self.load_results(out)

    # -- run ----------------------------------------------------------------------

    def request(self, resume: bool = False) -> RunConfig:
        """The run the controls describe; ValueError naming what is missing or wrong."""
        layout = None if self.layout_choice.value == AUTO_LAYOUT else self.layout_choice.value
        return checked_request(_path(self.dataset), _path(self.out_dir), self.model.value, self.protocol.value,
                               checkpoint=_path(self.checkpoint), resume=resume, layout=layout,
                               precision=self.precision.value if self.model.value == "litemedsam" else "fp32",
                               limit=int(self.limit.value) or None, workers=int(self.workers.value),
                               save_predictions=bool(self.save_predictions.value),
                               protocol_options=json_object(self.protocol_options.value, "protocol options"),
                               propagation=propagation_choice(self.propagation.value,
                                                              int(self.propagation_margin.value)),
                               seed=int(self.seed.value), executor=self.executor.value,
                               ray_address=self.ray_address.value)

    def run(self, resume: bool = False) -> Any:
        """Start the run the controls describe (``resume``: continue the output folder's run).

        Returns the worker, or None when a run is going or the settings are refused.
        """
        if self.busy:
            return None
        try:
            request = self.request(resume)
        except ValueError as error:
            return self.runner.error(str(error))
        if resume:
            self.load_results(request.out_dir)
        else:
            self.results.clear()
            self.effort.set_rows([])
        self.rows_dir = request.out_dir
        self.last_table, self.last_status = None, None
        self._cases, self._case_step = (0, 0), None
        return self.runner.start(
            benchmark_job, request, cancellable=True, steps=lambda _done, _total: self.progress_text(),
            text=f"{'resuming' if resume else 'starting'} {request.model} on {request.dataset.name} ...",
            yielded=self._on_progress, returned=self._on_returned, errored=self._on_error)

    def cancel(self) -> None:
        """Stop the run within a slice; the rows of finished cases are kept (Resume finishes the run)."""
        self.runner.cancel("cancelling: the case running is dropped (Resume redoes it) ...")

    def progress_text(self) -> str:
        """The status line of a running job: cases done, and where the running case is."""
        done, total = self._cases
        return f"{done}/{total} cases" + ("" if self._case_step is None else f"; {self._case_step}")

    def _on_progress(self, step: Progress | CaseStep) -> None:
        """A step of the run: a slice of the running case (moves the bar), or a case done with its rows."""
        done, total = self._cases
        if isinstance(step, CaseStep):
            self._case_step = step
            self.runner.step(done * STEP_SCALE + int(step.fraction * STEP_SCALE), total * STEP_SCALE)
            return
        self._cases, self._case_step = (step.done, step.total), None
        self.runner.step(step.done * STEP_SCALE, step.total * STEP_SCALE)
        self.results.add_rows(step.rows, later=True)  # the summary and plot follow within a second
        if step.rows:
            self.effort.set_rows(self.results.rows)
            self.rows_added.emit(len(self.results.rows))

    def _on_returned(self, table: pd.DataFrame) -> None:
        if self.results.pending:  # the last rows' summary and plot: now, in a helper thread
            self.results.refresh_soon()
        self.last_table = table
        outcome = RunOutcome.of(table, self.rows_dir)
        self.last_status = outcome.status
        self.status.value = str(outcome)
        if outcome.status == "cancelled":
            show_info(f"run cancelled after {outcome.cases} cases; press Resume to finish it")

    def _on_error(self, _error: BaseException) -> None:
        self.last_status = "failed"

    # -- results ------------------------------------------------------------------

    def load_results(self, out_dir: str | Path) -> int:
        """Show the rows already in the run folder ``out_dir``; returns how many."""
        try:
            rows = ResultStore(out_dir).recover(truncate=False)
        except Exception as error:  # noqa: BLE001 - a damaged file is reported, not raised into Qt
            self.runner.error(f"cannot read the results in {out_dir}: {error}")
            return 0
        self.results.set_rows(rows)
        self.effort.set_rows(self.results.rows)
        self.rows_dir = Path(out_dir)
        self.status.value = f"{len(rows)} rows in {Path(out_dir).name}"
        return len(rows)

    def open_row(self, row: dict[str, Any]) -> Any:
        """Open ``row``'s case in the viewer: read in a worker, then image, ground truth, prediction and
        prompt, one layer per turn of the event loop (replacing the last row's). Returns the worker (None
        while another row is opening)."""
        if self.rows_dir is None:
            return self.runner.error("no run folder to open the case from")
        if self.opener.busy:  # two rows opening at once would interleave their layers
            return None
        ack, shown = threading.Event(), {}

        def step(item: _open_row.OpenStep) -> None:
            try:
                _open_row.apply_step(self.viewer, item, shown)
            finally:  # the job yields the next layer once the event loop has run a little (a repaint)
                QTimer.singleShot(_open_row.STEP_PAUSE_MS, ack.set)
        return self.opener.start(_open_row.open_job, self.rows_dir, row, ack, text=f"opening {row.get('case_id')} ...",
                                 yielded=step, returned=lambda loaded: self._show_case(loaded, shown),
                                 error_prefix="cannot open the case: ")

    def next_row(self) -> Any:
        """Open the table line below the selected one (:data:`NEXT_ROW_KEY`); returns its row."""
        return None if self.opener.busy else self.results.next_line()  # (not while a row opens)

    def _show_case(self, loaded: _open_row.RunCase, shown: dict[str, Any]) -> None:
        self.opened = _open_row.finish_open(self.viewer, loaded, shown)  # the Compare widget picks these up itself
        where = "" if loaded.prompt is None else f", prompt on slice {loaded.prompt.slice_index}"
        self.status.value = f"opened {loaded.case.case_id} ({loaded.row.get('label_name')}{where})"
        if loaded.note:
            show_warning(f"{loaded.case.case_id}: {loaded.note}")


__all__ = ["BenchmarkWidget", "CaseStep", "NEXT_ROW_KEY", "Progress", "RunConfig", "benchmark_job"]
