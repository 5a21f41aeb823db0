"""One writer per run folder: an exclusive advisory lock on ``<run>/.run.lock``, removed when the run ends.

:class:`RunLock` takes the lock before any model work and gives it back at the end; the lock file goes
with it (a finished run leaves no ``.run.lock``). It is removed while still locked, so a second run that
opened the old file before it went finds, once it has the lock, that the folder's lock file is no longer
the one it locked, and takes the new one instead: two runs never both hold a folder. :func:`lock_held`
says whether a live process holds a folder's lock (``report`` on a run still going says so).
"""
from __future__ import annotations

import os
from pathlib import Path

from ..core.errors import DataError
from .files import LOCK_FILE

#: how many times a lock file that another run removed meanwhile is opened again
_ATTEMPTS = 5


class RunLock:
    """An exclusive lock on a run folder, so two runs never append to one file."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> "RunLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no advisory locks, no check
            return self
        for _attempt in range(_ATTEMPTS):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)  # (the umask takes its share)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise DataError("another run is writing into this run folder", self.path.parent) from None
            if _same_file(fd, self.path):
                self._fd = fd
                return self
            os.close(fd)  # the run that held it removed it as we opened it: the folder's lock is a new file
        raise DataError("another run keeps taking this run folder's lock", self.path.parent)

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            try:
                self.path.unlink(missing_ok=True)  # while still locked: see the module doc
            except OSError:
                pass
            os.close(self._fd)  # closing releases the flock
            self._fd = None


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


def lock_held(run_dir: str | Path) -> bool:
    """Whether a live process holds ``run_dir``'s run lock (a run writing into it now)."""
    path = Path(run_dir) / LOCK_FILE
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY)
    except (ImportError, OSError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # (a shared lock taken here goes with it)
    return False


__all__ = ["RunLock", "lock_held"]
