"""The Benchmark dock widget: run a dataset through a model, watch the rows arrive, open a case.

A thin shell around :func:`napari_medsam_eval.benchmark.run_benchmark`, the
function ``medsam-eval run`` calls: the widget only gathers its arguments,
runs it in a napari generator worker and shows the rows it reports. The
runner reports through a plain callback (``progress(done, total, rows)``,
returning False to stop), so the worker runs it in a helper thread and
turns the callback's calls into yielded values; Cancel makes the callback
answer False, and the runner stops after the case(s) running then. Every
layer change happens in the worker's yielded/returned callbacks on the GUI
thread; errors become napari notifications and the status line.

The results view (table, per-task summary, box plot) is
:class:`._results_table.ResultsView`; opening a row in the viewer is
:mod:`._run_case`.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generator

import pandas as pd
from magicgui.widgets import CheckBox, ComboBox, Container, FileEdit, Label, ProgressBar, PushButton, SpinBox
from napari.qt.threading import create_worker
from napari.utils.notifications import show_error, show_info, show_warning
from psygnal import Signal

from ..benchmark import ROWS_FILE, ResultStore, read_manifest, run_benchmark
from ..datasets import available_layouts
from ..models import BACKENDS, DEFAULT_BACKEND
from ..progress import iterate_progress
from ..protocols import PROTOCOLS
from . import _run_case
from ._results_table import ResultsView
from .compare import _theme_colors

if TYPE_CHECKING:
    import napari

AUTO_LAYOUT = "auto-detect"
#: models offered, in this order; the first four are promptable models, the last two baselines
MODEL_CHOICES = [name for name in ("litemedsam", "medsam2", "sam2", "sam", "box", "oracle") if name in BACKENDS]
#: models without shipped weights
NEEDS_CHECKPOINT = ("medsam2", "sam2", "sam")


@dataclass(frozen=True)
class RunRequest:
    """The arguments of one :func:`run_benchmark` call, as the widget's controls give them."""

    dataset: Path
    out_dir: Path
    model: str
    protocol: str
    layout: str | None = None
    limit: int | None = None
    workers: int = 1
    resume: bool = False
    save_predictions: bool = True
    model_options: dict[str, Any] = field(default_factory=dict)

    def kwargs(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "out_dir": self.out_dir, "model": self.model, "protocol": self.protocol,
                "layout": self.layout, "limit": self.limit, "workers": self.workers, "resume": self.resume,
                "save_predictions": self.save_predictions, "model_options": dict(self.model_options)}


@dataclass(frozen=True)
class Progress:
    """One step of a run: ``done`` of ``total`` cases, with the rows of the case just finished."""

    done: int
    total: int
    rows: list[dict[str, Any]]


