"""``lesions.csv``: every lesion of a run's lesion-by-lesion targets, one row each, from the rows' ``lesions``.

The results rows carry each target's lesions as JSON (:mod:`napari_medsam_eval.evaluation.lesions`), so
they are written, resumed and read with the row; this table is derived from them when a run ends
(:func:`~.store.write_tables`, which streams it: :func:`write_lesion_table`) and by the report, the
Benchmark dock and ``api.lesion_table``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from ..core.errors import DataError
from .schema import is_missing
from .spilled_cells import cell_items, cell_reference, resolve_cell

#: the table's columns: the row's case and target, then the lesion's (``source`` true or predicted)
LESION_COLUMNS = ("case_id", "task", "label_name", "target_labels", "source", "number", "status", "voxels",
                  "volume_ml", "size", "dice", "iou", "first_slice", "last_slice", "largest_slice", "matched")
_INT = ("number", "voxels", "first_slice", "last_slice", "largest_slice")
_FLOAT = ("volume_ml", "dice", "iou")


def row_lesions(row: Any, run_dir: Path | None = None) -> list[dict[str, Any]]:
    """The lesions of one results row (``[]`` for a target not taken lesion by lesion, or unreadable JSON);
    lesions kept in a file of their own (:mod:`.spilled_cells`) are read from ``run_dir``, and without it
    are a DataError naming the file (never taken for no lesion)."""
    text = row.get("lesions") if hasattr(row, "get") else None
    if is_missing(text) or not str(text).strip():
        return []
    if cell_reference(text) is not None:
        if run_dir is None:
            raise DataError(f"the row's lesions are in {cell_reference(text)['file']}: read them with its run "
                            "folder (load_table(run), lesion_table(table, run))")
        text = resolve_cell(text, Path(run_dir))
    try:
        value = json.loads(text) if isinstance(text, str) else list(text)
    except (TypeError, ValueError):
        return []
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _add_lesions(columns: dict[str, list], row: Any, lesions: list[dict[str, Any]]) -> None:
    """``lesions`` of ``row`` appended to the table's ``columns`` (one list a column, no dict a lesion)."""
    for c in LESION_COLUMNS[:4]:
        columns[c].extend([row.get(c, "")] * len(lesions))
    for c in LESION_COLUMNS[4:]:
        if c == "matched":
            columns[c].extend(" ".join(str(v) for v in l.get("matched") or []) for l in lesions)
        elif c == "size":
            columns[c].extend(l.get("size") or "" for l in lesions)
        else:
            columns[c].extend(l.get(c) for l in lesions)


def _typed(columns: dict[str, list]) -> pd.DataFrame:
    lesions = pd.DataFrame(columns, columns=list(LESION_COLUMNS))
    for column in _INT:
        lesions[column] = pd.array([None if is_missing(v) else int(v) for v in lesions[column]], dtype="Int64")
    for column in _FLOAT:
        lesions[column] = pd.to_numeric(lesions[column], errors="coerce").astype("float64")
    return lesions


def _empty_columns() -> dict[str, list]:
    return {c: [] for c in LESION_COLUMNS}


def _row_items(row: Any, run_dir: Path | None) -> Iterator[Any]:
    """The items of a row's lesions cell one at a time (a list cell of the row, or its file's lines)."""
    text = row.get("lesions")
    if is_missing(text) or not isinstance(text, str):  # (a parquet's list: as row_lesions reads it)
        return iter(row_lesions(row))
    if cell_reference(text) is None:
        return _streamed(text)
    if run_dir is None:
        return iter(row_lesions(row))  # (the DataError naming the file)
    return (json.loads(line) for line in cell_items(text, Path(run_dir)))


def _scored_rows(table: pd.DataFrame) -> Iterator[Any]:
    if "lesions" in table.columns:
        for _, row in table[table["status"] == "ok"].iterrows():
            yield row


def lesion_table(table: pd.DataFrame, run_dir: Path | None = None) -> pd.DataFrame:
    """One row per lesion of every scored lesion-by-lesion row of ``table`` (true lesions first, then the
    predicted ones, each in their number's order); empty (with the columns) when there is none. Built
    column by column (no dict a lesion): tens of thousands of lesions a case cost their values only.
    ``run_dir``: where a row's lesions kept in a file of their own are read (:func:`row_lesions`)."""
    columns = _empty_columns()
    for row in _scored_rows(table):
        lesions = row_lesions(row, run_dir)
        if lesions:
            _add_lesions(columns, row, lesions)
        del lesions
    return _typed(columns)


def _streamed(text: str) -> Iterator[Any]:
    """The items of a JSON list one at a time (``json.loads``' syntax: NaN and Infinity too); ValueError where
    the text is not one JSON list (after the items it gave)."""
    decoder, space = json.JSONDecoder(), " \t\n\r"
    at = len(text) - len(text.lstrip(space))
    if not text.startswith("[", at):
        raise ValueError("not a JSON list")
    at, first = at + 1, True
    while True:
        while at < len(text) and text[at] in space:
            at += 1
        if first and text.startswith("]", at):  # [] (else an item must follow a comma)
            break
        item, at = decoder.raw_decode(text, at)
        yield item
        first = False
        while at < len(text) and text[at] in space:
            at += 1
        if text.startswith("]", at):
            break
        if not text.startswith(",", at):
            raise ValueError("not a JSON list")
        at += 1
    if text[at + 1:].strip(space):
        raise ValueError("text after the JSON list")


#: lesions converted and written at a time by :func:`write_lesion_table`
WRITE_CHUNK = 256


def write_lesion_table(table: pd.DataFrame, path: str | Path, run_dir: Path | None = None,
                       chunk: int = WRITE_CHUNK) -> int:
    """:func:`lesion_table` written to the CSV ``path`` (the same text as ``lesion_table(table).to_csv(path,
    index=False)``), ``chunk`` lesions at a time: a row's lesions JSON is read item by item, so the memory is
    the rows' own text and one chunk, not a dict per lesion and the whole table. The count of lesions written.

    A row whose JSON is unreadable gives no lesion (as :func:`row_lesions`): what was written of it is cut off.
    A row's lesions kept in a file of their own are read from ``run_dir`` line by line."""
    written = 0
    with open(path, "w", encoding="utf-8", newline="") as stream:
        _typed(_empty_columns()).to_csv(stream, index=False)
        for row in _scored_rows(table):
            text = row.get("lesions")
            if isinstance(text, str) and not text.strip():
                continue
            items = _row_items(row, run_dir)
            start, count, columns, buffered = stream.tell(), 0, _empty_columns(), []
            try:
                for item in items:
                    if isinstance(item, dict):
                        buffered.append(item)
                    if len(buffered) == chunk:
                        _add_lesions(columns, row, buffered)
                        _typed(columns).to_csv(stream, index=False, header=False)
                        count, columns, buffered = count + len(buffered), _empty_columns(), []
            except ValueError:  # not a JSON list after all: the row gives none (row_lesions' rule)
                stream.seek(start)
                stream.truncate()
                continue
            if buffered:
                _add_lesions(columns, row, buffered)
                _typed(columns).to_csv(stream, index=False, header=False)
                count += len(buffered)
            written += count
    return written


__all__ = ["LESION_COLUMNS", "WRITE_CHUNK", "lesion_table", "row_lesions", "write_lesion_table"]
