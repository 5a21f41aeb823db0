"""What proves a folder, an entry or a temporary belongs to an embedding store: its marker and its names.

A store deletes files (eviction, a corrupt entry, a crashed writer's
temporary, ``cache clear``), so it only ever works in a folder it can prove is
its own, and only on names it made:

* the folder holds ``store.json`` of this format: a JSON object with
  ``"kind": "napari-medsam-eval embedding store"`` and ``"format": 1`` (and
  ``limit_bytes`` once one was set). Stores made before ``kind`` was written
  hold exactly ``format`` and perhaps ``limit_bytes``, and are taken too;
* a folder becomes a store only when it does not exist or is empty
  (:func:`check_store_folder`); anything else is refused, naming what is there;
* an entry is ``entries/<32 hex digits>.zarr``, a real folder (no link) holding
  a zarr array's files only: ``zarr.json`` (a zarr 3 array with the key among
  its attributes) and chunks under ``c/`` named by numbers;
* a temporary is ``tmp/<32 hex digits>.<8 of tempfile's characters>.zarr`` with
  the same files (``zarr.json`` possibly not yet written).

Anything else under the store's folder is left where it is.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from ..core.errors import DataError
from ..core.ownership import folder_contents

#: the store's marker and settings file
STORE_FILE = "store.json"
ENTRIES = "entries"
TMP = "tmp"
SUFFIX = ".zarr"
#: the format of ``store.json`` this version reads and writes
STORE_FORMAT = 1
#: ``store.json``'s ``kind``: what says the folder is a store of this package
STORE_KIND = "napari-medsam-eval embedding store"
#: the keys of a ``store.json`` written before ``kind`` was
LEGACY_KEYS = frozenset({"format", "limit_bytes"})
ENTRY_NAME = re.compile(r"^[0-9a-f]{32}\.zarr$")
#: ``tempfile.mkdtemp(prefix=<digest> + ".", suffix=".zarr")``: tempfile draws 8 of [a-z0-9_]
TEMP_NAME = re.compile(r"^[0-9a-f]{32}\.[a-z0-9_]{8}\.zarr$")
#: the marker's own temporary (``.store.json.<pid>``), renamed onto it
MARKER_TEMP = re.compile(r"^\.store\.json\.[0-9]+$")
#: how long a folder holding only a half-made store waits for another process's marker
CLAIM_WAIT_S = 2.0

REFUSAL_HINT = "give an empty folder or one made by --embeddings"


def marker_settings(data: Any) -> dict[str, Any] | None:
    """The settings of a parsed ``store.json`` when it is this store format's marker, else None."""
    if not isinstance(data, dict) or type(data.get("format")) is not int or data["format"] != STORE_FORMAT:
        return None
    if "kind" in data:
        if data["kind"] != STORE_KIND:
            return None
    elif not set(data) <= LEGACY_KEYS:
        return None
    limit = data.get("limit_bytes")
    if limit is not None and (type(limit) is not int or limit < 0):
        return None
    return data


def read_marker(root: Path) -> tuple[dict[str, Any] | None, str]:
    """``store.json``'s settings when it is a valid marker (else None), and what is wrong with it."""
    path = Path(root) / STORE_FILE
    if not path.exists() and not path.is_symlink():
        return None, f"no {STORE_FILE}"
    if path.is_symlink() or not path.is_file():
        return None, f"{STORE_FILE} is not a plain file"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return None, f"{STORE_FILE} is not the store's marker ({type(error).__name__})"
    settings = marker_settings(data)
    if settings is None:
        expected = json.dumps({"kind": STORE_KIND, "format": STORE_FORMAT})
        return None, f"{STORE_FILE} is not the store's marker {expected}"
    return settings, ""


def read_limit(root: Path) -> int | None:
    """The ``limit_bytes`` recorded in ``root/store.json`` (None when absent, unreadable or not the marker)."""
    settings, _ = read_marker(Path(root))
    return None if settings is None else settings.get("limit_bytes")


def marker_text(limit: int | None) -> str:
    """The ``store.json`` this version writes (a limit only when someone set one: the default may change)."""
    settings: dict[str, Any] = {"kind": STORE_KIND, "format": STORE_FORMAT}
    if limit is not None:
        settings["limit_bytes"] = int(limit)
    return json.dumps(settings, indent=1)


