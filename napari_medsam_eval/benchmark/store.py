"""The run's rows on disk: an append-only JSONL written one whole case at a time.

Why this shape: a run may be killed at any instant (SIGKILL, power cut, OOM
killer) and must resume without losing, duplicating or half-keeping a row.

* ``results.jsonl`` holds one JSON object per line, one line per result row
  (the columns of :mod:`.schema` plus ``_case_rows``, the number of rows its
  case has). All rows of a case are encoded first, then written by a single
  ``os.write`` on an ``O_APPEND`` descriptor (looping only if the kernel
  reports a short write) and ``fsync``-ed before the next case starts.
* A kill during that write can leave, at the end of the file only, a partial
  line or the first lines of a case without the rest. :meth:`ResultStore.recover`
  keeps the complete prefix: a case counts as done only when all
  ``_case_rows`` of its lines are there and end with a newline; anything after
  the last complete case is truncated away (and will be recomputed).
* Damage anywhere but the tail is not something a kill can produce; it is
  reported as a :class:`DataError` rather than silently repaired.

This module owns the run folder's file names (:data:`ROWS_FILE`,
:data:`CSV_FILE`, :data:`PARQUET_FILE`; the lock is :mod:`.run_lock`'s, the manifest's is
:data:`.manifest.MANIFEST_FILE`), the block key :data:`BLOCK_KEY`, the one
reader of a ``results.jsonl``, :func:`read_rows`, that the runner's resume
reads through, and the one reader of a run folder's results table,
:func:`load_table` (:func:`results_file` and :func:`read_table`), that the
report, the comparison of two runs and the widgets read through. It gives
the schema's typed table (:func:`.schema.to_dataframe`: ``target_label``
and the counts ``Int64``, missing text ``""``), whatever the file: the
runner's ``results.jsonl`` first (it is current; the parquet/CSV of a run
killed or still going are stale), else ``results.parquet``, else
``results.csv`` (tables made elsewhere or by an older version, whose labels
may read ``1.0`` or ``"1"`` and whose status may read ``" OK"``:
:func:`table_of_rows` says how they are taken). Every row read from a file is
checked first (:mod:`.table_checks`: no duplicate, numbers in the number
columns, no CSV line cut short), an error naming the file and the line, or
with ``lenient`` left out and listed (:func:`read_checked`).

JSON numbers follow Python's :mod:`json`: ``NaN`` and ``Infinity`` are written
as those tokens. ``results.csv``/``results.parquet`` are derived files, written
via a temporary file and ``os.replace`` by :func:`write_tables`.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple

import numpy as np
import pandas as pd

from ..core.checksum import sha256_file
from ..core.errors import DataError, os_problem
from .files import CSV_FILE, LESIONS_FILE, MANIFEST_FILE, PARQUET_FILE, ROWS_FILE
from .schema import INT_COLUMNS, STATUS_FAILED, is_missing, json_dumps, to_dataframe, whole_number
from .spilled_cells import record_problem, resolve_cells
from .table_checks import Skipped, check_columns, check_rows, csv_rows
from ..core.errors import InputError
from ..core.temp_files import temporary_beside

#: in every line of ``results.jsonl``: the number of rows of the line's case (written as one block)
BLOCK_KEY = "_case_rows"
#: a run folder's results files, in the order :func:`load_table` prefers them (the runner's rows first)
RESULT_FILES = (ROWS_FILE, PARQUET_FILE, CSV_FILE)


def encode_case(rows: list[dict[str, Any]]) -> bytes:
    """All rows of one case as newline-terminated JSON lines, ready for one write."""
    if not rows:
        raise InputError("a case must produce at least one row")
    n = len(rows)
    return "".join(json.dumps({**row, BLOCK_KEY: n}, sort_keys=False) + "\n" for row in rows).encode("utf-8")


class ResultStore:
    """Appends whole cases to ``<run_dir>/results.jsonl``; recovers it after a kill."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / ROWS_FILE

    def append_case(self, rows: list[dict[str, Any]]) -> None:
        """Write one case's rows durably (single write + fsync); a refused write is a DataError naming the file.

        A write cut short by a full disk leaves at most an incomplete tail,
        which :meth:`recover` removes: the case is redone on resume.
        """
        data = encode_case(rows)
        created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # (less the umask)
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as error:
            raise DataError(f"cannot record case {rows[0].get('case_id')!s}: {os_problem(error)}", self.path) from None
        if created:
            _fsync_dir(self.run_dir)

    def drop_cases(self, case_ids: set[str]) -> None:
        """Rewrite the file without the rows of ``case_ids`` (atomically: a kill keeps the old or the new file)."""
        rows = self.recover()
        kept = [row for row in rows if row["case_id"] not in case_ids]
        if len(kept) == len(rows):
            return
        blocks: dict[str, list[dict[str, Any]]] = {}
        for row in kept:
            blocks.setdefault(row["case_id"], []).append(row)
        data = b"".join(encode_case(block) for block in blocks.values())

        def write(temp: str) -> None:
            with open(temp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())

        try:
            _atomic_write(self.path, write)
        except OSError as error:
            raise DataError(f"cannot rewrite the rows: {os_problem(error)}", self.path) from None
        _fsync_dir(self.run_dir)

    def recover(self, truncate: bool = True) -> list[dict[str, Any]]:
        """Rows of every complete case; with ``truncate``, cut an incomplete tail off the file."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        rows, good_end = _complete_prefix(data, self.path)
        if truncate and good_end < len(data):
            with open(self.path, "r+b") as handle:
                handle.truncate(good_end)
                handle.flush()
                os.fsync(handle.fileno())
        return rows

    def done_case_ids(self) -> set[str]:
        return {row["case_id"] for row in self.recover(truncate=False)}


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Rows of every complete case of a ``results.jsonl`` (any name), without changing the file.

    The complete-case prefix (see the module notes): an incomplete last case
    or a cut-off last line is left out; damage before the tail, a line
    without :data:`BLOCK_KEY` included, is a :class:`DataError` naming the line.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DataError(f"cannot read the results rows ({error.strerror or error})", path) from None
    return _complete_prefix(data, path)[0]


def _complete_prefix(data: bytes, path: Path, repeats: bool = False) -> tuple[list[dict[str, Any]], int]:
    """Rows of complete case blocks at the start of ``data`` and the byte offset they end at.

    A case whose block appears twice is damage (the runner writes a case
    once, and rewrites the file when it redoes one): a DataError naming both,
    unless ``repeats`` (a lenient reading, whose row checks skip the repeated rows).
    """
    rows: list[dict[str, Any]] = []
    block: list[dict[str, Any]] = []
    first_line: dict[Any, int] = {}
    good_end = 0
    offset = 0
    for line_number, (line, end) in enumerate(_lines(data), start=1):
        complete_line = data[end - 1: end] == b"\n"
        try:
            row = json.loads(line) if complete_line else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            row = None
        if row is None or not isinstance(row, dict) or not isinstance(row.get(BLOCK_KEY), int):
            if _only_tail_left(data, end):
                break  # a cut-off line at the end: the kill happened while writing it
            raise DataError(f"line {line_number} is damaged (not a complete result row)", path)
        if block and row.get("case_id") != block[0].get("case_id"):
            raise DataError(f"line {line_number}: case {block[0].get('case_id')!r} is incomplete before "
                            f"case {row.get('case_id')!r} starts", path)
        if not block:
            case_id = row.get("case_id")
            if case_id in first_line and not repeats:
                raise DataError(f"line {line_number}: case {case_id!s} appears a second time (its first block starts "
                                f"at line {first_line[case_id]}); remove one of the blocks", path)
            first_line[case_id] = line_number
        block.append(row)
        offset = end
        if len(block) == row[BLOCK_KEY]:
            rows.extend({k: v for k, v in r.items() if k != BLOCK_KEY} for r in block)
            block = []
            good_end = offset
    return rows, good_end


def _lines(data: bytes) -> Iterator[tuple[bytes, int]]:
    """Each line (without newline) and the offset just after it."""
    start = 0
    while start < len(data):
        newline = data.find(b"\n", start)
        end = len(data) if newline < 0 else newline + 1
        yield data[start:end].rstrip(b"\n"), end
        start = end


def _only_tail_left(data: bytes, end: int) -> bool:
    """True when nothing but this line (and blank space) remains after ``end``."""
    return not data[end:].strip()


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory descriptors
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _atomic_write(path: Path, write) -> None:
    handle, temp = temporary_beside(path)
    os.close(handle)
    try:
        write(temp)
        os.replace(temp, path)
    finally:
        Path(temp).unlink(missing_ok=True)


def write_tables(run_dir: str | Path, rows: list[dict[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """``results.csv`` and ``results.parquet`` from ``rows`` (or their table), sorted by case and target, atomically;
    ``lesions.csv`` (:mod:`.lesion_table`) when a target was taken lesion by lesion."""
    from .lesion_table import write_lesion_table

    run_dir = Path(run_dir)
    table = rows if isinstance(rows, pd.DataFrame) else to_dataframe(rows)
    _atomic_write(run_dir / PARQUET_FILE, lambda p: table.to_parquet(p, index=False))
    _atomic_write(run_dir / CSV_FILE, lambda p: table.to_csv(p, index=False))
    handle, temp = temporary_beside(run_dir / LESIONS_FILE)  # streamed, a chunk of lesions at a time
    os.close(handle)
    try:
        if write_lesion_table(table, temp, run_dir) or table["lesions_true"].notna().any():
            os.replace(temp, run_dir / LESIONS_FILE)
    finally:
        Path(temp).unlink(missing_ok=True)
    return table


def prediction_problem(row: dict[str, Any], run_dir: Path) -> str | None:
    """Why a row's saved prediction cannot be trusted (missing, or not the file the row's checksum names), or None."""
    relative = row.get("prediction_path") or ""
    if not relative:
        return None
    path = run_dir / relative
    if not path.is_file():
        return f"{relative} is missing"
    expected = row.get("prediction_sha256") or ""
    if expected and sha256_file(path) != expected:
        return f"{relative} does not match its checksum"
    return None


def cases_to_redo(rows: list[dict[str, Any]], run_dir: str | Path, selected: set[str]) -> set[str]:
    """Cases of ``selected`` that a resume computes again: a failed row, or a saved prediction or a row's cell
    file (:mod:`.spilled_cells`) missing or changed."""
    run_dir = Path(run_dir)
    redo: set[str] = set()
    for row in rows:
        case_id = row["case_id"]
        if case_id not in selected or case_id in redo:
            continue
        if row.get("status") == STATUS_FAILED or prediction_problem(row, run_dir) is not None \
                or record_problem(row, run_dir) is not None:
            redo.add(case_id)
    return redo


def table_of_rows(rows: Iterable[dict[str, Any]], source: Path | None = None) -> pd.DataFrame:
    """The typed table (:func:`.schema.to_dataframe`) of result rows from any file or version of the runner.

    The integer columns may hold whole floats or their text (:func:`.schema.whole_number`;
    other values are a DataError naming ``source``), lists and objects (a parquet's
    list column) become their JSON text, and ``status`` is taken
    stripped and lower case, ``"failed"`` when missing or blank; columns the
    schema does not know are left out, the ones it knows but a row lacks take
    their unknown value. The runner's own rows pass unchanged.
    """
    typed = []
    for row in rows:
        row = {k: json_dumps(v) if isinstance(v, (list, dict, np.ndarray)) else v for k, v in row.items()}
        for column in INT_COLUMNS:
            if column in row:
                row[column] = whole_number(row[column], column, source)
        status = row.get("status")
        blank = is_missing(status) or not str(status).strip()
        row["status"] = STATUS_FAILED if blank else str(status).strip().lower()
        typed.append(row)
    return to_dataframe(typed)


def results_file(run: str | Path) -> Path:
    """The file :func:`load_table` reads: ``run`` itself when it is a file, else the run folder's first
    of :data:`RESULT_FILES`; a DataError when the folder is missing or holds none of them."""
    run = Path(run)
    if run.is_file():
        return run
    if not run.exists():
        raise DataError("run directory not found", run)
    for name in RESULT_FILES:
        if (run / name).is_file():
            return run / name
    raise DataError(f"no results table in the run directory (expected one of {', '.join(RESULT_FILES)})", run)


class CheckedTable(NamedTuple):
    """A results file read: its typed table and the rows a lenient reading left out (:mod:`.table_checks`)."""

    table: pd.DataFrame
    skipped: list[Skipped]
    rows: int


def _numbered_rows(path: Path, lenient: bool) -> tuple[Iterable[tuple[int, Any]], str]:
    """The file's rows with their line numbers (a parquet file's row numbers), and which of the two."""
    if path.name.endswith(".jsonl"):
        data = path.read_bytes()
        return enumerate(_complete_prefix(data, path, repeats=lenient)[0], start=1), "line"  # a row a line
    if path.name.endswith(".parquet"):
        frame = pd.read_parquet(path)
        if len(frame):
            check_columns(frame.columns, path)
        return enumerate(frame.to_dict("records"), start=1), "row"
    if path.name.endswith(".csv"):  # (the runner's own rows, results.jsonl, leave out what a failed row lacks)
        rows = list(csv_rows(path))
        if rows:
            with open(path, newline="", encoding="utf-8-sig") as stream:
                check_columns(next(csv.reader(stream), []), path)
        return rows, "line"
    raise DataError("not a results table (expected .parquet, .csv or .jsonl)", path)


def read_checked(path: str | Path, lenient: bool = False) -> CheckedTable:
    """The typed table of one results file: ``.jsonl`` (its complete cases, as :func:`read_rows`),
    ``.parquet`` or ``.csv``, each row checked (:func:`.table_checks.check_rows`: a bad row is a
    DataError naming the file and the line, or with ``lenient`` left out and listed), then typed by
    :func:`table_of_rows`, a cell kept in a file of its own read back whole (:func:`.spilled_cells.resolve_cells`,
    from the file's folder); an unreadable file is a DataError."""
    path = Path(path)
    try:
        numbered, where = _numbered_rows(path, lenient)
        rows, skipped = check_rows(numbered, path, lenient=lenient, where=where)
    except DataError:
        raise
    except OSError as error:
        raise DataError(f"cannot read the results table ({error.strerror or error})", path) from None
    except Exception as error:  # noqa: BLE001 - pyarrow/pandas/csv raise many types for a corrupt file
        raise DataError(f"cannot read the results table ({type(error).__name__}: {error})", path) from None
    return CheckedTable(table_of_rows(resolve_cells(rows, path.parent), path), skipped, len(rows) + len(skipped))


def read_table(path: str | Path, lenient: bool = False) -> pd.DataFrame:
    """The typed table of one results file (:func:`read_checked`)."""
    return read_checked(path, lenient).table


def load_table(run: str | Path, lenient: bool = False) -> pd.DataFrame:
    """The typed table of a run folder (:func:`results_file`, :func:`read_table`) or of one results file.

    A run folder that holds no results file yet (its manifest says a run started and has not finished a
    case) gives an empty table with the schema's columns; a path that does not exist, or a folder that is
    neither (no manifest, no results table), is a DataError saying so.
    """
    run = Path(run)
    if not run.exists():
        raise DataError("run folder not found", run)
    if not run.is_file() and not any((run / name).is_file() for name in RESULT_FILES):
        if (run / MANIFEST_FILE).is_file():
            return to_dataframe([])
        raise DataError(f"not a run folder: it holds no {MANIFEST_FILE} and no results table (one of "
                        f"{', '.join(RESULT_FILES)})", run)
    return read_table(results_file(run), lenient)
