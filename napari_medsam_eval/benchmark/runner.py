"""``run_benchmark``: a dataset x a model x a prompt protocol -> a results table.

The run folder holds::

    results.jsonl     one row per (case, target), appended case by case (see .store)
    results.csv       the same rows, sorted by case and target, written at the end
    results.parquet
    manifest.json     arguments, versions, model checkpoint SHA-256, dataset fingerprint
    run.log           one line per case, failures with their reason
    predictions/      with save_predictions: one label map per case

The model is built once in this process (which checks the checkpoint before
any case runs and gives the manifest its description); with ``workers > 1``
every worker builds its own and this process only writes rows, so there is a
single writer. ``progress(done, total, case_rows)`` is called once before
any case runs, with the cases the folder already holds (a resumed run), the
cases of the run and no rows, so a caller knows both up front; then after
every case with the rows just written. Returning False stops the run after
the cases already running (none, when the first call says so; their rows
are kept, the manifest says ``cancelled``), and ``resume=True`` later
finishes it.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pandas as pd

from ..datasets import resolve_layout
from ..errors import DataError
from ..intensity import INTENSITY_MODES
from ..progress import CaseProgress
from ..propagation.rules import resolve_rules
from .manifest import (MANIFEST_FILE, check_resumable, dataset_fingerprint, environment, now, read_manifest,
                       write_manifest)
from .schema import STATUS_FAILED
from .segment_case import OFFICIAL_3D_PROTOCOL, CaseSettings
from .store import ROWS_FILE, ResultStore, RunLock, write_tables
from .workers import ParallelCases, RunSpec, SerialCases, build_evaluator, build_model


LOG_FILE = "run.log"
logger = logging.getLogger("napari_medsam_eval.benchmark")


def _check_out_dir(out_dir: Path, resume: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise DataError("the run output path exists and is not a folder", out_dir)
    if out_dir.is_dir() and any(out_dir.iterdir()) and not resume:
        raise DataError("the run folder is not empty; resume it with --resume (resume=True) "
                        "or choose a new folder", out_dir)


def _attach_log(out_dir: Path) -> tuple[logging.Handler, int]:
    handler = logging.FileHandler(out_dir / LOG_FILE, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    previous = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return handler, previous


def _log_case(rows: list[dict[str, Any]], done: int, total: int) -> None:
    case_id = rows[0]["case_id"]
    for row in rows:
        if row["status"] == STATUS_FAILED:
            logger.warning("[%d/%d] %s %s failed: %s", done, total, case_id, row["label_name"], row["error"])
    scores = ", ".join(f"{r['label_name']}={r.get('dice', float('nan')):.4f}"
                       for r in rows if r["status"] != STATUS_FAILED)
    if scores:
        logger.info("[%d/%d] %s dice %s", done, total, case_id, scores)


def _check_model_protocol(protocol: str, backend: Any) -> None:
    if protocol == OFFICIAL_3D_PROTOCOL:
        from ..models.litemedsam import LiteMedSAMBackend

        if not isinstance(backend, LiteMedSAMBackend):
            raise ValueError(f"protocol {OFFICIAL_3D_PROTOCOL!r} reproduces LiteMedSAM's own 3D loop and needs "
                             f"model 'litemedsam', not {getattr(backend, 'name', backend)!r}")


def run_benchmark(
    dataset: str | Path,
    out_dir: str | Path,
    model: str = "litemedsam",
    protocol: str = "medsam2",
    *,
    model_options: dict[str, Any] | None = None,
    protocol_options: dict[str, Any] | None = None,
    workers: int = 1,
    resume: bool = False,
    limit: int | None = None,
    save_predictions: bool = False,
    seed: int = 0,
    layout: str | None = None,
    progress: CaseProgress | None = None,
    progress_bar: bool = False,
    intensity: str = "auto",
    propagation: str | dict[str, Any] | None = None,
) -> pd.DataFrame:
    """Evaluate ``model`` with prompts of ``protocol`` on every case of ``dataset``.

    Returns the run's table (:mod:`.schema`), also written to ``out_dir``.
    ``model`` is a registry name (``napari_medsam_eval.models.BACKENDS``) or
    ``"package.module:builder"``; ``model_options`` go to its builder.
    ``limit`` takes the first K cases in the layout's order; ``resume``
    continues a run folder (same dataset, model, options, protocol and seed),
    skipping the cases it already holds; ``seed`` seeds the protocol (the
    same seed gives the same table, timings aside). ``progress(done, total,
    rows)`` is called once before the first case (``rows`` empty, ``done`` the
    cases a resumed folder holds) and after every case; False stops the run.
    ``progress_bar`` shows a tqdm bar on stderr. ``intensity`` (:data:`~napari_medsam_eval.intensity.INTENSITY_MODES`)
    overrides what the readers record of the cases' intensities ("auto": the modality's rule, npz prepared).
    ``propagation``: the propagation rules of per-slice models (a preset name, a dict of
    options, or None for each kind's measured default; :mod:`napari_medsam_eval.propagation.rules`).
    """
    from ..protocols import build_protocol

    dataset, out_dir = Path(dataset), Path(out_dir)
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if propagation is not None:  # refuse unknown presets and options before any work
        resolve_rules("volume", propagation)
    if intensity not in INTENSITY_MODES:
        raise ValueError(f"intensity must be one of {INTENSITY_MODES}, got {intensity!r}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    layout_obj = resolve_layout(dataset, layout)
    refs = layout_obj.list_cases(dataset)
    if not refs:
        raise DataError(f"no cases found (layout {layout_obj.name}: {layout_obj.summary})", dataset)
    listed, refs = refs, (refs[:limit] if limit else refs)
    model_options = dict(model_options or {})
    protocol_options = dict(protocol_options or {})
    if protocol_options.setdefault("seed", seed) != seed:
        raise ValueError(f"protocol option seed={protocol_options['seed']} contradicts seed={seed}; give one")
    protocol_obj = build_protocol(protocol, **protocol_options)
    _check_out_dir(out_dir, resume)
    backend = build_model(model, model_options)  # before the folder exists: a bad checkpoint leaves no trace
    _check_model_protocol(protocol_obj.name, backend)
    out_dir.mkdir(parents=True, exist_ok=True)

    with RunLock(out_dir):
        handler, log_level = _attach_log(out_dir)
        try:
            return _run(dataset, out_dir, refs, listed, layout_obj.name, model, model_options, protocol_obj,
                        backend, workers=workers, resume=resume, limit=limit,
                        save_predictions=save_predictions, seed=seed, progress=progress,
                        progress_bar=progress_bar, intensity=intensity, propagation=propagation)
        finally:
            logger.removeHandler(handler)
            logger.setLevel(log_level)
            handler.close()


def _run(dataset: Path, out_dir: Path, refs: list, listed: list, layout: str, model: str,
         model_options: dict[str, Any], protocol: Any, backend: Any, *, workers: int, resume: bool,
         limit: int | None, save_predictions: bool, seed: int, progress: CaseProgress | None,
         progress_bar: bool, intensity: str, propagation: str | dict[str, Any] | None) -> pd.DataFrame:
    from tqdm import tqdm

    settings = CaseSettings(model=model, protocol=protocol.name, seed=seed, run_dir=str(out_dir),
                            save_predictions=save_predictions, intensity=intensity,
                            propagation=propagation)
    spec = RunSpec(layout=layout, model=model, protocol=protocol.name, settings=settings,
                   model_options=model_options, protocol_options=protocol.options())
    config = {"dataset_path": str(dataset.resolve()), "layout": layout, "model": model,
              "model_options": model_options, "protocol": protocol.name, "protocol_options": protocol.options(),
              "seed": seed, "intensity": intensity, "propagation": propagation, "workers": workers, "limit": limit, "save_predictions": save_predictions}
    store = ResultStore(out_dir)
    previous = read_manifest(out_dir) if resume else None
    manifest: dict[str, Any] = {"format": 1, "status": "running", "config": config}
    if previous is not None:
        check_resumable(previous, manifest, out_dir)
    elif resume and store.path.exists():
        raise DataError(f"cannot resume: {ROWS_FILE} without {MANIFEST_FILE} is not a run folder of this tool",
                        out_dir)
    done_ids = {row["case_id"] for row in store.recover()}
    todo = [ref for ref in refs if ref.case_id not in done_ids]
    started = now()
    sessions = (previous or {}).get("sessions", []) + [{"started_at": started, "cases_to_run": len(todo)}]
    manifest.update({
        "started_at": (previous or {}).get("started_at", started), "ended_at": None, "sessions": sessions,
        "environment": environment(), "model": backend.describe(), "protocol": protocol.describe(),
        "dataset": {"path": str(dataset.resolve()), "name": refs[0].dataset, "layout": layout,
                    "cases_listed": len(listed), "cases_selected": len(refs),
                    **dataset_fingerprint(listed, dataset)},
        "metrics": {"nsd_tolerance_mm": settings.tolerance_mm,
                    "video_surface_metrics": "NSD/HD95 per frame in 2D, mean over frames with either mask"},
        "intensity": "intensity.prepare_image: volumes by modality (CT soft-tissue window, uint8 CT as it is; "
                     "others 0.5-99.5 percentiles of positive voxels, whatever the dtype); MedSAM npz and "
                     f"--intensity prepared as they are; uint8 videos and 2D images as they are (mode {intensity})",
    })
    before = (previous or {}).get("dataset", {}).get("listing_sha256")
    if before and before != manifest["dataset"]["listing_sha256"]:
        logger.warning("the dataset's files changed since this run started (file listing differs); "
                       "rows already written were computed on the earlier files")
    write_manifest(out_dir, manifest)
    logger.info("run %s: %d of %d cases to do (%s, %s, %s, workers=%d)", out_dir, len(todo), len(refs),
                layout, model, protocol.name, workers)

    if workers > 1:
        executor: SerialCases | ParallelCases = ParallelCases(spec, todo, workers)
        del backend  # the workers build their own; free this one's memory
    else:
        executor = SerialCases(build_evaluator(spec, backend), todo)
    done, total, status = len(refs) - len(todo), len(refs), "completed"
    clock = time.perf_counter()
    bar = tqdm(total=total, initial=done, disable=not progress_bar, unit="case", dynamic_ncols=True)
    try:
        if progress is not None and _ask_progress(progress, done, total, []) is False:
            executor.request_stop()  # asked to stop before the first case: none starts
            status = "cancelled"
        for _ref, rows in executor:
            store.append_case(rows)
            done += 1
            bar.update(1)
            _log_case(rows, done, total)
            if progress is not None and _ask_progress(progress, done, total, rows) is False:
                executor.request_stop()
                status = "cancelled"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException:
        status = "failed"
        raise
    finally:
        bar.close()
        table = write_tables(out_dir, store.recover(truncate=False))
        sessions[-1].update(ended_at=now(), status=status, wall_time_s=round(time.perf_counter() - clock, 3))
        manifest.update(status=status, ended_at=now(), counts={
            "cases_done": int(table["case_id"].nunique()), "rows": len(table),
            "failed_rows": int((table["status"] == STATUS_FAILED).sum())})
        write_manifest(out_dir, manifest)
        logger.info("run %s: %s, %d of %d cases done", out_dir, status, done, total)
    return table


def _ask_progress(progress: CaseProgress, done: int, total: int, rows: list[dict[str, Any]]) -> bool | None:
    """The callback's answer; an exception in it counts as "stop" (and is logged)."""
    try:
        return progress(done, total, rows)
    except Exception:  # noqa: BLE001 - a GUI callback must not kill the run's bookkeeping
        logger.exception("progress callback failed; stopping after the running cases")
        return False
