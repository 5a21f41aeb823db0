"""The ledger of files medsam-eval wrote into a folder: what makes a file "ours".

Every writer of a user-named file (``segment --out``, the napari writer aside,
``report --out``, ``compare --out``, the studies' ``--out``) keeps one small
JSON file, :data:`LEDGER`, in the folder it writes into. It maps each file it
wrote there (a path relative to the folder, POSIX style) to the SHA-256 of the
bytes it wrote. A file is ours when the ledger names it and its bytes still hash
to what we wrote:

* re-running a command onto its own earlier output needs no ``--overwrite``;
* a file of the same name that someone else put there, or one of ours that was
  edited since (a mask corrected in another tool, a report with notes added),
  is no longer ours, and is only replaced with ``--overwrite``;
* the ledger travels with the folder (copied, moved, on another machine), which a
  central record in the user's home would not, and it holds hashes, not time
  stamps, which copying changes.

A ledger of the first version (a ``files`` *list*, written by report/compare
before hashes were kept) names files without their hash: they are taken as ours.
The rule that uses the ledger is :mod:`napari_medsam_eval.core.ownership`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from fnmatch import fnmatch
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from .errors import DataError
from .temp_files import follow_umask

try:  # POSIX: writers of one folder take turns at its ledger
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: the ledger's file name (hidden; one per folder written into)
LEDGER = ".medsam-eval-written.json"
#: the ledger's ``kind``: a file of that name without it is someone else's
LEDGER_KIND = "napari-medsam-eval written files"
#: the ledger's version: 2 maps names to SHA-256 (1 listed names alone)
LEDGER_FORMAT = 2

#: a ledger entry: the SHA-256 written, or None for a first-version entry (names only)
Ledger = dict[str, "str | None"]


def file_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_ledger(folder: str | os.PathLike[str]) -> Ledger | None:
    """The folder's ledger (empty without one); None when a file of that name is not a ledger of ours."""
    path = Path(folder) / LEDGER
    if not path.exists() and not path.is_symlink():
        return {}
    if path.is_symlink():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) and data.get("kind") == LEDGER_KIND else None
    if isinstance(files, list) and all(isinstance(name, str) for name in files):
        return {name: None for name in files}
    if isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return dict(files)
    return None


def is_ours(folder: str | os.PathLike[str], name: str, ledger: Ledger) -> bool:
    """Whether ``folder/name`` is a plain file the ledger names with its current bytes' hash."""
    path = Path(folder) / name
    if name not in ledger or path.is_symlink() or not path.is_file():
        return False
    recorded = ledger[name]
    try:
        return recorded is None or file_digest(path) == recorded
    except OSError:
        return False


def matching(folder: str | os.PathLike[str], patterns: Sequence[str]) -> list[str]:
    """The entries of ``folder`` (relative POSIX paths) that match ``patterns`` (``"figures/box_*.png"``)."""
    folder = Path(folder)
    found = set()
    for pattern in patterns:
        parent, _, name = pattern.rpartition("/")
        try:
            with os.scandir(folder / parent if parent else folder) as it:
                found.update(f"{parent}/{e.name}" if parent else e.name for e in it if fnmatch(e.name, name))
        except (FileNotFoundError, NotADirectoryError):
            continue
    return sorted(found)


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """The folder locked (``flock`` on the folder itself: no lock file is left) while its ledger changes."""
    if fcntl is None:
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def record_written(folder: str | os.PathLike[str], names: Iterable[str]) -> Path:
    """Note ``names`` (relative to ``folder``, just written there) in the folder's ledger with their hashes.

    Entries whose files are gone are dropped. The ledger is replaced atomically;
    a file of its name that is not a ledger is never replaced (a DataError, raised
    earlier by :func:`napari_medsam_eval.core.ownership.check_may_write`).
    """
    folder = Path(folder)
    path = folder / LEDGER
    with _folder_lock(folder):
        ledger = read_ledger(folder)
        if ledger is None:
            raise DataError("is not the ledger medsam-eval keeps of the files it wrote; it was left as it is", path)
        kept = {name: digest for name, digest in ledger.items() if (folder / name).is_file()}
        for name in names:
            if (folder / name).is_file() and not (folder / name).is_symlink():
                kept[name] = file_digest(folder / name)
        text = json.dumps({"kind": LEDGER_KIND, "format": LEDGER_FORMAT, "files": dict(sorted(kept.items()))},
                          indent=1) + "\n"
        handle, temp = tempfile.mkstemp(dir=folder, prefix=f"{LEDGER}.", suffix=".tmp")
        follow_umask(temp)  # readable as the files beside it (mkstemp makes it private)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.replace(temp, path)
        finally:
            Path(temp).unlink(missing_ok=True)
    return path


__all__ = ["LEDGER", "LEDGER_FORMAT", "LEDGER_KIND", "Ledger", "file_digest", "is_ours", "matching", "read_ledger",
           "record_written"]
