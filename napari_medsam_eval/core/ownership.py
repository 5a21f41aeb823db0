"""Never touch what is not ours: an output is never one of the command's inputs, nor a file we did not write.

The one rule every writing command shares (``segment --out``, ``run --out``,
``report --out``): an output that *overlaps* an input is refused before any
work. Overlapping means the same file or folder once links are resolved
(:func:`os.path.realpath`), the same file under two names (a hard link,
:func:`os.path.samefile`), or one inside the other (a mask written into the
frame folder it was read from, a run folder inside its dataset folder).
Writing there would replace or change the input, e.g. ``segment X.npz --out
X.npz`` would swap the image for the mask.

The second rule, :func:`check_may_write` (one file) and
:func:`check_may_write_folder` (the files a report or study writes into a
folder): an existing file is only replaced when it is ours, i.e. the folder's
ledger (:mod:`.ledger`) names it with the hash of its current bytes, or when
the user says ``--overwrite`` (the napari writer: napari's save dialog has
asked). A path inside a dataset folder is refused even with ``--overwrite``:
ground truths and images are never replaced, and no output is added among
them. Which folders are datasets is the dataset layouts' knowledge
(:func:`napari_medsam_eval.datasets.dataset_roots.dataset_holding`); the
caller passes what it says as ``dataset``, since this room cannot import them.

:func:`folder_contents` is the short listing the refusals of folders that are
not ours (an embedding store, a run folder, a report folder) print, so the
user sees what was protected.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

from .errors import DataError
from .ledger import LEDGER, Ledger, is_ours, matching, read_ledger

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


#: what a refusal of an output inside a dataset says after where it is
NEVER_IN_A_DATASET = ("medsam-eval never writes into a dataset folder, not even when told to overwrite (--overwrite):"
                      " its ground truths and images stay as they are; give a path outside it")


def _shown(names: Sequence[str], shown: int = SHOWN_ENTRIES) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _ledger_of(folder: Path) -> Ledger:
    """The folder's ledger; a DataError when a file of its name is someone else's (it is never replaced)."""
    ledger = read_ledger(folder)
    if ledger is None:
        raise DataError("is not the ledger medsam-eval keeps of the files it wrote there, so nothing can be "
                        "written beside it; give another folder", folder / LEDGER)
    return ledger


def check_may_write(path: str | os.PathLike[str], *, overwrite: bool = False, option: str = "--out",
                    dataset: str | None = None) -> Path:
    """``path`` when a file may be written there, else a :class:`DataError` naming it (the module notes).

    ``dataset``: where ``path`` lies in a dataset (``"lies inside the dataset folder ..."``), None when it
    does not: refused even with ``overwrite``. An existing file that is not ours is refused unless
    ``overwrite``. Called before any work; the writer notes what it wrote with
    :func:`napari_medsam_eval.core.ledger.record_written` afterwards.
    """
    path = Path(path)
    if dataset is not None:
        raise DataError(f"{option} {dataset}; {NEVER_IN_A_DATASET}", path)
    ledger = _ledger_of(path.parent)
    there = path.exists() or path.is_symlink()
    if there and not overwrite and not is_ours(path.parent, path.name, ledger):
        raise DataError(f"{option} would replace this file, which medsam-eval did not write (or which changed since"
                        "); give --overwrite to replace it, or another path", path)
    return path


def check_may_write_folder(folder: str | os.PathLike[str], patterns: Sequence[str], what: str, *,
                           overwrite: bool = False, dataset: str | None = None) -> list[str]:
    """The files of ``patterns`` in ``folder`` that are not ours (replaced only with ``overwrite``), else a
    :class:`DataError` naming the folder and them; ``dataset`` as in :func:`check_may_write`."""
    folder = Path(folder)
    if dataset is not None:
        raise DataError(f"the {what} folder {dataset}; {NEVER_IN_A_DATASET}", folder)
    if not folder.is_dir():
        return []
    ledger = _ledger_of(folder)
    foreign = [name for name in matching(folder, patterns) if not is_ours(folder, name, ledger)]
    if foreign and not overwrite:
        raise DataError(f"the {what} would replace {_shown(foreign)}, which medsam-eval did not write there (or "
                        "which changed since); give an empty or new folder, or --overwrite to replace them", folder)
    return foreign


__all__ = ["NEVER_IN_A_DATASET", "SHOWN_ENTRIES", "check_may_write", "check_may_write_folder", "check_not_inputs",
           "folder_contents", "overlap"]
