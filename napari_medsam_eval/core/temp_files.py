"""Temporary files and folders beside what they become: names that fit, modes that follow the umask.

Every atomic write of the package (a mask, a results table, the manifest, a report, a figure, a ledger)
writes a temporary file in the target's folder and renames it onto the target. Two things went wrong with
``tempfile.mkstemp(prefix=f".{name}.")`` used as it is:

* its file is created with mode 0600 (a folder shared by a lab could not read a run's tables, whereas the
  rows file, made with ``open``, followed the umask): :func:`temporary_beside` gives it the mode ``open``
  would (``0666`` less the umask; ``0777`` for a folder, :func:`folder_beside`);
* its name is the target's plus ten characters, so a legal name of 242-255 bytes failed only at the end, after
  the model's work ("File name too long"): the prefix is cut so the temporary name fits too.

No Qt, no napari.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: the longest file name most file systems take, in bytes
MAX_NAME_BYTES = 255
#: what ``tempfile`` adds to a name: its 8 random characters
_RANDOM = 8


def current_umask() -> int:
    """The process's umask (read from /proc where it can be; else set and put back)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(path: str | Path, folder: bool = False) -> None:
    """Give ``path`` the mode ``open`` (``mkdir`` for a folder) gives a new one: 0666 (0777) less the umask."""
    os.chmod(path, (0o777 if folder else 0o666) & ~current_umask())


def _prefix(name: str, suffix: str) -> str:
    """``.<name>.``, cut so that the prefix, tempfile's random part and ``suffix`` fit in one file name."""
    room = MAX_NAME_BYTES - _RANDOM - len(os.fsencode(suffix)) - 2
    encoded = os.fsencode(name)[:max(room, 1)]
    return f".{os.fsdecode(encoded.decode('utf-8', 'ignore').encode())}."


def temporary_beside(path: str | Path, suffix: str = ".tmp") -> tuple[int, str]:
    """``tempfile.mkstemp`` in ``path``'s folder (an open descriptor and its name), named after ``path`` within
    :data:`MAX_NAME_BYTES`, with the mode a new file gets (:func:`follow_umask`)."""
    path = Path(path)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=_prefix(path.name, suffix), suffix=suffix)
    try:
        os.fchmod(handle, 0o666 & ~current_umask())
    except OSError:  # pragma: no cover - a file system without modes
        pass
    return handle, temp


def folder_beside(path: str | Path, prefix: str) -> Path:
    """``tempfile.mkdtemp`` in ``path`` (a folder) with the mode a new folder gets (not mkdtemp's 0700)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=path))
    follow_umask(folder, folder=True)
    return folder


def name_fits(path: str | Path) -> bool:
    """Whether ``path``'s file name fits in one file name (:data:`MAX_NAME_BYTES` bytes)."""
    return len(os.fsencode(Path(path).name)) <= MAX_NAME_BYTES


__all__ = ["MAX_NAME_BYTES", "current_umask", "folder_beside", "follow_umask", "name_fits", "temporary_beside"]
