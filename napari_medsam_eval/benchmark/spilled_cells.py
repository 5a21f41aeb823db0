"""A results row's list cells (``prompt``, ``stops``, ``lesions``) too long to hold: kept in a file of their own.

A target taken lesion by lesion has one prompt, a stop each way and two lesion records per lesion: on a
label of 20,000 nuclei its cells would be 20 MB of JSON text, held while the row is scored, encoded,
written, resumed and tabled, several times over. So a cell is built item by item (:class:`ListCell`):
while its JSON text is short it stays in the row as before; once it passes :data:`CELL_CHARACTERS` (what
a spreadsheet cell holds) its items go, one JSON line each, to ``records/`` in the run folder
(:data:`~.files.RECORDS_DIR`), and the cell holds a reference instead::

    {"file":"records/<case>.<hash>.t<key>.lesions.jsonl","items":20000,"separator":",","sha256":"..."}

The memory of a run is then one item, not the list. The file is complete (written, flushed and renamed
into place) before its row is written, and a resumed run redoes a case whose file is missing or changed
(:func:`record_problem`, as for a saved prediction). ``results.jsonl`` / ``results.csv`` /
``results.parquet`` keep the reference; :func:`~.store.load_table` reads a run's cells back whole
(:func:`resolve_cells`: the same text as an inline cell's), and ``lesions.csv`` is written from the file
item by item (:func:`cell_items`).
"""
from __future__ import annotations

import hashlib
import json
import os
import zlib
from pathlib import Path
from typing import Any, Callable, Iterator

from ..core.checksum import sha256_file
from ..core.errors import DataError
from ..core.temp_files import temporary_beside
from .files import RECORDS_DIR
from .prediction_files import safe_file_stem

#: a list cell whose JSON text is longer than this many characters is kept in its own file (a spreadsheet
#: cell holds 32,767 characters: a longer one is cut where a user opens results.csv)
CELL_CHARACTERS = 32_767
#: the list columns a row may keep in a file of their own
SPILLED_COLUMNS = ("prompt", "stops", "lesions")
_REFERENCE_KEYS = {"file", "items", "separator", "sha256"}


def cell_file(case_id: str, key: int | None, column: str) -> str:
    """The run-folder-relative file of one row's cell (the case id's hash keeps two ids that read alike apart)."""
    tag = f"{zlib.crc32(str(case_id).encode('utf-8')):08x}"
    return f"{RECORDS_DIR}/{safe_file_stem(str(case_id))}.{tag}.t{key if key is not None else 0}.{column}.jsonl"


