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
finishes it. ``steps(CaseStep)`` reports the slices of the running case (a
serial run; :mod:`.case_progress`), and setting the ``cancel`` event stops the run
within a slice: the case running then gives no row (neither done nor failed,
so ``resume`` does it again), the rows already written stay.
"""
from __future__ import annotations

import dataclasses
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.decoded_limit import memory_ceiling
from ..core.targets import check_targets, labels_of, parse_targets
from ..datasets import resolve_layout
from ..datasets.base import root_dataset_json
from ..core.errors import Cancelled, DataError, os_error_words
from ..io.formats import check_name_encoding
from ..core.progress import CaseProgress, until_cancelled
from .manifest import (MANIFEST_FILE, changed_inputs, check_resumable, check_same_dataset,
                       dataset_fingerprint, environment, now, read_manifest, write_manifest)
from .store import cases_to_redo
from .schema import STATUS_FAILED, to_dataframe
from .evaluator import OFFICIAL_3D_PROTOCOL, UNSAVED_PREFIX, error_text
from .case_progress import StepProgress
from .run_lock import RunLock
from .store import ROWS_FILE, ResultStore, write_tables
from .local_executor import ParallelExecutor, SerialExecutor, build_evaluator, build_model
from .ray_executor import RayExecutor
from .config import RunConfig
from .files import LOG_FILE
from .run_replace import clear_earlier_run
from .run_folder import check_apart_from_inputs as _check_apart_from_inputs, check_out_dir as _check_out_dir, \
    make_out_dir as _make_out_dir, remove_if_untouched as _remove_if_untouched
from ..core.errors import InputError, InputTypeError


logger = logging.getLogger("napari_medsam_eval.benchmark")


class _RunLogHandler(logging.FileHandler):
    """``run.log``; a write that fails (a full disk) is reported once on stderr, not as a traceback per line."""

    failed = False

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        if not self.failed:
            self.failed = True
            print(f"warning: cannot write {self.baseFilename}; its lines are lost from here on", file=sys.stderr)


def _attach_log(out_dir: Path) -> tuple[logging.Handler, int]:
    handler = _RunLogHandler(out_dir / LOG_FILE, encoding="utf-8")
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


def _check_targets(config: RunConfig, layout: Any) -> None:
    """``--targets`` naming a label the dataset does not declare (its ``dataset.json``, the layout's names) is
    refused before any work; a dataset that declares none is checked case by case (an absent label: an
    ``empty_gt`` row naming the labels present)."""
    if not config.targets:
        return
    names = layout.label_names(config.dataset)
    known = set(names) | labels_of(layout.dataset_targets(config.dataset) or [])
    if known:
        where = "its dataset.json" if root_dataset_json(config.dataset) else f"the {layout.name} layout"
        check_targets(parse_targets(config.targets, names), known, f"dataset {config.dataset.name} ({where})")


def _check_model_protocol(protocol: str, backend: Any) -> None:
    if protocol == OFFICIAL_3D_PROTOCOL:
        from ..models.litemedsam import LiteMedSAMBackend

        if not isinstance(backend, LiteMedSAMBackend):
            raise InputError(f"protocol {OFFICIAL_3D_PROTOCOL!r} reproduces LiteMedSAM's own 3D loop and needs "
                             f"model 'litemedsam', not {getattr(backend, 'name', backend)!r}")


def official_engine(config: RunConfig) -> RunConfig:
    """``config`` with the model options its protocol gives its model where the run names none (the
    official-script mode, ``litemedsam-3dbox``: LiteMedSAM in torch, the script's engine; docs/protocols.md)."""
    from ..protocols import PROTOCOLS

    protocol = PROTOCOLS.get(config.protocol)
    defaults = {} if protocol is None else protocol.model_defaults.get(config.model, {})
    missing = {k: v for k, v in defaults.items() if k not in config.model_options}
    return config.replace(model_options={**config.model_options, **missing}) if missing else config


def run_benchmark(config: RunConfig | str | Path, *args: Any, progress: CaseProgress | None = None,
                  steps: StepProgress | None = None, cancel: threading.Event | None = None,
                  progress_bar: bool = False, **options: Any) -> pd.DataFrame:
    """Evaluate a model with the prompts of a protocol on every case of a dataset, as ``config`` says.

    ``config`` is a :class:`~.config.RunConfig`, or its fields (``run_benchmark(dataset, out_dir,
    model, protocol, **options)``). Returns the run's table (:mod:`.schema`), also written to
    ``config.out_dir``, its rows as written: a list cell too long for a row (a lesion target's) is the
    reference to its file in ``records/`` (:mod:`.spilled_cells`; ``load_table(out_dir)`` reads it whole). ``progress(done, total, rows)`` is called once before the first case
    (``rows`` empty, ``done`` the cases a resumed folder holds) and after every case; False stops the
    run after the case running. ``steps`` gets a :class:`~.case_progress.CaseStep` after every slice of the
    running case (one worker; False cancels that case); setting ``cancel`` stops the run within a
    slice (with several workers: within :data:`~.local_executor.CANCEL_POLL_S`, the running cases
    terminated): the cases not finished give no rows, the manifest says ``cancelled``.
    ``progress_bar`` shows a tqdm bar on stderr.
    """
    from ..protocols import build_protocol

    if not isinstance(config, RunConfig):
        config = RunConfig(config, *args, **options)
    elif args or options:
        raise InputTypeError("run_benchmark takes a RunConfig, or the config's fields; not both")
    config = config.checked()
    memory_ceiling()  # a bad MEDSAM_EVAL_MAX_IMAGE_GB refused now: not a failed row for every case
    dataset, out_dir = config.dataset, config.out_dir
    layout_obj = resolve_layout(dataset, config.layout)
    root_dataset_json(dataset)  # a dataset.json it cannot obey concerns every case: the run is refused, naming it
    refs = layout_obj.list_cases(dataset)
    if not refs:
        raise DataError(f"no cases found (layout {layout_obj.name}: {layout_obj.summary})", dataset)
    if config.allow_outside:  # files the dataset lists outside its folder are read (refused per case otherwise)
        refs = [dataclasses.replace(ref, allow_outside=True) for ref in refs]
    listed, refs = refs, config.selected(refs)
    for ref in refs:  # a name SimpleITK would abort on, or no table could hold: refused before any work
        for path in ref.files():
            check_name_encoding(path)
    _check_targets(config, layout_obj)
    protocol_obj = build_protocol(config.protocol, **{"seed": config.seed, **config.protocol_options})
    config = official_engine(config.resolved(layout_obj.name, protocol_obj))
    _check_apart_from_inputs(out_dir, dataset, config.model_options, config.protocol_options)
    if config.model == "litemedsam" and config.model_options.get("precision") == "int8":  # never calibrated on
        from ..models.litemedsam_precision import calibration_set  # what it is scored on

        calibration_set(config.model_options.get("calibration")).check_apart(
            (p for r in listed for p in r.files()), dataset)
    _check_out_dir(out_dir, config.resume, config.overwrite)
    created = _make_out_dir(out_dir)
    with RunLock(out_dir):  # first: one writer per folder, before any model work
        try:
            _check_out_dir(out_dir, config.resume, config.overwrite)  # again under the lock: another run may have written in between
            if config.overwrite and (out_dir / MANIFEST_FILE).exists():  # the earlier run replaced (run_replace)
                clear_earlier_run(out_dir)
            backend = build_model(config.model, config.model_options)
            _check_model_protocol(protocol_obj.name, backend)
        except BaseException:
            if created:
                _remove_if_untouched(out_dir)  # a refused start (bad checkpoint, ...) leaves no trace
            raise
        attached: list[tuple[logging.Handler, int]] = []  # run.log, once the manifest makes the folder ours
        try:
            return _run(config, refs, listed, protocol_obj, backend, progress=progress, progress_bar=progress_bar,
                        steps=steps, cancel=cancel, attached=attached)
        finally:
            for handler, log_level in attached:
                logger.removeHandler(handler)
                logger.setLevel(log_level)
                handler.close()


def _run(config: RunConfig, refs: list, listed: list, protocol: Any, backend: Any, *,
         progress: CaseProgress | None, progress_bar: bool, steps: StepProgress | None = None,
         cancel: threading.Event | None = None,
         attached: list[tuple[logging.Handler, int]] | None = None) -> pd.DataFrame:
    from tqdm import tqdm

    dataset, out_dir, resume = config.dataset, config.out_dir, config.resume
    described = backend.describe()  # once: it may hash the checkpoint
    config = config.replace(precision=str(described.get("precision", "")))
    store = ResultStore(out_dir)
    previous = read_manifest(out_dir) if resume else None
    manifest: dict[str, Any] = {"format": 1, "status": "running", "config": config.to_manifest()}
    if previous is not None:
        check_resumable(previous, manifest, out_dir, model_now=described)
    elif resume and store.path.exists():
        raise DataError(f"cannot resume: {ROWS_FILE} without {MANIFEST_FILE} is not a run folder of this tool",
                        out_dir)
    fingerprint = dataset_fingerprint(listed, dataset)
    if previous is not None:  # before any row is dropped: a refused resume leaves the folder as it was
        check_same_dataset(previous, {"dataset": fingerprint}, out_dir)
    kept = store.recover()
    redo = cases_to_redo(kept, out_dir, {ref.case_id for ref in refs})
    changed = changed_inputs([row for row in kept if row["case_id"] not in redo], refs) if kept else set()
    redo |= changed
    if redo:
        store.drop_cases(redo)
    done_ids = {row["case_id"] for row in kept} - redo
    todo = [ref for ref in refs if ref.case_id not in done_ids]
    started = now()
    sessions = (previous or {}).get("sessions", []) + [{"started_at": started, "cases_to_run": len(todo)}]
    manifest.update({
        "started_at": (previous or {}).get("started_at", started), "ended_at": None, "sessions": sessions,
        "environment": environment(), "model": described, "protocol": protocol.describe(),
        "dataset": {"path": str(dataset.resolve()), "name": refs[0].dataset, "layout": config.layout,
                    "cases_listed": len(listed), "cases_selected": len(refs),
                    **fingerprint},
        "metrics": {"nsd_tolerance_mm": config.tolerance_mm,
                    "video_surface_metrics": "NSD/HD95 per frame in 2D, mean over frames with either mask"},
        "intensity": "intensity.prepare_image: volumes by modality (CT soft-tissue window, uint8 CT as it is; "
                     "others 0.5-99.5 percentiles of positive voxels, whatever the dtype); MedSAM npz and "
                     f"--intensity prepared as they are; uint8 videos and 2D images as they are (mode {config.intensity})",
    })
    write_manifest(out_dir, manifest)  # first: run.log is made only in a folder holding the manifest
    if attached is not None:
        attached.append(_attach_log(out_dir))
    if changed:
        logger.info("redoing %d cases whose files changed since they were run (their contents' SHA-256): %s",
                    len(changed), ", ".join(sorted(changed)))
        print(f"warning: redoing {len(changed)} case(s) whose files changed since they were run: "
              f"{', '.join(sorted(changed)[:5])}{', ...' if len(changed) > 5 else ''}", file=sys.stderr)
    if redo - changed:
        logger.info("redoing %d cases (a failed row, or a prediction file missing or changed): %s",
                    len(redo - changed), ", ".join(sorted(redo - changed)))
    logger.info("run %s: %d of %d cases to do (%s, %s, %s, workers=%d)", out_dir, len(todo), len(refs),
                config.layout, config.model, protocol.name, config.workers)

    if config.executor == "ray":
        executor: SerialExecutor | ParallelExecutor | RayExecutor = RayExecutor(config, todo, cancel=cancel)
        del backend  # the actors build their own
    elif config.workers > 1:
        executor = ParallelExecutor(config, todo, cancel=cancel)
        del backend  # the workers build their own; free this one's memory
    else:
        executor = SerialExecutor(build_evaluator(config, backend), todo, progress=until_cancelled(steps, cancel))
    done, total, status = len(refs) - len(todo), len(refs), "completed"
    clock = time.perf_counter()
    bar = tqdm(total=total, initial=done, disable=not progress_bar, unit="case", dynamic_ncols=True)
    try:
        if (progress is not None and _ask_progress(progress, done, total, []) is False) or _set(cancel):
            executor.request_stop()  # asked to stop before the first case: none starts
            status = "cancelled"
        for _ref, rows in executor:
            store.append_case(rows)
            done += 1
            bar.update(1)
            _log_case(rows, done, total)
            unsaved = next((r["error"] for r in rows if r["error"].startswith(UNSAVED_PREFIX)), None)
            if unsaved is not None:  # a full disk or a read-only folder: every next case would fail the same way
                executor.request_stop()
                raise DataError(f"the run stopped: {unsaved}; the case is recorded as failed and --resume "
                                "redoes it once the predictions can be written", out_dir)
            if (progress is not None and _ask_progress(progress, done, total, rows) is False) or _set(cancel):
                executor.request_stop()
                status = "cancelled"
        if _set(cancel) and done < total:  # parallel cases abandoned on cancel
            status = "cancelled"
    except Cancelled:  # the case running was stopped within a slice: no row of it is written
        status = "cancelled"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException as error:
        status = "failed"
        manifest["error"] = error_text(error)
        logger.error("run %s failed: %s", out_dir, manifest["error"])
        raise
    finally:
        bar.close()
        table, unfinished = _finish(out_dir, store, manifest, sessions, status,
                                    round(time.perf_counter() - clock, 3))
        logger.info("run %s: %s, %d of %d cases done", out_dir, "failed" if unfinished else status, done, total)
    if unfinished:  # (reached only when nothing else went wrong first): a run is done when it is on disk
        raise DataError(unfinished, out_dir)
    return table


def _finish(out_dir: Path, store: ResultStore, manifest: dict[str, Any], sessions: list[dict[str, Any]],
            status: str, wall_time_s: float) -> tuple[pd.DataFrame, str]:
    """Tables and manifest at the end of a session, and "" when both are on disk; else why not. Then the
    manifest says ``failed`` where it can still be written (a full disk: ``running`` stays, never ``completed``),
    the tables stay as they were, and the rows are safe in ``results.jsonl``: ``--resume`` writes them."""
    table = to_dataframe(store.recover(truncate=False))
    sessions[-1].update(ended_at=now(), status=status, wall_time_s=wall_time_s)
    manifest.update(status=status, ended_at=now(), counts={
        "cases_done": int(table["case_id"].nunique()), "rows": len(table),
        "failed_rows": int((table["status"] == STATUS_FAILED).sum())})
    try:
        write_tables(out_dir, table)
        write_manifest(out_dir, manifest)
    except OSError as error:
        problem = (f"the run's tables and manifest could not be written ({os_error_words(error)}); {ROWS_FILE} "
                   "holds every finished case: make room, then resuming the run (--resume, resume=True) writes them")
        logger.error("cannot finish the run folder's tables and manifest: %s", os_error_words(error))
        manifest.update(status="failed", error=problem)
        sessions[-1]["status"] = "failed"
        try:
            write_manifest(out_dir, manifest)
        except OSError:
            pass  # the manifest says "running" as before: never "completed"
        return table, problem
    return table, ""


def _set(cancel: threading.Event | None) -> bool:
    return cancel is not None and cancel.is_set()


def _ask_progress(progress: CaseProgress, done: int, total: int, rows: list[dict[str, Any]]) -> bool | None:
    """The callback's answer; an exception in it counts as "stop" (and is logged)."""
    try:
        return progress(done, total, rows)
    except Exception:  # noqa: BLE001 - a GUI callback must not kill the run's bookkeeping
        logger.exception("progress callback failed; stopping after the running cases")
        return False