def benchmark_job(request: RunRequest, cancel: threading.Event) -> Generator[Progress, None, pd.DataFrame]:
    """Generator for a napari GeneratorWorker: yields :class:`Progress`, returns the run's table.

    ``run_benchmark`` runs in a helper thread; its progress callback queues
    each case's rows for this generator to yield and answers False (stop)
    once ``cancel`` is set. Closing the generator (napari's own abort) sets
    ``cancel`` too. The runner's first report, before any case runs, gives
    the cases already done (a resumed run) and the cases of the run.
    """
    return (yield from iterate_progress(lambda progress: run_benchmark(**request.kwargs(), progress=progress),
                                        cancel, convert=Progress, name="medsam-eval-benchmark"))


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
        self._worker: Any = None
        self._open_worker: Any = None
        self._cancel: threading.Event | None = None
        self._request: RunRequest | None = None
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
        self.extend([self.dataset, self.layout_choice, self.model, self.checkpoint, self.protocol, self.limit,
                     self.workers, self.save_predictions, self.out_dir, buttons, self.progress, self.status])
        self._inputs = [self.dataset, self.layout_choice, self.model, self.checkpoint, self.protocol, self.limit,
                        self.workers, self.save_predictions, self.out_dir, self.run_button, self.resume_button]

        self.results = ResultsView(on_open=self.open_row, colors=_theme_colors(napari_viewer))
        self.native.layout().addWidget(self.results)

        self.model.changed.connect(self._on_model)
        self.out_dir.changed.connect(self._on_out_dir)
        self.run_button.changed.connect(lambda: self.run())
        self.resume_button.changed.connect(lambda: self.run(resume=True))
        self.cancel_button.changed.connect(lambda: self.cancel())
        self.native.destroyed.connect(self._on_destroyed)

    # -- state --------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._worker is not None

    def _set_busy(self, busy: bool) -> None:
        for widget in self._inputs:
            widget.enabled = not busy
        self.cancel_button.enabled = busy

    def _error(self, message: str) -> None:
        self.status.value = message.splitlines()[0][:200]
        show_error(message)

    def _on_model(self, value: str) -> None:
        self.checkpoint.visible = value in NEEDS_CHECKPOINT

    def _on_out_dir(self, _value: Any = None) -> None:
        """Show the rows already in a chosen run folder (to browse an earlier run)."""
        out = _path(self.out_dir)
        if not self.busy and out is not None and (out / ROWS_FILE).is_file():
            self.load_results(out)

    def _on_destroyed(self, *_args: Any) -> None:
        if self._cancel is not None:
            self._cancel.set()

    # -- run ----------------------------------------------------------------------

    def request(self, resume: bool = False) -> RunRequest:
        """The run the controls describe; ValueError naming what is missing or wrong."""
        dataset, out = _path(self.dataset), _path(self.out_dir)
        if dataset is None:
            raise ValueError("choose a dataset folder")
        if not dataset.is_dir():
            raise ValueError(f"dataset folder not found: {dataset}")
        if out is None:
            raise ValueError("choose an output folder for the run")
        if out.exists() and not out.is_dir():
            raise ValueError(f"the output path is a file, not a folder: {out}")
        if not resume and out.is_dir() and any(out.iterdir()):
            raise ValueError(f"the output folder {out} is not empty: press Resume to continue that run, "
                             "or choose a new folder")
        if resume and not (out / ROWS_FILE).is_file():
            raise ValueError(f"nothing to resume in {out} (no {ROWS_FILE}); press Run")
        options: dict[str, Any] = {}
        if self.model.value in NEEDS_CHECKPOINT:
            checkpoint = _path(self.checkpoint)
            if checkpoint is None or not checkpoint.is_file():
                raise ValueError(f"model {self.model.value} needs a checkpoint file"
                                 + (f"; not found: {checkpoint}" if checkpoint is not None else ""))
            options["checkpoint"] = str(checkpoint)
        layout = None if self.layout_choice.value == AUTO_LAYOUT else self.layout_choice.value
        return RunRequest(dataset=dataset, out_dir=out, model=self.model.value, protocol=self.protocol.value,
                          layout=layout, limit=int(self.limit.value) or None, workers=int(self.workers.value),
                          resume=resume, save_predictions=bool(self.save_predictions.value), model_options=options)

    def run(self, resume: bool = False) -> Any:
        """Start the run the controls describe (``resume``: continue the output folder's run).

        Returns the worker, or None when a run is going or the settings are refused.
        """
        if self.busy:
            return None
        try:
            request = self.request(resume)
        except ValueError as error:
            self._error(str(error))
            return None
        if resume:
            self.load_results(request.out_dir)
        else:
            self.results.clear()
        self.rows_dir = request.out_dir
        self._request, self._cancel = request, threading.Event()
        self.last_table, self.last_status = None, None
        worker = create_worker(benchmark_job, request, self._cancel, _start_thread=False,
                               _connect={"errored": self._on_error})
        worker.yielded.connect(self._on_progress)
        worker.returned.connect(self._on_returned)
        worker.finished.connect(self._on_finished)
        worker.aborted.connect(self._cancel.set)
        self._worker = worker
        self._set_busy(True)
        self.progress.value = 0
        self.status.value = f"{'resuming' if resume else 'starting'} {request.model} on {request.dataset.name} ..."
        worker.start()
        return worker

    def cancel(self) -> None:
        """Stop the run after the case(s) running now; their rows are kept (Resume finishes the run)."""
        if self._cancel is None:
            return
        self._cancel.set()
        self.cancel_button.enabled = False
        self.status.value = "cancelling after the running case ..."

    def _on_progress(self, step: Progress) -> None:
        self.progress.max = max(1, step.total)
        self.progress.value = min(step.done, step.total)
        self.results.add_rows(step.rows)
        if self._cancel is None or not self._cancel.is_set():
            self.status.value = f"{step.done}/{step.total} cases"
        if step.rows:
            self.rows_added.emit(len(self.results.rows))

    def _on_returned(self, table: pd.DataFrame) -> None:
        self.last_table = table
        manifest = read_manifest(self._request.out_dir) if self._request is not None else None
        self.last_status = (manifest or {}).get("status", "completed")
        cases = int(table["case_id"].nunique()) if len(table) else 0
        failed = int((table["status"] != "ok").sum()) if len(table) else 0
        self.status.value = f"{self.last_status}: {cases} cases, {len(table)} rows, {failed} failed"
        if self.last_status == "cancelled":
            show_info(f"run cancelled after {cases} cases; press Resume to finish it")

    def _on_error(self, error: BaseException) -> None:
        self.last_status = "failed"
        self._error(f"{type(error).__name__}: {error}")

    def _on_finished(self) -> None:
        self._worker = None
        self._cancel = None
        self._set_busy(False)

    # -- results ------------------------------------------------------------------

    def load_results(self, out_dir: str | Path) -> int:
        """Show the rows already in the run folder ``out_dir``; returns how many."""
        try:
            rows = ResultStore(out_dir).recover(truncate=False)
        except Exception as error:  # noqa: BLE001 - a damaged file is reported, not raised into Qt
            self._error(f"cannot read the results in {out_dir}: {error}")
            return 0
        self.results.set_rows(rows)
        self.rows_dir = Path(out_dir)
        self.status.value = f"{len(rows)} rows in {Path(out_dir).name}"
        return len(rows)

    def open_row(self, row: dict[str, Any]) -> Any:
        """Open ``row``'s case in the viewer (off-thread): image, ground truth, prediction, prompt."""
        if self.rows_dir is None:
            self._error("no run folder to open the case from")
            return None
        worker = create_worker(_run_case.load_run_case, self.rows_dir, row, _start_thread=False,
                               _connect={"errored": self._on_open_error})
        worker.returned.connect(self._show_case)
        worker.finished.connect(self._on_open_finished)
        self._open_worker = worker
        self.status.value = f"opening {row.get('case_id')} ..."
        worker.start()
        return worker

    def _show_case(self, loaded: _run_case.RunCase) -> None:
        self.opened = _run_case.show_run_case(self.viewer, loaded)
        target = loaded.row.get("target_label")
        _run_case.point_compare_widgets(self.viewer, self.opened, None if target is None else int(target))
        where = "" if loaded.prompt is None else f", prompt on slice {loaded.prompt.slice_index}"
        self.status.value = f"opened {loaded.case.case_id} ({loaded.row.get('label_name')}{where})"
        if loaded.note:
            show_warning(f"{loaded.case.case_id}: {loaded.note}")

    def _on_open_error(self, error: BaseException) -> None:
        self._error(f"cannot open the case: {type(error).__name__}: {error}")

    def _on_open_finished(self) -> None:
        self._open_worker = None


__all__ = ["BenchmarkWidget", "Progress", "RunRequest", "benchmark_job"]
