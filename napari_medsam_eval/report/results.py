"""A run folder's results as the report reads them: the table, the manifest and where they came from.

The table is the schema's typed table, read by the run folder's one reader,
:func:`napari_medsam_eval.benchmark.store.load_table` (through
:func:`~napari_medsam_eval.benchmark.store.results_file` and
:func:`~napari_medsam_eval.benchmark.store.read_table`): which file it reads
(the runner's ``results.jsonl`` first: the parquet/CSV of a run killed or
still going are stale), how a killed run's last case is left out and how
tables made elsewhere are typed is said there. The report takes the table
as it comes (``target_label`` ``Int64``, missing text ``""``) and adds only
the manifest and, when the parquet/CSV beside a ``results.jsonl`` hold other
cases than it, :attr:`RunResults.notes` saying they are stale.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..benchmark.manifest import read_manifest
from ..benchmark.schema import is_missing
from ..benchmark.store import (CSV_FILE, PARQUET_FILE, ROWS_FILE, read_table, results_file, table_case_ids,
                               table_of_rows)
from ..core.errors import DataError


@dataclass
class RunResults:
    """A run directory's typed table, its manifest and where they came from."""

    path: Path
    table: pd.DataFrame
    manifest: dict = field(default_factory=dict)
    source: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name


def _manifest(run_dir: Path) -> dict:
    """The run's manifest (:func:`~napari_medsam_eval.benchmark.manifest.read_manifest`), ``{}`` without one."""
    manifest = read_manifest(run_dir)
    if manifest is None:
        return {}
    return manifest if isinstance(manifest, dict) else {"manifest": manifest}


def _stale_tables(run_dir: Path, table: pd.DataFrame) -> list[str]:
    """Notes naming the derived tables that hold other cases than the rows (a run killed or still going)."""
    notes = []
    for name in (PARQUET_FILE, CSV_FILE):
        path = run_dir / name
        if not path.is_file():
            continue
        cases = table_case_ids(path)
        if cases != set(table["case_id"].astype(str)):
            notes.append(f"{name} is stale ({len(cases)} cases; {ROWS_FILE} has {table['case_id'].nunique()}): "
                         f"the report is built from {ROWS_FILE}")
    return notes


def load_results(run_dir: str | Path) -> pd.DataFrame:
    """The typed results table of a run directory (or of a results file)."""
    return load_run(run_dir).table


def load_run(run: str | Path | RunResults | pd.DataFrame) -> RunResults:
    """A :class:`RunResults` from a run directory, a results file, or rows already in memory (a table
    typed by the store's :func:`~napari_medsam_eval.benchmark.store.table_of_rows`, as the files are)."""
    if isinstance(run, RunResults):
        return run
    if isinstance(run, pd.DataFrame):
        return RunResults(path=Path("."), table=table_of_rows(run.to_dict("records")))
    source = results_file(run)
    run_dir = source.parent if Path(run).is_file() else Path(run)
    table = read_table(source)
    if table.empty:
        raise DataError("the results table has no rows", source)
    notes = _stale_tables(run_dir, table) if source.name == ROWS_FILE else []
    return RunResults(path=run_dir, table=table, manifest=_manifest(run_dir), source=source, notes=notes)


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
