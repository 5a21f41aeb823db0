"""The error parts of a run folder made before them, computed from the predictions it saved.

A run folder written before the error parts (:mod:`..evaluation.error_parts`) has no ``error_*``
columns. Where the run saved its predictions and its dataset is still there, each scored row's parts
are computed from the saved file against the case's ground truth, as the scorer computes them for a
new run; every other such row stays without parts (the report says ``n/a``). Nothing is written: the
run folder is left as it was.

A saved label map composed from overlapping targets (older runs saved one map per case, a later
target winning) gives the earlier target's parts of what was saved, not of what was scored; the row's
DSC is kept, and the note says how many rows were filled so.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..core.errors import DataError
from ..evaluation.error_parts import PART_COLUMNS, ROW_COLUMNS, error_parts
from .open_row import RunCase, load_run_case
from .schema import STATUS_OK, is_missing, row_target


def rows_without_parts(table: pd.DataFrame) -> pd.Series:
    """Boolean mask of the scored rows with no parts."""
    if not set(PART_COLUMNS) <= set(table.columns):
        return table["status"].eq(STATUS_OK)
    return table["status"].eq(STATUS_OK) & table[list(PART_COLUMNS)].isna().any(axis=1)


def fill_parts(run_dir: str | Path, table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """``table`` with the parts of every scored row that lacks them and has a readable saved prediction
    (module doc), and how many rows were filled."""
    missing = rows_without_parts(table)
    if not missing.any() or not table.loc[missing, "prediction_path"].astype(str).str.len().any():
        return table, 0
    table = table.copy()
    for column in ROW_COLUMNS:
        if column not in table:
            table[column] = "" if column in ("dominant_error", "error_slices") else np.nan
    filled = 0
    loaded_files: dict[tuple[str, str], RunCase | None] = {}  # a case's targets often share one saved file
    for index in table.index[missing]:
        row = table.loc[index].to_dict()
        key = (str(row.get("case_id")), str(row.get("prediction_path") or ""))
        if not key[1]:
            continue
        if key not in loaded_files:
            try:
                loaded_files[key] = load_run_case(run_dir, row)
            except (DataError, OSError):
                loaded_files[key] = None
        loaded = loaded_files[key]
        if loaded is None:
            continue
        target = row_target(row)
        if loaded.prediction is None or loaded.case.label is None or target is None:
            continue
        prompt = None if is_missing(row.get("prompt_slice")) or loaded.case.kind == "image" else int(row["prompt_slice"])
        parts = error_parts(target.mask(loaded.prediction), target.mask(loaded.case.label), prompt)
        for column, cell in parts.columns().items():
            table.at[index, column] = cell
        filled += 1
    return table, filled


__all__ = ["fill_parts", "rows_without_parts"]
