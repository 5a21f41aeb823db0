"""Loading a run directory's results table and manifest.

The runner writes one row per case x target, first to ``results.jsonl`` (one
JSON object a line, appended while it runs) and, when it finishes, to
``results.parquet`` and ``results.csv`` (the file names, and how the JSONL is
read, belong to :mod:`napari_medsam_eval.benchmark.store`). :func:`load_results`
reads the JSONL when there is one: it is the source of truth, and the
parquet/CSV of a run that was killed (or is still going) are stale. Only a
folder without it (tables made elsewhere) is read from the parquet, else the
CSV. The JSONL is read by :func:`~napari_medsam_eval.benchmark.store.read_rows`,
the runner's own reader: the rows of every complete case, so a last line cut
short or a last case written only in part (a run killed mid-write) is left
out; a damaged line anywhere else is an error. When the parquet/CSV beside it
hold other cases than the JSONL, :attr:`RunResults.notes` says they are stale.

Columns are normalised so that the statistics need not care which file they
came from: every column of :data:`~napari_medsam_eval.benchmark.schema.COLUMNS`
exists (missing ones are filled with NaN/None), ``status`` is lower case
("ok" or "failed"), the metric, count and time columns are floats, and
``target_label`` is text (``"1"``, not ``1.0``), so that two runs join on it
whatever their format.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..benchmark.manifest import read_manifest
from ..benchmark.schema import COLUMNS, FLOAT_COLUMNS, INT_COLUMNS, is_missing
from ..benchmark.store import CSV_FILE, PARQUET_FILE, ROWS_FILE, read_rows
from ..errors import DataError

#: results files, in the order they are preferred (the runner's rows first: the tables may be stale)
RESULT_FILES = (ROWS_FILE, PARQUET_FILE, CSV_FILE)
#: columns the report reads as floats (counts too, so that NaN can stand for "unknown")
_AS_FLOAT = FLOAT_COLUMNS + tuple(c for c in INT_COLUMNS if c != "target_label")
#: columns the report reads as text (None when missing)
_AS_TEXT = ("case_id", "dataset", "task", "label_name", "kind", "model", "precision", "protocol", "error")


@dataclass
class RunResults:
    """A run directory's table, its manifest and where they came from."""

    path: Path
    table: pd.DataFrame
    manifest: dict = field(default_factory=dict)
    source: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name


def _label_text(value: Any) -> str | None:
    """``1``, ``1.0`` and ``"1"`` all become ``"1"``; other text stays as it is."""
    if is_missing(value):
        return None
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else text


def normalize_table(table: pd.DataFrame) -> pd.DataFrame:
    """The columns of the runner's schema with consistent types (see the module notes)."""
    table = table.copy()
    for column in COLUMNS:
        if column not in table.columns:
            table[column] = np.nan if column in _AS_FLOAT else None
    for column in _AS_FLOAT:
        table[column] = pd.to_numeric(table[column].astype(object), errors="coerce").astype(float)
    for column in _AS_TEXT:
        table[column] = table[column].map(lambda v: None if is_missing(v) else str(v)).astype(object)
    table["target_label"] = table["target_label"].map(_label_text).astype(object)
    status = table["status"].map(lambda v: "failed" if is_missing(v) else str(v))
    table["status"] = status.str.strip().str.lower()
    return table.reset_index(drop=True)


def read_jsonl(path: Path) -> pd.DataFrame:
    """The rows of every complete case of a ``results.jsonl`` (the store's rule, see the module notes)."""
    return pd.DataFrame(read_rows(path))


def _read_table(path: Path) -> pd.DataFrame:
    try:
        if path.name.endswith(".parquet"):
            return pd.read_parquet(path)
        if path.name.endswith(".csv"):
            return pd.read_csv(path, dtype={"target_label": str, "case_id": str})
        if path.name.endswith(".jsonl"):
            return read_jsonl(path)
    except DataError:
        raise
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    except Exception as error:  # noqa: BLE001 - pyarrow/pandas raise many types for a corrupt file
        raise DataError(f"cannot read the results table ({type(error).__name__}: {error})", path) from None
    raise DataError("not a results table (expected .parquet, .csv or .jsonl)", path)


def find_results_file(run_dir: str | Path) -> Path:
    """The results file :func:`load_results` reads: ``run_dir`` itself when it is a file."""
    run_dir = Path(run_dir)
    if run_dir.is_file():
        return run_dir
    if not run_dir.exists():
        raise DataError("run directory not found", run_dir)
    for name in RESULT_FILES:
        if (run_dir / name).is_file():
            return run_dir / name
    raise DataError(f"no results table in the run directory (expected one of {', '.join(RESULT_FILES)})", run_dir)


def _manifest(run_dir: Path) -> dict:
    """The run's manifest (:func:`~napari_medsam_eval.benchmark.manifest.read_manifest`), ``{}`` without one."""
    manifest = read_manifest(run_dir)
    if manifest is None:
        return {}
    return manifest if isinstance(manifest, dict) else {"manifest": manifest}


def _case_ids(path: Path) -> set[str]:
    """The case ids of a parquet/CSV table, reading that one column only (empty when unreadable)."""
    try:
        if path.name.endswith(".parquet"):
            column = pd.read_parquet(path, columns=["case_id"])["case_id"]
        else:
            column = pd.read_csv(path, usecols=["case_id"], dtype={"case_id": str})["case_id"]
    except Exception:  # noqa: BLE001 - a damaged derived table is stale too
        return set()
    return set(column.astype(str))


def _stale_tables(run_dir: Path, rows: pd.DataFrame) -> list[str]:
    """Notes naming the derived tables that hold other cases than the rows (a run killed or still going)."""
    notes = []
    for name in (PARQUET_FILE, CSV_FILE):
        path = run_dir / name
        if not path.is_file():
            continue
        cases = _case_ids(path)
        if cases != set(rows["case_id"].astype(str)):
            notes.append(f"{name} is stale ({len(cases)} cases; {ROWS_FILE} has {rows['case_id'].nunique()}): "
                         f"the report is built from {ROWS_FILE}")
    return notes


def load_results(run_dir: str | Path) -> pd.DataFrame:
    """The normalised results table of a run directory (or of a results file)."""
    return load_run(run_dir).table


def load_run(run: str | Path | RunResults | pd.DataFrame) -> RunResults:
    """A :class:`RunResults` from a run directory, a results file, or a table already in memory."""
    if isinstance(run, RunResults):
        return run
    if isinstance(run, pd.DataFrame):
        return RunResults(path=Path("."), table=normalize_table(run))
    source = find_results_file(run)
    run_dir = source.parent if Path(run).is_file() else Path(run)
    table = _read_table(source)
    if table.empty:
        raise DataError("the results table has no rows", source)
    notes = _stale_tables(run_dir, table) if source.name == ROWS_FILE else []
    return RunResults(path=run_dir, table=normalize_table(table), manifest=_manifest(run_dir),
                      source=source, notes=notes)


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
