"""A run folder's results as the report reads them: the table, the manifest and where they came from.

The table is the schema's typed table, read by the run folder's one reader,
:func:`napari_medsam_eval.benchmark.store.load_table` (through
:func:`~napari_medsam_eval.benchmark.store.results_file` and
:func:`~napari_medsam_eval.benchmark.store.read_checked`): which file it reads
(the runner's ``results.jsonl`` first: the parquet/CSV of a run killed or
still going are stale), how a killed run's last case is left out, how each
row is checked (:mod:`napari_medsam_eval.benchmark.table_checks`) and how
tables made elsewhere are typed is said there. The report takes the table
as it comes (``target_label`` ``Int64``, missing text ``""``) and adds only
the manifest, :attr:`RunResults.notes` (the parquet/CSV beside a
``results.jsonl`` hold other cases than it: stale) and
:attr:`RunResults.warnings` (rows a lenient reading skipped, and another
copy of the results that differs from the one read:
:mod:`napari_medsam_eval.benchmark.table_copies`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..benchmark.manifest import read_manifest
from ..benchmark.run_lock import lock_held
from ..benchmark.schema import is_missing
from ..benchmark.store import read_checked, results_file, table_of_rows
from ..benchmark.table_checks import skipped_summary
from ..benchmark.table_copies import copy_notes
from ..core.errors import DataError


@dataclass
class RunResults:
    """A run directory's typed table, its manifest and where they came from."""

    path: Path
    table: pd.DataFrame
    manifest: dict = field(default_factory=dict)
    source: Path | None = None
    notes: list[str] = field(default_factory=list)
    #: what a reader of the results must know about the table read: rows skipped, a copy that differs
    warnings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name


def _manifest(run_dir: Path) -> dict:
    """The run's manifest (:func:`~napari_medsam_eval.benchmark.manifest.read_manifest`), ``{}`` without one."""
    manifest = read_manifest(run_dir)
    if manifest is None:
        return {}
    return manifest if isinstance(manifest, dict) else {"manifest": manifest}


def load_results(run_dir: str | Path, lenient: bool = False) -> pd.DataFrame:
    """The typed results table of a run directory (or of a results file)."""
    return load_run(run_dir, lenient).table


def load_run(run: str | Path | RunResults | pd.DataFrame, lenient: bool = False) -> RunResults:
    """A :class:`RunResults` from a run directory, a results file, or rows already in memory (a table
    typed by the store's :func:`~napari_medsam_eval.benchmark.store.table_of_rows`, as the files are).

    A bad row of the file is a DataError naming the file and line; with
    ``lenient`` it is skipped, and :attr:`RunResults.warnings` says how many
    and why. The other results files of a run folder are compared with the
    one read (:func:`~napari_medsam_eval.benchmark.table_copies.copy_notes`).
    """
    if isinstance(run, RunResults):
        return run
    if isinstance(run, pd.DataFrame):
        return RunResults(path=Path("."), table=table_of_rows(run.to_dict("records")))
    source = results_file(run)
    run_dir = source.parent if Path(run).is_file() else Path(run)
    checked = read_checked(source, lenient)
    table = checked.table
    if table.empty:
        raise DataError("the results table has no rows" + (" left" if checked.skipped else ""), source)
    notes, warnings = copy_notes(run_dir, source, table) if not Path(run).is_file() else ([], [])
    skipped = skipped_summary(checked.skipped, source.name, checked.rows)
    manifest = _manifest(run_dir)
    unfinished = run_state_warning(run_dir, manifest, table) if not Path(run).is_file() else None
    return RunResults(path=run_dir, table=table, manifest=manifest, source=source, notes=notes,
                      warnings=[w for w in (unfinished, skipped) if w] + warnings)


def run_state_warning(run_dir: Path, manifest: dict, table: pd.DataFrame) -> str | None:
    """What a reader must know of a run that has not completed: still going (a live process holds its lock),
    killed (``running`` with no one holding it), or ended cancelled, interrupted or failed; None when it
    completed (or the folder holds no manifest)."""
    status = manifest.get("status")
    if not manifest or status in (None, "completed"):
        return None
    cases = int(table["case_id"].nunique())
    so_far = f"the results are the {cases} case{'s' if cases != 1 else ''} done so far"
    if status == "running" and lock_held(run_dir):
        return f"the run is still going (another process is writing into {run_dir.name}): {so_far}"
    if status == "running":
        return (f"the run stopped without ending (killed, or its machine went down): {so_far}; "
                "`medsam-eval run ... --resume` finishes it")
    reason = f" ({manifest['error']})" if manifest.get("error") else ""
    return f"the run ended {status}{reason}: {so_far}; `--resume` finishes it"


def parse_json_cell(value: Any, default: Any = None) -> Any:
    """A JSON string cell as Python (lists and dicts already parsed stay as they are)."""
    if is_missing(value):
        return default
    if isinstance(value, (list, dict)):
        return value
    if isinstance(value, np.ndarray):
        return value.tolist()
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return default


def slice_dice_values(value: Any) -> np.ndarray:
    """The per-slice/frame DSC of a ``slice_dice`` cell as floats (``null`` -> NaN)."""
    values = parse_json_cell(value, default=[])
    if not isinstance(values, list):
        return np.zeros(0)
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def attribute_column(table: pd.DataFrame, name: str, missing: str = "n/a") -> pd.Series:
    """A column of the table, or else the attribute ``name`` of each row's ``attributes`` JSON."""
    if name in table.columns:
        return table[name].map(lambda v: missing if is_missing(v) or v == "" else v)

    def pick(cell: Any) -> Any:
        attributes = parse_json_cell(cell, default={})
        value = attributes.get(name) if isinstance(attributes, dict) else None
        return missing if value is None else value

    return table["attributes"].map(pick) if "attributes" in table.columns else pd.Series(missing, index=table.index)