class ListCell:
    """One list cell of a row, given its items one at a time (``add``); ``text()`` is the cell: the JSON
    list (``"[" + separator.join(items) + "]"``) while it is at most :data:`CELL_CHARACTERS` long, else the
    reference to the file its items went to. Without a ``run_dir`` the cell always stays in the row."""

    def __init__(self, run_dir: Path | None, relative: str, encode: Callable[[Any], str],
                 separator: str = ",", limit: int | None = None) -> None:
        self.run_dir, self.relative, self.encode, self.separator = run_dir, relative, encode, separator
        self.limit = CELL_CHARACTERS if limit is None else limit
        self.items: list[str] = []
        self.length = 2  # the brackets
        self.count = 0
        self._stream: Any = None
        self._temp: str | None = None
        self._digest = hashlib.sha256()

    def add(self, item: Any) -> None:
        text = self.encode(item)
        if "\n" in text:
            raise ValueError("a cell item's JSON must be one line")
        self.count += 1
        if self._stream is None:
            self.items.append(text)
            self.length += len(text) + (len(self.separator) if len(self.items) > 1 else 0)
            if self.length > self.limit and self.run_dir is not None:
                self._spill()
            return
        self._write(text)

    def _spill(self) -> None:
        """The items so far to the cell's file (a temporary one beside it until :meth:`text`)."""
        path = self.run_dir / self.relative
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, self._temp = temporary_beside(path)
        self._stream = os.fdopen(handle, "wb")
        for text in self.items:
            self._write(text)
        self.items = []

    def _write(self, text: str) -> None:
        data = (text + "\n").encode("utf-8")
        self._digest.update(data)
        self._stream.write(data)

    def text(self) -> str:
        """The cell: its JSON list, or (its file complete and in place) the reference to the file."""
        if self._stream is None:
            return "[" + self.separator.join(self.items) + "]"
        stream, self._stream = self._stream, None
        try:
            stream.flush()
            os.fsync(stream.fileno())
        finally:
            stream.close()
        os.replace(self._temp, self.run_dir / self.relative)
        self._temp = None
        return json.dumps({"file": self.relative, "items": self.count, "separator": self.separator,
                           "sha256": self._digest.hexdigest()}, sort_keys=True, separators=(",", ":"))

    def discard(self) -> None:
        """Forget the items; a file begun is removed (a row that fails keeps no half list)."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None
            Path(self._temp).unlink(missing_ok=True)
        self.items, self.count, self.length = [], 0, 2


def cell_reference(value: Any) -> dict[str, Any] | None:
    """The reference a cell holds (:class:`ListCell`), or None for a cell kept in the row."""
    if not isinstance(value, str) or not value.startswith('{"file":'):
        return None
    try:
        reference = json.loads(value)
    except ValueError:
        return None
    if not isinstance(reference, dict) or set(reference) != _REFERENCE_KEYS:
        return None
    return reference


def _path(run_dir: Path, reference: dict[str, Any]) -> Path:
    relative = Path(str(reference["file"]))
    if relative.is_absolute() or ".." in relative.parts or relative.parts[:1] != (RECORDS_DIR,):
        raise DataError(f"a cell names {reference['file']!r}, not a file of the run's {RECORDS_DIR}/", run_dir)
    return run_dir / relative


def cell_items(value: str, run_dir: Path) -> Iterator[str]:
    """The JSON text of each item of a referenced cell, one at a time (the file read line by line); a
    :class:`DataError` naming the file, after its last item, when it is not the file the row names (its
    checksum, its count of items)."""
    reference = cell_reference(value)
    path = _path(run_dir, reference)
    digest, count = hashlib.sha256(), 0
    try:
        with open(path, "rb") as stream:
            for line in stream:
                digest.update(line)
                count += 1
                yield line.decode("utf-8").rstrip("\n")
    except OSError as error:
        raise DataError(f"cannot read a row's {reference['items']} items ({error.strerror or error})", path) from None
    except UnicodeDecodeError:
        raise DataError("not the row's items: not UTF-8 text", path) from None
    if digest.hexdigest() != reference["sha256"] or count != reference["items"]:
        raise DataError(f"not the file the row names ({count} items, {reference['items']} written; its checksum "
                        "differs): changed since the run wrote it; resume the run to compute the case again", path)


def resolve_cell(value: Any, run_dir: Path) -> Any:
    """A cell as the row would hold it inline: a reference's items joined into their JSON list (a
    :class:`DataError` naming the file when it is missing); any other value unchanged."""
    reference = cell_reference(value)
    if reference is None:
        return value
    return "[" + str(reference["separator"]).join(cell_items(value, run_dir)) + "]"


def resolve_cells(rows: list[dict[str, Any]], run_dir: Path) -> list[dict[str, Any]]:
    """``rows`` with every referenced cell of :data:`SPILLED_COLUMNS` read back (:func:`resolve_cell`)."""
    out = []
    for row in rows:
        if any(cell_reference(row.get(c)) for c in SPILLED_COLUMNS):
            row = {**row, **{c: resolve_cell(row.get(c), run_dir) for c in SPILLED_COLUMNS if c in row}}
        out.append(row)
    return out


def record_problem(row: dict[str, Any], run_dir: Path) -> str | None:
    """Why a row's referenced cells cannot be trusted (a file missing, or not the bytes its checksum names)."""
    for column in SPILLED_COLUMNS:
        reference = cell_reference(row.get(column))
        if reference is None:
            continue
        path = _path(run_dir, reference)
        if not path.is_file():
            return f"{reference['file']} is missing"
        if sha256_file(path) != reference["sha256"]:
            return f"{reference['file']} does not match its checksum"
    return None


__all__ = ["CELL_CHARACTERS", "SPILLED_COLUMNS", "ListCell", "cell_file", "cell_items", "cell_reference",
           "record_problem", "resolve_cell", "resolve_cells"]
