"""The checks every row of a results file passes when it is read, each failure named by file and line.

A results table may be hand-edited (a CSV opened in a spreadsheet), cut
(a copy that stopped part-way) or joined from two files. Read as it comes,
such a table gave numbers that looked right and were not: a duplicated row
counted twice (n=5 for 4 cases), a dice of ``"abc"`` dropped from the median
while the table still said n=4 and failed 0, a CSV line with fewer fields
silently losing its NSD. So each row is checked before it is typed
(:func:`napari_medsam_eval.benchmark.store.table_of_rows`):

* a row whose case and target (``case_id``, ``target_label``, ``label_name``) an earlier row
  has is a duplicate (lenient, the last of them is the row kept);
* a cell of a number column (:data:`.schema.FLOAT_COLUMNS`: ``dice``, ``iou``,
  ``nsd``, ``hd95``, the times ...) must be missing (blank, ``nan``) or a
  number; of a count column (:data:`.schema.INT_COLUMNS`) a whole number;
* a cell of a JSON column nests at most 32 levels, and one of a column of numbers per slice (``slice_dice``,
  ``dice_after`` ...) is a list of numbers or nulls (text or nested lists there ended in an internal error);
* a CSV line must have as many fields as the header (:func:`csv_rows`);
* the table must have the columns every reading needs (:data:`REQUIRED_COLUMNS`, and ``target_label``
  or ``label_name``): a table without ``status`` was read as every case failed, without ``dice`` as
  DSC n/a, without ``task`` as every label pooled (:func:`check_columns`; lenient or not).

Strict (the default), the first bad row is a :class:`DataError` naming the
file, the line (``row`` for a parquet file, which has no lines) and the
problem. Lenient (``--lenient`` of ``report`` and ``compare``) every bad row
is left out and listed as a :class:`Skipped`, which the report counts and
names (:func:`skipped_summary`). A table the runner wrote passes unchanged.
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from ..core.errors import DataError
from ..core.options import MAX_JSON_DEPTH, json_depth, shown
from .parsed_table import ARRAY_COLUMNS, DICT_COLUMNS, LIST_COLUMNS
from .schema import FLOAT_COLUMNS, INT_COLUMNS, is_missing, whole_number

#: the kinds of bad rows, in the order the report lists them
DUPLICATE, NOT_A_NUMBER, SHORT, LONG = "duplicate", "not a number", "short row", "long row"
KINDS = (DUPLICATE, NOT_A_NUMBER, SHORT, LONG)
#: how many lines the summary of one kind names before "and N more"
SHOWN_LINES = 5
#: what the error says a user can do about a bad row
LENIENT_HINT = "correct or remove the row, or skip such rows with --lenient (report, compare), which counts them"


@dataclass(frozen=True)
class Skipped:
    """A row left out of a lenient reading: where it stands, what kind of problem, and the problem."""

    line: int
    kind: str
    problem: str


class BadRow(Exception):
    """One row's problem (:attr:`kind`, the message); :func:`check_rows` adds the file and the line."""

    def __init__(self, kind: str, problem: str) -> None:
        super().__init__(problem)
        self.kind = kind


#: the columns a results table must have to be read at all (a target's column too: ``target_label`` or ``label_name``)
REQUIRED_COLUMNS = ("case_id", "task", "status", "dice")


def check_columns(columns: Iterable[str], source: Path) -> None:
    """A DataError naming ``source`` and the columns it lacks when a results table lacks a required one."""
    columns = set(columns)
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if not {"target_label", "label_name"} & columns:
        missing.append("target_label (or label_name)")
    if missing:
        raise DataError(f"not a whole results table: column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                        f"missing (a table edited by hand must keep every column; the run folder's results.jsonl "
                        "is the run's own copy)", source)


def csv_rows(path: Path) -> Iterator[tuple[int, dict[str, str] | BadRow]]:
    """Each record of a results CSV as ``(line it starts on, {column: text})``, or a :class:`BadRow`
    for a record with fewer or more fields than the header; blank lines are passed over.

    Read with :mod:`csv` rather than pandas, which fills a short record with blanks without a word.
    """
    with open(path, newline="", encoding="utf-8-sig") as stream:
        reader = csv.reader(stream)
        header = next(reader, None)
        if header is None:
            return
        start = reader.line_num + 1
        for fields in reader:
            line, start = start, reader.line_num + 1
            if not fields:
                continue
            if len(fields) < len(header):
                missing = ", ".join(header[len(fields):][:3]) + (" ..." if len(header) - len(fields) > 3 else "")
                yield line, BadRow(SHORT, f"a row cut short: {len(fields)} of the header's {len(header)} fields, "
                                          f"{missing} missing")
            elif len(fields) > len(header):
                yield line, BadRow(LONG, f"{len(fields)} fields, the header has {len(header)}")
            else:
                yield line, dict(zip(header, fields))


def _number(value: Any, column: str) -> float:
    """A number cell as a float (NaN when missing or blank); :class:`BadRow` when it is not a number."""
    if is_missing(value) or (isinstance(value, str) and not value.strip()):
        return float("nan")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (str, int, float, np.integer, np.floating)):
        raise BadRow(NOT_A_NUMBER, f"{column} holds {value!r}, not a number")
    try:
        return float(value)
    except ValueError:
        raise BadRow(NOT_A_NUMBER, f"{column} holds {value!r}, not a number") from None


