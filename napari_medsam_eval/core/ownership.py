"""Never touch what is not ours: an output is never one of the command's inputs.

The one rule every writing command shares (``segment --out``, ``run --out``,
``report --out``): an output that *overlaps* an input is refused before any
work. Overlapping means the same file or folder once links are resolved
(:func:`os.path.realpath`), the same file under two names (a hard link,
:func:`os.path.samefile`), or one inside the other (a mask written into the
frame folder it was read from, a run folder inside its dataset folder).
Writing there would replace or change the input, e.g. ``segment X.npz --out
X.npz`` would swap the image for the mask.

:func:`folder_contents` is the short listing the refusals of folders that are
not ours (an embedding store, a run folder, a report folder) print, so the
user sees what was protected.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

from .errors import DataError

#: how many entries of a folder an error names
SHOWN_ENTRIES = 4

Named = tuple[str, "str | os.PathLike[str] | None"]


def folder_contents(folder: str | Path, shown: int = SHOWN_ENTRIES) -> str:
    """``"results.csv, img/, notes.txt and 3 more"``: a few entries of ``folder`` (sorted, folders with ``/``)."""
    try:
        with os.scandir(folder) as it:
            names = sorted(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "") for entry in it)
    except OSError as error:
        return f"(cannot be listed: {error.strerror or error})"
    if not names:
        return "nothing"
    listed = ", ".join(names[:shown])
    return listed + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def _inside(inner: str, outer: str) -> bool:
    try:
        return inner != outer and os.path.commonpath([inner, outer]) == outer
    except ValueError:  # different drives (Windows)
        return False


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one of them does not exist (yet)
        return False


def overlap(output: str | os.PathLike[str], source: str | os.PathLike[str]) -> str | None:
    """How ``output`` overlaps ``source`` (``"is"``, ``"lies inside"``, ``"holds"``), or None when apart.

    ``"is"`` also covers a link to ``source`` and a hard link of it.
    """
    real_out, real_in = _real(output), _real(source)
    if real_out == real_in or _same_file(output, source):
        return "is"
    if _inside(real_out, real_in):
        return "lies inside"
    if _inside(real_in, real_out):
        return "holds"
    return None


def _how(output: str | os.PathLike[str], source: str | os.PathLike[str], relation: str) -> str:
    if relation != "is":
        return ""
    if os.path.abspath(os.fspath(output)) == os.path.abspath(os.fspath(source)):
        return ""
    return " (through a link)" if _real(output) == _real(source) else " (the same file under another name)"


def check_not_inputs(outputs: Sequence[Named], inputs: Iterable[Named]) -> None:
    """A :class:`DataError` naming both paths when an output overlaps an input (see the module notes).

    ``outputs`` and ``inputs`` are ``(role, path)`` pairs, e.g. ``("--out", "mask.npz")`` and
    ``("the image", "ct.npz")``; a ``None`` path (an option not given) is skipped.
    """
    sources = [(role, path) for role, path in inputs if path is not None and os.fspath(path) != ""]
    for out_role, output in outputs:
        if output is None:
            continue
        for in_role, source in sources:
            relation = overlap(output, source)
            if relation is not None:
                raise DataError(f"{out_role} {relation} {in_role} {source}{_how(output, source, relation)}; "
                                f"writing there would change the input; give another output path", output)


__all__ = ["SHOWN_ENTRIES", "check_not_inputs", "folder_contents", "overlap"]
