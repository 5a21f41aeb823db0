"""The Benchmark dock widget: run a dataset through a model, watch the rows arrive, open a case.

A thin shell around :func:`napari_medsam_eval.benchmark.run_benchmark`, the
function ``medsam-eval run`` calls: the widget only gathers its arguments
(a :class:`~napari_medsam_eval.benchmark.request.RunRequest`), runs
:func:`~napari_medsam_eval.benchmark.request.benchmark_job` in a napari generator
worker (:class:`._worker.WorkerRunner`) and shows the rows it reports. The
runner reports through a plain callback (``progress(done, total, rows)``,
returning False to stop), so the job runs it in a helper thread and turns
the callback's calls into yielded values; Cancel makes the callback answer
False, and the runner stops after the case(s) running then. Every layer
change happens in the worker's yielded/returned callbacks on the GUI
thread; errors become napari notifications and the status line.

The results view (table, per-task summary, box plot) is
:class:`._results_table.ResultsView`; below it, for a ``corrections`` run, the
DSC-vs-interactions curve of the selected task (:class:`._effort_plot.EffortPlot`,
hidden for other runs); opening a row in the viewer is :mod:`._run_case`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from magicgui.widgets import CheckBox, ComboBox, Container, FileEdit, Label, ProgressBar, PushButton, SpinBox
from napari.utils.notifications import show_info, show_warning
from psygnal import Signal

from ..benchmark import ROWS_FILE, ResultStore
from ..datasets import available_layouts
from ..models import BACKENDS, DEFAULT_BACKEND
from ..protocols import PROTOCOLS
from ..benchmark.request import NEEDS_CHECKPOINT, Progress, RunOutcome, RunRequest, benchmark_job
from . import _run_case
from ._effort_plot import EffortPlot
from ._layers import follow_viewer
from ._results_table import ResultsView
from ._theme import theme_colors
from ._worker import WorkerRunner

if TYPE_CHECKING:
    import napari

AUTO_LAYOUT = "auto-detect"
#: models offered, in this order; the first four are promptable models, the last two baselines
MODEL_CHOICES = [name for name in ("litemedsam", "medsam2", "sam2", "sam", "box", "oracle") if name in BACKENDS]


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
        self.viewer = napari_viewer
        #: the last finished run's table (as ``run_benchmark`` returned it) and its status
        self.last_table: pd.DataFrame | None = None
        self.last_status: str | None = None
        #: layers of the last row opened, by role
        self.opened: dict[str, Any] = {}
        #: the run folder whose rows the table shows (rows open from there)
        self.rows_dir: Path | None = None

        self.dataset = FileEdit(label="dataset", mode="d", nullable=True, value=None)
        self.layout_choice = ComboBox(label="layout", choices=[AUTO_LAYOUT, *available_layouts()], value=AUTO_LAYOUT)
        self.model = ComboBox(label="model", choices=MODEL_CHOICES, value=DEFAULT_BACKEND)
        self.checkpoint = FileEdit(label="checkpoint", mode="r", nullable=True, value=None, visible=False)
        self.protocol = ComboBox(label="protocol", choices=sorted(PROTOCOLS), value="medsam2")
        self.limit = SpinBox(label="limit (0 = all)", min=0, max=1_000_000, value=0)
        self.workers = SpinBox(label="workers", min=1, max=max(1, os.cpu_count() or 1), value=1)
        self.save_predictions = CheckBox(text="save predictions (to open cases)", value=True)
        self.out_dir = FileEdit(label="output", mode="d", nullable=True, value=None)
        self.run_button = PushButton(text="Run")
        self.cancel_button = PushButton(text="Cancel", enabled=False)
        self.resume_button = PushButton(text="Resume")
        buttons = Container(layout="horizontal", labels=False, widgets=[self.run_button, self.cancel_button,
                                                                      self.resume_button])
        buttons.margins = (0, 0, 0, 0)
        self.progress = ProgressBar(label="progress", min=0, max=1, value=0)
        self.status = Label(label="status", value="choose a dataset folder and an output folder")
        inputs = [self.dataset, self.layout_choice, self.model, self.checkpoint, self.protocol, self.limit,
                  self.workers, self.save_predictions, self.out_dir]
        self.extend([*inputs, buttons, self.progress, self.status])
        #: the run's worker (busy inputs, Cancel, progress) and the worker opening a row
        self.runner = WorkerRunner(self.status, [*inputs, self.run_button, self.resume_button], self.cancel_button,
                                   self.progress)
        self.opener = WorkerRunner(self.status)

        self.results = ResultsView(on_open=self.open_row, colors=theme_colors(napari_viewer))
        self.native.layout().addWidget(self.results)
        self.effort = EffortPlot(colors=theme_colors(napari_viewer))  # shown for runs with DSC curves only
        self.native.layout().addWidget(self.effort)
        self.effort.follow(self.results)

        self.model.changed.connect(lambda value: setattr(self.checkpoint, "visible", value in NEEDS_CHECKPOINT))
        self.out_dir.changed.connect(self._on_out_dir)
        self.run_button.changed.connect(lambda: self.run())
        self.resume_button.changed.connect(lambda: self.run(resume=True))
        self.cancel_button.changed.connect(lambda: self.cancel())
        follow_viewer(self, [], on_close=self.runner.stop)  # a closed widget stops its run

    @property
    def busy(self) -> bool:
        return self.runner.busy

    def _on_out_dir(self, _value: Any = None) -> None:
        """Show the rows already in a chosen run folder (to browse an earlier run)."""
        out = _path(self.out_dir)
        if not self.busy and out is not None and (out / ROWS_FILE).is_file():
            self.load_results(out)

    # -- run ----------------------------------------------------------------------

    def request(self, resume: bool = False) -> RunRequest:
        """The run the controls describe; ValueError naming what is missing or wrong."""
        layout = None if self.layout_choice.value == AUTO_LAYOUT else self.layout_choice.value
        return RunRequest.checked(_path(self.dataset), _path(self.out_dir), self.model.value, self.protocol.value,
                                  checkpoint=_path(self.checkpoint), resume=resume, layout=layout,
                                  limit=int(self.limit.value) or None, workers=int(self.workers.value),
                                  save_predictions=bool(self.save_predictions.value))

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
        return self.runner.start(
            benchmark_job, request, cancellable=True, steps=lambda done, total: f"{done}/{total} cases",
            text=f"{'resuming' if resume else 'starting'} {request.model} on {request.dataset.name} ...",
            yielded=self._on_progress, returned=self._on_returned, errored=self._on_error)

    def cancel(self) -> None:
        """Stop the run after the case(s) running now; their rows are kept (Resume finishes the run)."""
        self.runner.cancel("cancelling after the running case ...")

    def _on_progress(self, step: Progress) -> None:
        self.runner.step(step.done, step.total)
        self.results.add_rows(step.rows)
        if step.rows:
            self.effort.set_rows(self.results.rows)
            self.rows_added.emit(len(self.results.rows))

    def _on_returned(self, table: pd.DataFrame) -> None:
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
        """Open ``row``'s case in the viewer (off-thread): image, ground truth, prediction, prompt."""
        if self.rows_dir is None:
            return self.runner.error("no run folder to open the case from")
        return self.opener.start(_run_case.load_run_case, self.rows_dir, row, text=f"opening {row.get('case_id')} ...",
                                 returned=self._show_case, error_prefix="cannot open the case: ")

    def _show_case(self, loaded: _run_case.RunCase) -> None:
        self.opened = _run_case.show_run_case(self.viewer, loaded)  # the Compare widget picks these up by itself
        where = "" if loaded.prompt is None else f", prompt on slice {loaded.prompt.slice_index}"
        self.status.value = f"opened {loaded.case.case_id} ({loaded.row.get('label_name')}{where})"
        if loaded.note:
            show_warning(f"{loaded.case.case_id}: {loaded.note}")


__all__ = ["BenchmarkWidget", "Progress", "RunRequest", "benchmark_job"]