def _json_cell(value: Any, column: str, numbers: bool) -> None:
    """A JSON cell read as the tables read it, or a :class:`BadRow`: nested no deeper than
    :data:`~napari_medsam_eval.core.options.MAX_JSON_DEPTH` (deeper text ended in RecursionError), and for a
    column of numbers (``slice_dice`` ...) a list of numbers or nulls (text or nested lists ended in TypeError)."""
    if is_missing(value) or (isinstance(value, str) and not value.strip()):
        return
    if isinstance(value, str):
        if value.count("[") + value.count("{") > MAX_JSON_DEPTH and json_depth(value) > MAX_JSON_DEPTH:
            raise BadRow(NOT_A_NUMBER, f"{column} nests {json_depth(value)} levels of JSON (at most "
                                       f"{MAX_JSON_DEPTH} are read)")
        if not numbers:
            return
        try:
            value = json.loads(value)
        except ValueError:
            raise BadRow(NOT_A_NUMBER, f"{column} holds {shown(value)}, not a JSON list of numbers") from None
    if not numbers:
        return
    items = list(value) if isinstance(value, (list, tuple, np.ndarray)) else None
    if items is None or not all(v is None or (isinstance(v, (int, float, np.integer, np.floating))
                                              and not isinstance(v, (bool, np.bool_))) for v in items):
        raise BadRow(NOT_A_NUMBER, f"{column} holds {shown(json.dumps(value, default=str))}, not a list of numbers "
                                   "(null where a slice has no score)")


def _checked_row(row: dict[str, Any], source: Path | None) -> dict[str, Any]:
    """``row`` with its number cells as floats and its count cells as whole numbers (its JSON cells checked), or
    a :class:`BadRow`."""
    row = dict(row)
    for columns, numbers in ((ARRAY_COLUMNS, True), (LIST_COLUMNS + DICT_COLUMNS, False)):
        for column in columns:
            if column in row:
                _json_cell(row[column], column, numbers)
    for column in FLOAT_COLUMNS:
        if column in row:
            row[column] = _number(row[column], column)
    for column in INT_COLUMNS:
        if column in row:
            try:
                row[column] = whole_number(row[column], column, source)
            except DataError as error:
                raise BadRow(NOT_A_NUMBER, error.problem) from None
    return row


def _key(row: dict[str, Any]) -> tuple[str, int | None, str]:
    """A row's case and target: its label and its name (a region of several labels has no one label)."""
    case_id = row.get("case_id")
    name = row.get("label_name")
    return ("" if is_missing(case_id) else str(case_id), row.get("target_label"), "" if is_missing(name) else str(name))


def check_rows(rows: Iterable[tuple[int, dict[str, Any] | BadRow]], source: Path, lenient: bool = False,
               where: str = "line") -> tuple[list[dict[str, Any]], list[Skipped]]:
    """The good rows of ``rows`` (``(line, row or BadRow)``) and, lenient, the skipped ones.

    Strict, the first bad row is a :class:`DataError` naming ``source`` and ``where`` (``line``, or
    ``row`` for a parquet file) with its number. Lenient, of rows with one case and target the last
    is kept (a later row supersedes an earlier one, as in a paired comparison of two tables).
    """
    good: list[tuple[int, dict[str, Any]]] = []
    skipped: list[Skipped] = []
    last: dict[tuple[str, int | None, str], int] = {}
    for number, row in rows:
        try:
            if isinstance(row, BadRow):
                raise row
            row = _checked_row(row, source)
            key = _key(row)
            if key in last and not lenient:
                raise BadRow(DUPLICATE, f"case {row_name(key)} appears again (first at {where} {last[key]}): "
                                        "its case would be counted twice")
        except BadRow as bad:
            if not lenient:
                raise DataError(f"{where} {number}: {bad}; {LENIENT_HINT}", source) from None
            skipped.append(Skipped(number, bad.kind, f"{where} {number}: {bad}"))
            continue
        last[key] = number
        good.append((number, row))
    kept = []
    for number, row in good:
        later = last[_key(row)]
        if later != number:
            skipped.append(Skipped(number, DUPLICATE, f"{where} {number}: case {row_name(_key(row))} appears again at "
                                                      f"{where} {later}, which is kept"))
        else:
            kept.append(row)
    return kept, sorted(skipped, key=lambda s: s.line)


def row_name(key: tuple) -> str:
    """A row's case and target as the messages name them: ``hippocampus_001 label 1``; a region of several
    labels by its name (``BraTS_001 whole_tumor``)."""
    if key[1] is None:
        return f"{key[0]} " + (key[2] if len(key) > 2 and key[2] and key[2] != "unknown" else "(no label)")
    return f"{key[0]} label {key[1]}"


def skipped_summary(skipped: list[Skipped], name: str, total: int) -> str | None:
    """``3 of 9 rows of results.csv skipped (--lenient): 1 duplicate (line 5: ...); ...``, or None."""
    if not skipped:
        return None
    parts = []
    for kind in KINDS:
        of_kind = [s for s in skipped if s.kind == kind]
        if of_kind:
            shown = "; ".join(s.problem for s in of_kind[:SHOWN_LINES])
            more = f"; and {len(of_kind) - SHOWN_LINES} more" if len(of_kind) > SHOWN_LINES else ""
            parts.append(f"{len(of_kind)} {kind} ({shown}{more})")
    return (f"{len(skipped)} of {total} rows of {name} skipped (--lenient), not counted anywhere: "
            + ", ".join(parts))


__all__ = ["BadRow", "KINDS", "Skipped", "check_rows", "csv_rows", "row_name", "skipped_summary"]
