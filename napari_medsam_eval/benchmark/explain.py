"""``medsam-eval explain RUN_DIR``: every scored result of a run re-run with one stage made perfect.

For each row of the run with status ``ok`` (or the ``cases`` / ``limit`` asked), the case is read again
from the run's dataset, prepared as the run prepared it, and its recorded prompts are segmented again by
the run's model (the same model options: a run made with an embedding store reuses its embeddings) under
each counterfactual variant (:mod:`napari_medsam_eval.studies.counterfactuals`). ``explain.csv`` beside
the results holds, per (case, target), the DSC as run and as reproduced now, and each variant's DSC,
gain, dominant error part and share of each part; with ``save_masks`` (the default when the run saved
its predictions) each variant's mask is written under ``explain/``.

It is resumable like ``run``: ``explain.csv`` is rewritten atomically after each case, and a later call
skips the results it holds (unless the run's result or the case's files changed since). A case whose
files changed since the run, or whose reproduced DSC differs from the run's, is said so in its row
(``status``/``note``), never silently explained against another result.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..core.errors import Cancelled, DataError
from ..core.intensity import case_intensity, prepare_image
from ..core.prompt import prompts_from_json
from ..evaluation.error_parts import PARTS
from ..studies.counterfactuals import CORRECTING, OFFICIAL_3D, VARIANTS, Counterfactual, counterfactuals
from .config import RunConfig
from .files import EXPLAIN_FILE, EXPLAIN_FOLDER, MANIFEST_FILE
from .explain_cost import ExplainCost, estimate_cost
from .explain_reproduced import REPRODUCED_TOLERANCE, check_prompt_slice, what_changed
from .manifest import KILLED, check_run_folder, inputs_sha256, killed_words, run_status
from .open_row import run_dataset
from .prediction_files import prediction_suffix, safe_file_stem
from .run_lock import RunLock
from .schema import STATUS_OK, row_target
from .store import _atomic_write, load_table

#: the table explain writes beside the results, and the folder of its masks (named in .files)
MASK_FOLDER = EXPLAIN_FOLDER
#: the columns of explain.csv before the variants'
BASE_COLUMNS = ("case_id", "task", "label_name", "target_labels", "kind", "status", "note", "input_sha256",
                "dice_run", "dice_reproduced", "prompt_slice", "prompt_slice_dice", "dominant_error", "stop_reasons",
                "seconds", "encoder_calls")
VARIANT_FIELDS = ("dice", "gain", "dominant", "parts", "slice", "note", "mask")
ExplainProgress = Callable[[int, int, str], "bool | None"]


def variant_column(field: str, variant: str) -> str:
    """``dice_oracle_extent``: a variant's column."""
    return f"{field}_{variant}"


COLUMNS = BASE_COLUMNS + tuple(variant_column(f, v) for v in VARIANTS for f in VARIANT_FIELDS)


@dataclass
class _Run:
    """What explaining a run folder needs, read once."""

    run_dir: Path
    config: RunConfig
    layout: Any
    refs: dict[str, Any]
    table: pd.DataFrame
    manifest: dict[str, Any]


def _open_run(run_dir: Path) -> _Run:
    manifest = check_run_folder(run_dir, "explain")
    state = run_status(run_dir, manifest)
    if state == "running":
        raise DataError("the run is still running (another process is writing into it): let it finish, then "
                        "explain it", run_dir / MANIFEST_FILE)
    if state == KILLED:
        raise DataError(f"the run was killed before it ended ({killed_words(manifest)}): finish it with "
                        "`medsam-eval run ... --resume`, then explain it", run_dir / MANIFEST_FILE)
    config = RunConfig.from_manifest(manifest["config"], run_dir)
    layout, dataset = run_dataset(run_dir)
    refs = {ref.case_id: ref for ref in layout.list_cases(dataset)}
    return _Run(run_dir, config, layout, refs, load_table(run_dir), manifest)