def _half_made(names: list[str]) -> bool:
    """Only what a process creating the store writes before its marker is in place."""
    return STORE_FILE not in names and all(MARKER_TEMP.match(n) for n in names)


def check_store_folder(root: str | Path) -> bool:
    """True when ``root`` is a store already, False when it may become one (missing or empty).

    Anything else is a :class:`DataError` naming the folder and a few of its
    entries. A folder holding only another process's half-written marker is
    given :data:`CLAIM_WAIT_S` to become a store. Reads only.
    """
    root = Path(root)
    if not root.exists():
        if root.is_symlink():
            raise DataError("is a broken link, not a folder for the embedding store", root)
        return False
    if not root.is_dir():
        raise DataError("is not a folder; the embedding store is a folder", root)
    deadline = time.monotonic() + CLAIM_WAIT_S
    while True:
        names = os.listdir(root)
        if not names:
            return False
        settings, problem = read_marker(root)
        if settings is not None:
            return True
        if not _half_made(names) or time.monotonic() > deadline:
            raise DataError(f"not an embedding store of medsam-eval ({problem}; it holds {folder_contents(root)}); "
                            f"{REFUSAL_HINT}", root)
        time.sleep(0.05)


def _zarr_files(path: Path) -> int | None:
    """Bytes of a zarr array folder holding nothing else (``zarr.json``, numbered chunks under ``c/``), else None."""
    if path.is_symlink() or not path.is_dir():
        return None
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        relative = Path(dirpath).relative_to(path).parts
        if not relative:
            allowed_dirs, allowed_files = {"c"}, {"zarr.json"}
            if not set(dirnames) <= allowed_dirs or not set(filenames) <= allowed_files:
                return None
        elif relative[0] != "c" or not all(name.isdigit() for name in (*dirnames, *filenames)):
            return None
        for name in (*dirnames, *filenames):
            if os.path.islink(os.path.join(dirpath, name)):
                return None
        total += sum(file_size(os.path.join(dirpath, name)) for name in filenames)
    return total


def file_size(path: str | Path) -> int:
    """Bytes of the file at ``path``; 0 when it vanished meanwhile (another process evicting it)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _holds_key(path: Path) -> bool:
    try:
        meta = json.loads((path / "zarr.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (isinstance(meta, dict) and meta.get("zarr_format") == 3 and meta.get("node_type") == "array"
            and isinstance(meta.get("attributes"), dict) and isinstance(meta["attributes"].get("key"), dict))


def entry_shaped(path: Path) -> bool:
    """Whether ``path`` is named and laid out as an entry (its ``zarr.json`` may be damaged: a corrupt entry)."""
    return bool(ENTRY_NAME.match(path.name)) and _zarr_files(path) is not None


def entry_size(path: Path) -> int | None:
    """Bytes of ``path`` when it is a complete entry of the store's naming and format, else None (not ours)."""
    if not ENTRY_NAME.match(path.name):
        return None
    size = _zarr_files(path)
    return size if size is not None and _holds_key(path) else None


def is_temporary(path: Path) -> bool:
    """Whether ``path`` is one of the store's temporaries (its name and files; ``zarr.json`` may be missing)."""
    return bool(TEMP_NAME.match(path.name)) and _zarr_files(path) is not None


def listing(folder: Path) -> list[Path]:
    """The entries of ``folder`` (none when it is missing or not a folder)."""
    try:
        with os.scandir(folder) as it:
            return [Path(item.path) for item in it]
    except (FileNotFoundError, NotADirectoryError):
        return []


def foreign_items(root: Path) -> list[str]:
    """What lies in a store's folder that is not the store's: relative paths, folders with a ``/``."""
    root = Path(root)
    left = []
    for folder, ours in ((root, None), (root / ENTRIES, entry_size), (root / TMP, is_temporary)):
        for path in listing(folder):
            if ours is None and path.name in (STORE_FILE, ENTRIES, TMP):
                continue
            if ours is None or not ours(path):
                folder = path.is_dir() and not path.is_symlink()
                left.append(path.relative_to(root).as_posix() + ("/" if folder else ""))
    return sorted(left)


__all__ = ["CLAIM_WAIT_S", "ENTRIES", "STORE_FILE", "STORE_FORMAT", "STORE_KIND", "SUFFIX", "TMP",
           "check_store_folder", "entry_shaped", "entry_size", "foreign_items", "is_temporary", "listing",
           "marker_text", "read_limit", "read_marker"]
