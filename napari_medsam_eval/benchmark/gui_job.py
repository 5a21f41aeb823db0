"""A benchmark run as the Benchmark widget asks for it, without Qt: the request, the job, the outcome.

The widget gathers its controls into a :class:`~.config.RunConfig` (:func:`checked_request`
refuses what cannot run, naming why), runs :func:`benchmark_job` in a napari
generator worker and reads the finished run with :meth:`RunOutcome.of`. The
work is :func:`napari_medsam_eval.benchmark.run_benchmark`, the function
``medsam-eval run`` calls; it reports through plain callbacks
(``progress(done, total, rows)`` after each case, ``steps(CaseStep)`` after
each slice of the running case), which the job turns into yielded
:class:`Progress` and :class:`~.case_progress.CaseStep` values
(:func:`~napari_medsam_eval.core.progress.iterate_progress`); its cancel event
stops the run within a slice, the case running then left for a resume.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generator

import pandas as pd

from ..core.progress import iterate_progress
from ..protocols import build_protocol
from .config import RunConfig
from .manifest import read_manifest
from .executors import RayUnavailable, import_ray
from .runner import run_benchmark
from .case_progress import CaseStep
from .store import ROWS_FILE
from ..core.errors import InputError

#: models without shipped weights: a run needs a checkpoint file
NEEDS_CHECKPOINT = ("medsam2", "sam2", "sam")


def checked_request(dataset: Path | None, out_dir: Path | None, model: str, protocol: str, *,
                    checkpoint: Path | None = None, resume: bool = False, precision: str = "fp32",
                    **options: Any) -> RunConfig:
    """The run the widget's controls ask for, or ValueError naming what is missing or wrong.

    ``dataset`` must be a folder; ``out_dir`` an empty (or new) folder, or
    with ``resume`` one holding a run's rows; models in :data:`NEEDS_CHECKPOINT`
    need an existing ``checkpoint`` file; ``precision`` (fp32, bf16, int8) is LiteMedSAM's; executor ``ray``
    needs the ``ray`` package; the protocol
    must take ``protocol_options`` and ``propagation`` must be a rule set. ``options``: the other
    :class:`~.config.RunConfig` fields (predictions are saved unless ``save_predictions=False``:
    the widget opens a row's prediction).
    """
    if dataset is None:
        raise InputError("choose a dataset folder")
    if not dataset.is_dir():
        raise InputError(f"dataset folder not found: {dataset}")
    if out_dir is None:
        raise InputError("choose an output folder for the run")
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"the output path is a file, not a folder: {out_dir}")
    if not resume and out_dir.is_dir() and any(out_dir.iterdir()):
        raise InputError(f"the output folder {out_dir} is not empty: press Resume to continue that run, "
                         "or choose a new folder")
    if resume and not (out_dir / ROWS_FILE).is_file():
        raise InputError(f"nothing to resume in {out_dir} (no {ROWS_FILE}); press Run")
    if options.get("executor", "local") == "ray":
        try:
            import_ray()
        except RayUnavailable as error:
            raise InputError(str(error)) from None
        options["ray_address"] = (options.get("ray_address") or "").strip() or None
    elif "ray_address" in options:
        options["ray_address"] = None  # an address typed for Ray does not apply to local workers
    build_protocol(protocol, **(options.get("protocol_options") or {}))  # OptionError naming the option
    model_options: dict[str, Any] = {}
    if model in NEEDS_CHECKPOINT:
        if checkpoint is None or not checkpoint.is_file():
            raise InputError(f"model {model} needs a checkpoint file"
                             + (f"; not found: {checkpoint}" if checkpoint is not None else ""))
        model_options["checkpoint"] = str(checkpoint)
    if precision != "fp32":  # fp32 is every model's default: left out, so a run resumes as before
        if model != "litemedsam":
            raise InputError(f"precision {precision} applies to model litemedsam only, not {model}")
        from ..models.litemedsam_precision import resolve_precision

        model_options["precision"] = resolve_precision(precision)
    options.setdefault("save_predictions", True)
    return RunConfig(dataset=dataset, out_dir=out_dir, model=model, protocol=protocol, resume=resume,
                     model_options=model_options, **options).checked()


@dataclass(frozen=True)
class Progress:
    """One step of a run: ``done`` of ``total`` cases, with the rows of the case just finished."""

    done: int
    total: int
    rows: list[dict[str, Any]]


def benchmark_job(config: RunConfig,
                  cancel: threading.Event) -> Generator[Progress | CaseStep, None, pd.DataFrame]:
    """Generator for a napari GeneratorWorker: yields :class:`Progress` (a case done) and
    :class:`~.case_progress.CaseStep` (a slice of the running case), returns the run's table.

    ``run_benchmark`` runs in a helper thread; its callbacks queue each case's
    rows and each slice step for this generator to yield. ``cancel`` goes into
    the run: it stops within a slice, and the case running is not recorded.
    Closing the generator (napari's own abort) sets ``cancel`` too. The
    runner's first report, before any case runs, gives the cases already done
    (a resumed run) and the cases of the run.
    """
    def job(report: Any) -> pd.DataFrame:
        return run_benchmark(config, progress=report, steps=report, cancel=cancel)
    return (yield from iterate_progress(job, cancel, convert=_step, name="medsam-eval-benchmark"))


def _step(*args: Any) -> Progress | CaseStep:
    """A callback's arguments as the value yielded: a :class:`CaseStep` as it came, else a :class:`Progress`."""
    return args[0] if len(args) == 1 and isinstance(args[0], CaseStep) else Progress(*args)


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended (its manifest's ``status``: completed, cancelled, ...) and what its table holds."""

    status: str
    cases: int
    rows: int
    failed: int

    @classmethod
    def of(cls, table: pd.DataFrame, out_dir: Path) -> "RunOutcome":
        """The outcome of the run in ``out_dir`` that returned ``table``."""
        status = (read_manifest(out_dir) or {}).get("status", "completed")
        cases = int(table["case_id"].nunique()) if len(table) else 0
        failed = int((table["status"] == "failed").sum()) if len(table) else 0
        return cls(status, cases, len(table), failed)

    def __str__(self) -> str:
        return f"{self.status}: {self.cases} cases, {self.rows} rows, {self.failed} failed"


__all__ = ["CaseStep", "NEEDS_CHECKPOINT", "Progress", "RunOutcome", "benchmark_job", "checked_request"]
