"""Which of a run folder's results files is read, and what the other copies say that it does not.

A finished run folder holds its rows three times: ``results.jsonl`` (the rows
as the run appended them), ``results.parquet`` and ``results.csv`` (copies
written from them when the run ends). :func:`.store.load_table` reads the
first there (:data:`.store.RESULT_FILES`) and no other, so an edit made to a
copy it does not read (a CSV opened and changed in a spreadsheet) used to be
ignored without a word. :func:`copy_notes` compares each other copy with the
table read and says, for one that differs, which file is read and why, and
how to read the edited one instead; a copy holding other cases than the
runner's rows (a run killed or still going, whose copies are from before)
is stale, as a note.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.errors import DataError
from .files import CSV_FILE, PARQUET_FILE, ROWS_FILE
from .schema import FLOAT_COLUMNS, INT_COLUMNS
from .store import RESULT_FILES, read_checked
from .table_checks import row_name

#: why the file read is preferred to the others
WHY_READ = {
    ROWS_FILE: f"the rows the run itself appended ({PARQUET_FILE} and {CSV_FILE} are copies written from them "
               "when a run ends; edits to a copy are not read)",
    PARQUET_FILE: f"which keeps every value exactly as written ({CSV_FILE} is its copy for reading; edits to it "
                  "are not read)",
}
#: how many differing rows a note names
SHOWN_ROWS = 3


def _keys(table: pd.DataFrame) -> list[tuple]:
    return [(case_id, None if pd.isna(label) else int(label), name)
            for case_id, label, name in zip(table["case_id"].astype(str), table["target_label"],
                                            table["label_name"].astype(str))]


def _same_text(a: Any, b: Any) -> bool:
    """Equal text, or the same JSON written two ways (a parquet list column and its CSV text)."""
    if a == b:
        return True
    try:
        return json.loads(a) == json.loads(b)
    except (TypeError, ValueError):
        return False


def _changed_columns(a: pd.DataFrame, b: pd.DataFrame) -> list[list[str]]:
    """Per row of two tables of the same keys in the same order: the columns whose values differ."""
    changed: list[list[str]] = [[] for _ in range(len(a))]
    for column in a.columns:
        left, right = a[column].to_numpy(), b[column].to_numpy()
        if column in FLOAT_COLUMNS:
            same = np.isclose(left.astype(float), right.astype(float), rtol=1e-9, atol=1e-12, equal_nan=True)
        elif column in INT_COLUMNS:
            same = [(pd.isna(x) and pd.isna(y)) or (not pd.isna(x) and not pd.isna(y) and x == y)
                    for x, y in zip(left, right)]
        else:
            same = [_same_text(x, y) for x, y in zip(left, right)]
        for index in np.flatnonzero(~np.asarray(same, dtype=bool)):
            changed[index].append(column)
    return changed


def _differences(table: pd.DataFrame, other: pd.DataFrame) -> list[str]:
    """What ``other`` holds otherwise than ``table``: rows only in one, and rows whose values differ."""
    mine, theirs = _keys(table), _keys(other)
    at_mine, at_theirs = {k: i for i, k in enumerate(mine)}, {k: i for i, k in enumerate(theirs)}
    only_here = [k for k in mine if k not in at_theirs]
    only_there = [k for k in theirs if k not in at_mine]
    found = []
    if only_here:
        found.append(f"{len(only_here)} rows missing there ({', '.join(map(row_name, only_here[:SHOWN_ROWS]))})")
    if only_there:
        found.append(f"{len(only_there)} rows not in the file read ({', '.join(map(row_name, only_there[:SHOWN_ROWS]))})")
    common = [k for k in mine if k in at_theirs]
    a = table.iloc[[at_mine[k] for k in common]].reset_index(drop=True)
    b = other.iloc[[at_theirs[k] for k in common]].reset_index(drop=True)
    changed = [(key, columns) for key, columns in zip(common, _changed_columns(a, b)) if columns]
    if changed:
        shown = "; ".join(f"{row_name(key)}: {', '.join(columns)}" for key, columns in changed[:SHOWN_ROWS])
        more = f"; and {len(changed) - SHOWN_ROWS} more" if len(changed) > SHOWN_ROWS else ""
        found.append(f"{len(changed)} rows with other values ({shown}{more})")
    return found


def copy_notes(run_dir: Path, source: Path, table: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Notes and warnings about the run folder's other results files than ``source`` (read as ``table``).

    A note: a copy beside ``results.jsonl`` with other cases (stale: the run
    was killed or is still going). A warning: a copy that cannot be read,
    has rows that fail the checks, or holds other rows or values than the
    file read (edited by hand): which file is read, why, and how to read
    the other one.
    """
    notes: list[str] = []
    warnings: list[str] = []
    for name in RESULT_FILES:
        path = run_dir / name
        if name == source.name or not path.is_file():
            continue
        why = WHY_READ.get(source.name, f"the first of {', '.join(RESULT_FILES)} there")
        read_instead = f"{source.name} is read, {why}; to read {name} instead, give its path ({path})"
        try:
            other = read_checked(path, lenient=True)
        except DataError as error:
            warnings.append(f"{name} cannot be read ({error.problem}); {read_instead}")
            continue
        cases, mine = set(other.table["case_id"].astype(str)), set(table["case_id"].astype(str))
        if source.name == ROWS_FILE and cases != mine:
            notes.append(f"{name} is stale ({len(cases)} cases; {ROWS_FILE} has {len(mine)}): the report is built "
                         f"from {ROWS_FILE}")
            continue
        found = _differences(table, other.table)
        if other.skipped:
            found.insert(0, f"{len(other.skipped)} rows that fail the checks ({other.skipped[0].problem}"
                            + (" ..." if len(other.skipped) > 1 else "") + ")")
        if found:
            warnings.append(f"{name} differs from {source.name}: {'; '.join(found)}; {read_instead}")
    return notes, warnings


__all__ = ["WHY_READ", "copy_notes"]