def model_options_of(run: _Run, model_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The options explain builds the run's model with: the run's, ``model_options`` on top, and the run's
    embedding store (its model's description records it, the ``MEDSAM_EVAL_EMBEDDINGS`` one too) when
    neither names one and that folder is still there: the slices the run encoded are not encoded again."""
    options = {**run.config.model_options, **(model_options or {})}
    store = (run.manifest.get("model") or {}).get("embeddings")
    if "embeddings" not in options and isinstance(store, str) and Path(store).is_dir():
        options["embeddings"] = store
    return options


def _chosen(table: pd.DataFrame, cases: list[str] | None, limit: int | None) -> pd.DataFrame:
    """The rows to explain: scored ones, of ``cases`` when given (each must be in the run), the first
    ``limit`` cases."""
    scored = table[table["status"] == STATUS_OK]
    if cases:
        missing = sorted(set(cases) - set(table["case_id"].astype(str)))
        if missing:
            raise DataError(f"case(s) not in the run: {', '.join(missing)}", None)
        scored = scored[scored["case_id"].astype(str).isin(cases)]
    if limit is not None:
        keep = list(dict.fromkeys(scored["case_id"].astype(str)))[:limit]
        scored = scored[scored["case_id"].astype(str).isin(keep)]
    return scored


def _done_before(path: Path, chosen: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """The rows of an earlier ``explain.csv`` still valid: same case files and the same result as run."""
    if not path.exists():
        return {}
    try:
        before = pd.read_csv(path, dtype={"case_id": str, "label_name": str})
    except (OSError, ValueError, pd.errors.ParserError) as error:
        raise DataError(f"{EXPLAIN_FILE} cannot be read ({error}); move it away to explain again", path) from None
    if set(COLUMNS) - set(before.columns):
        return {}
    now = {(str(r.case_id), str(r.label_name)): r for r in chosen.itertuples()}
    kept = {}
    for row in before.to_dict("records"):
        key = (str(row["case_id"]), str(row["label_name"]))
        run = now.get(key)
        if run is not None and row["input_sha256"] == getattr(run, "input_sha256", "") and \
                _same(row["dice_run"], run.dice) and row["status"] in ("ok", "differs"):
            kept[key] = row
    return kept


def _same(a: Any, b: Any) -> bool:
    return bool(np.isclose(float(a), float(b), atol=1e-6, equal_nan=True))


def _stop_reasons(row: Any) -> str:
    """The reasons the run's directions ended, in order (``intensity, end``)."""
    try:
        stops = json.loads(row.stops) if isinstance(row.stops, str) and row.stops else []
    except ValueError:
        return ""
    return ", ".join(str(s.get("reason")) for s in stops if isinstance(s, dict))


def explain_cost(run_dir: str | Path, *, cases: list[str] | None = None, limit: int | None = None,
                 model_options: dict[str, Any] | None = None) -> ExplainCost:
    """What :func:`explain_run` with these arguments will cost, before it starts (:mod:`.explain_cost`: from the
    run's timings of the results not explained yet, and whether the run's embedding store is read)."""
    run = _open_run(Path(run_dir))
    chosen = _chosen(run.table, cases, limit)
    kept = _done_before(Path(run_dir) / EXPLAIN_FILE, chosen)
    todo = chosen[[(str(c), str(n)) not in kept for c, n in zip(chosen["case_id"], chosen["label_name"])]]
    store = model_options_of(run, model_options).get("embeddings")
    return estimate_cost(todo, str(store) if store else None)


def explain_run(run_dir: str | Path, *, cases: list[str] | None = None, limit: int | None = None,
                save_masks: bool | None = None, progress: ExplainProgress | None = None,
                cancel: threading.Event | None = None, model_options: dict[str, Any] | None = None,
                variants: tuple[str, ...] = VARIANTS) -> pd.DataFrame:
    """Explain the scored results of the run in ``run_dir`` (module doc); returns ``explain.csv``'s table.

    ``progress(done, total, case_id)`` is called before the first case and after each (False stops after
    the case running, as does setting ``cancel``); ``model_options`` are added to the run's (e.g. an
    ``embeddings`` folder for a run made without one)."""
    run_dir = Path(run_dir)
    run = _open_run(run_dir)
    chosen = _chosen(run.table, cases, limit)
    path = run_dir / EXPLAIN_FILE
    save = bool(run.config.save_predictions) if save_masks is None else bool(save_masks)
    with RunLock(run_dir):
        kept = _done_before(path, chosen)
        todo = [case_id for case_id in dict.fromkeys(chosen["case_id"].astype(str))
                if any((case_id, str(name)) not in kept for name in chosen[chosen["case_id"] == case_id]["label_name"])]
        rows = list(kept.values())
        total = len(todo)
        if progress is not None and progress(0, total, "") is False:
            return _table(rows)
        if not todo:
            _write(path, rows)
            return _table(rows)
        from ..protocols import build_protocol
        from .local_executor import build_model

        options = model_options_of(run, model_options)
        backend = build_model(run.config.model, options)
        changes = what_changed(run.manifest, run.config.model_options, backend, options)
        protocol = build_protocol(run.config.protocol, **{"seed": run.config.seed, **run.config.protocol_options})
        for done, case_id in enumerate(todo, start=1):
            if cancel is not None and cancel.is_set():
                break
            rows += _explain_case(run, backend, protocol, case_id, chosen[chosen["case_id"] == case_id], save,
                                  variants, cancel, changes)
            _write(path, rows)
            if progress is not None and progress(done, total, case_id) is False:
                break
    return _table(rows)


def _table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    return table.sort_values(["case_id", "label_name"], kind="stable").reset_index(drop=True)


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    table = _table(rows)
    try:
        _atomic_write(path, lambda p: table.to_csv(p, index=False))
    except OSError as error:
        raise DataError(f"cannot write {EXPLAIN_FILE} ({error.strerror or error}); what was explained before "
                        "is kept", path) from None


def _explain_case(run: _Run, backend: Any, protocol: Any, case_id: str, rows: pd.DataFrame, save: bool,
                  variants: tuple[str, ...], cancel: threading.Event | None, changes: str) -> list[dict[str, Any]]:
    """The explain rows of one case (one per scored target); a failure is each row's ``status``."""
    base_rows = [_base(row) for row in rows.itertuples()]
    ref = run.refs.get(case_id)
    if ref is None:
        return [{**b, "status": "failed", "note": "the case is no longer in the dataset"} for b in base_rows]
    sha = inputs_sha256(ref)
    if any(b["input_sha256"] and b["input_sha256"] != sha for b in base_rows):
        return [{**b, "status": "failed", "note": "the case's files changed since the run: run it again first"}
                for b in base_rows]
    try:
        case = run.layout.load(ref)
        image = prepare_image(case.image, case.kind, case.modality,
                              intensity=case_intensity(case.metadata, run.config.intensity))
    except Exception as error:  # noqa: BLE001 - a case that cannot be read is its rows' status
        return [{**b, "status": "failed", "note": f"{type(error).__name__}: {error}"} for b in base_rows]
    out = []
    backend.clear_cache()
    try:
        for b, row in zip(base_rows, rows.itertuples()):
            out.append(_explain_target(run, backend, protocol, case, image, b, row, save, variants, cancel, changes))
    finally:
        backend.clear_cache()
    return out


def _base(row: Any) -> dict[str, Any]:
    return {"case_id": str(row.case_id), "task": row.task, "label_name": str(row.label_name),
            "target_labels": getattr(row, "target_labels", ""), "kind": row.kind, "status": "ok", "note": "",
            "input_sha256": getattr(row, "input_sha256", "") or "", "dice_run": float(row.dice),
            "prompt_slice": row.prompt_slice, "prompt_slice_dice": getattr(row, "prompt_slice_dice", np.nan),
            "dominant_error": getattr(row, "dominant_error", ""), "stop_reasons": _stop_reasons(row)}


def _explain_target(run: _Run, backend: Any, protocol: Any, case: Any, image: np.ndarray, base: dict[str, Any],
                    row: Any, save: bool, variants: tuple[str, ...],
                    cancel: threading.Event | None, changes: str = "") -> dict[str, Any]:
    target = row_target(row._asdict())
    out = dict(base)
    start, calls = time.perf_counter(), getattr(backend, "encoder_calls", None)

    def progress(_done: int, _total: int) -> bool:
        return not (cancel is not None and cancel.is_set())
    try:
        prompts = prompts_from_json(row.prompt)
        gt = target.mask(case.label)
        asked = [p for p in prompts if not p.is_empty and not p.info.get("empty")]
        run_mask, run_stops = _run_result(run.run_dir, row, case, target)
        out.update(check_prompt_slice(backend, image, case, asked, gt, row, run.config.protocol, run_mask,
                                       changes))
        found = counterfactuals(backend, image, case, gt, prompts, protocol, rules=run.config.propagation,
                                variants=variants, progress=progress, run_mask=run_mask, run_stops=run_stops)
    except Cancelled:
        raise
    except Exception as error:  # noqa: BLE001 - one target's failure is its own row
        return {**out, "status": "failed", "note": f"{type(error).__name__}: {error}"}
    for variant, result in found.items():
        out.update(_variant_columns(result, out["dice_run"], row))
        if save and result.mask is not None:
            out[variant_column("mask", variant)] = _save_mask(run.run_dir, case, target, variant, result)
    out["seconds"] = round(time.perf_counter() - start, 3)
    if calls is not None:
        out["encoder_calls"] = int(backend.encoder_calls - calls)
    return out


def _run_result(run_dir: Path, row: Any, case: Any, target: Any) -> tuple[np.ndarray | None, list[dict]]:
    """The run's saved mask of the row's target and its ``stops`` (the true extent goes on from them, not
    walking again); (None, []) when the run saved no prediction, or for a corrections run (its result is
    not one walk)."""
    from ..evaluation.mask_comparison import binary_target
    from .open_row import read_prediction

    if str(getattr(row, "protocol", "")) in (*CORRECTING, OFFICIAL_3D):
        return None, []
    prediction, _note = read_prediction(run_dir, row._asdict(), case)
    if prediction is None:
        return None, []
    try:
        stops = json.loads(row.stops) if isinstance(row.stops, str) and row.stops else []
    except ValueError:
        return None, []
    return binary_target(prediction, target.labels, binary_fallback=True), [s for s in stops if isinstance(s, dict)]


def _variant_columns(result: Counterfactual, dice_run: float, row: Any) -> dict[str, Any]:
    v = result.variant
    if result.reason:
        return {variant_column("note", v): result.reason}
    if result.same_as_run:
        shares = {p: round(float(getattr(row, f"error_{p}", np.nan)), 4) for p in PARTS}
        return {variant_column("dice", v): round(dice_run, 4), variant_column("gain", v): 0.0,
                variant_column("dominant", v): getattr(row, "dominant_error", ""),
                variant_column("parts", v): json.dumps(shares, separators=(",", ":")),
                variant_column("slice", v): result.prompt_slice,
                variant_column("note", v): "the protocol's key slice is already the largest: the run's result"}
    shares = {} if result.parts is None else {p: round(float(result.parts.shares[p]), 4) for p in PARTS}
    return {variant_column("dice", v): round(result.dice, 4), variant_column("gain", v): round(result.dice - dice_run, 4),
            variant_column("dominant", v): "" if result.parts is None else result.parts.dominant,
            variant_column("parts", v): json.dumps(shares, separators=(",", ":")) if shares else "",
            variant_column("slice", v): result.prompt_slice if v == "oracle_prompt_slice" else None}


def _save_mask(run_dir: Path, case: Any, target: Any, variant: str, result: Counterfactual) -> str:
    """A variant's mask under ``explain/``, as the target's label values' first; its path relative to the run."""
    from ..io import write_mask

    relative = Path(MASK_FOLDER) / f"{safe_file_stem(case.case_id)}.{safe_file_stem(target.name)}.{variant}" \
                                   f"{prediction_suffix(case)}"
    value = int(target.labels[0])
    labels = np.where(result.mask, value, 0).astype(np.uint8 if value <= 255 else np.uint16)
    write_mask(labels, run_dir / relative, case)
    return relative.as_posix()


def explained_row(run_dir: str | Path, row: dict[str, Any]) -> dict[str, Any] | None:
    """The ``explain.csv`` row of a run's ``row`` (same case and target, made from the same result: its DSC
    and the case's files), or None when it was not explained (or the run changed since)."""
    path = Path(run_dir) / EXPLAIN_FILE
    if not path.is_file():
        return None
    try:
        table = pd.read_csv(path, dtype={"case_id": str, "label_name": str})
    except (OSError, ValueError, pd.errors.ParserError):
        return None
    found = table[(table["case_id"] == str(row.get("case_id"))) & (table["label_name"] == str(row.get("label_name")))]
    if found.empty:
        return None
    explained = found.iloc[0].to_dict()
    same_files = not row.get("input_sha256") or explained.get("input_sha256") == row.get("input_sha256")
    return explained if same_files and _same(explained.get("dice_run"), row.get("dice")) else None


def variant_dice(explained: dict[str, Any], variant: str) -> tuple[float, float] | None:
    """A variant's (DSC, gain) in an explain row; None where it did not apply."""
    dice = explained.get(variant_column("dice", variant))
    if dice is None or (isinstance(dice, float) and not np.isfinite(dice)):
        return None
    return float(dice), float(explained.get(variant_column("gain", variant)))


def variant_mask_path(run_dir: str | Path, explained: dict[str, Any], variant: str) -> Path | None:
    """The file of a variant's mask (``explain/...``), None when it was not saved or is gone."""
    relative = explained.get(variant_column("mask", variant))
    if not isinstance(relative, str) or not relative:
        return None
    path = Path(run_dir) / relative
    return path if path.is_file() else None


__all__ = ["COLUMNS", "EXPLAIN_FILE", "explain_cost", "explained_row", "model_options_of", "variant_dice", "variant_mask_path", "MASK_FOLDER", "REPRODUCED_TOLERANCE", "explain_run", "variant_column"]
