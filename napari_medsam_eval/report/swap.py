"""A report replaced whole or not at all: written aside, then swapped in so its links always resolve.

``report.md`` and ``report.html`` link their figures as ``figures/<name>.png``,
names that stay the same from one report to the next (people and scripts
open ``figures/box_dice.png``). Written in place, a report killed part-way
(SIGKILL, a full disk, the OOM killer) left a report whose figures were
deleted or replaced before the new text existed, and zero-byte temporaries.
Now every report is first written whole into a private folder of the
output folder, its :class:`Stage` (``.medsam-eval-report-tmp-*``), then
swapped in by renames, each atomic (:func:`os.replace`):

1. *interim*: when a new figure would replace one of the current report's,
   ``report.md``/``report.html`` are replaced by the new report whose links
   point into the stage (``.medsam-eval-report-tmp-*/figures/...``); the
   old figures are then linked by nothing;
2. each new figure is copied next to its place and renamed over it;
3. *final*: ``task_summary.csv``, ``report.html`` and ``report.md`` with the
   links to ``figures/`` replace the interim ones;
4. figures of an earlier report that this one did not draw are removed, then
   the stage and the leftovers of reports killed before (:func:`clean_leftovers`).

So at every instant each document links only files that exist, and until
step 1 the previous report is untouched (its text and every figure it
links). Why not the alternatives: new figure names each time (or a new
subfolder) would change the paths people use; a ``figures`` folder swapped
by two renames has an instant with no ``figures`` at all (and an atomic
exchange of two folders is not portable); a symbolic link to swap is not
kept by every copy or archive of a run folder.

Leftovers are only ever our own names: stage folders (whose process is
gone: a live stage holds a lock on its folder, so two reports into one
folder never remove each other's), the copies of step 2, and the
``.<figure>.<8 characters>.png`` / ``.report.md.<8 characters>.tmp``
temporaries an older version could leave (:data:`OLD_TEMPORARIES`).
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Callable, Mapping, Sequence
from ..core.temp_files import folder_beside

#: the prefix of everything a report writes aside: its stage folders, and its figure copies in ``figures/``
TMP_PREFIX = ".medsam-eval-report-tmp-"
#: the figures folder, as the documents link it
FIGURES = "figures"
#: temporaries an older version's atomic writes could leave when killed (``tempfile.mkstemp``'s 8 characters)
OLD_TEMPORARIES = (
    (FIGURES, re.compile(r"\.(box_.+|slices_\d+_.+|error_parts|dsc_vs_interactions)\.[a-z0-9_]{8}\.png")),
    ("", re.compile(r"\.(report\.md|report\.html|task_summary\.csv)\.[a-z0-9_]{8}\.tmp")),
)
_STAGE_NAME = re.compile(re.escape(TMP_PREFIX) + r"[a-z0-9_]{8}")

Render = Callable[[list], str]


try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, so no protection between two reports
    fcntl = None  # type: ignore[assignment]


def _lock(folder: Path) -> int | None:
    """A descriptor holding an exclusive lock on ``folder`` until it is closed or the process ends; None
    where it is held already (or there are no advisory locks)."""
    if fcntl is None:  # pragma: no cover
        return None
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _abandoned(stage: Path) -> bool:
    """A stage folder whose report is not running any more: its lock is free."""
    if stage.is_symlink() or not stage.is_dir():
        return False
    if fcntl is None:  # pragma: no cover
        return True
    try:
        fd = _lock(stage)
    except OSError:
        return False
    if fd is None:
        return False
    os.close(fd)
    return True


def relink(blocks: Sequence[tuple], prefix: str) -> list[tuple]:
    """The blocks with each image or link into ``figures/`` pointing into ``prefix/figures/`` instead."""
    moved = []
    for block in blocks:
        if block[0] == "image" and block[1].startswith(FIGURES + "/"):
            block = (block[0], f"{prefix}/{block[1]}", *block[2:])
        elif block[0] == "link" and block[2].startswith(FIGURES + "/"):
            block = (*block[:2], f"{prefix}/{block[2]}", *block[3:])
        moved.append(block)
    return moved


class Stage:
    """A report written aside in ``out`` (``with Stage(out) as stage``), swapped in by :meth:`commit`.

    Leaving the ``with`` removes the stage, unless the interim documents
    that link into it were swapped in and the final ones were not (an error
    part-way): then the stage stays, so the report in place stays whole,
    and the next report removes it.
    """

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.path = folder_beside(self.out, TMP_PREFIX)
        self._fd = _lock(self.path)
        self._linked = False  # the documents in place link into the stage

    @property
    def figures(self) -> Path:
        """Where the report draws its figures."""
        return self.path / FIGURES

    def __enter__(self) -> "Stage":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if not self._linked:
            shutil.rmtree(self.path, ignore_errors=True)

    def _put(self, name: str, text: str) -> Path:
        path = self.path / name
        path.write_text(text, encoding="utf-8")
        return path

    def commit(self, blocks: Sequence[tuple], documents: Mapping[str, Render], files: Sequence[str] = (),
               stale: Sequence[str] = ()) -> None:
        """Swap the report in (the module's steps 1-4): ``documents`` (name -> render of ``blocks``, in the
        order they are replaced, the main one last), the stage's other ``files``, the figures in
        :attr:`figures`; then remove the figures matching ``stale`` (patterns) not drawn this time."""
        drawn = sorted(p.name for p in self.figures.glob("*.png") if not p.name.startswith(".")) \
            if self.figures.is_dir() else []
        final = {name: self._put(name, render(list(blocks))) for name, render in documents.items()}
        figures = self.out / FIGURES
        if any((figures / name).exists() or (figures / name).is_symlink() for name in drawn):
            interim = relink(blocks, self.path.name)
            for name, render in documents.items():
                os.replace(self._put(name + ".interim", render(interim)), self.out / name)
                self._linked = True
        if drawn:
            figures.mkdir(exist_ok=True)
        for name in drawn:
            copy = figures / f"{self.path.name}-{name}"
            try:
                shutil.copyfile(self.figures / name, copy)
                os.replace(copy, figures / name)
            except BaseException:  # a full disk part-way: no partial copy is left beside the figures
                copy.unlink(missing_ok=True)
                raise
        for name in files:
            os.replace(self.path / name, self.out / name)
        for name, path in final.items():
            os.replace(path, self.out / name)
        self._linked = False
        for pattern in stale:
            for path in figures.glob(pattern):
                if path.name not in drawn and (path.is_file() or path.is_symlink()):
                    path.unlink(missing_ok=True)


def clean_leftovers(out: Path) -> list[Path]:
    """Remove what reports killed part-way left in ``out`` (only our names; see the module notes): their
    stage folders, their figure copies and the older version's temporaries. Returns what was removed."""
    removed: list[Path] = []
    if not out.is_dir():
        return removed
    for entry in out.iterdir():
        if _STAGE_NAME.fullmatch(entry.name) and _abandoned(entry):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    figures = out / FIGURES
    if figures.is_dir() and not figures.is_symlink():
        for entry in figures.iterdir():
            stage = _STAGE_NAME.match(entry.name)
            if stage and entry.name[stage.end():].startswith("-") and not (out / stage.group()).exists() \
                    and entry.is_file():
                entry.unlink(missing_ok=True)
                removed.append(entry)
    for folder, pattern in OLD_TEMPORARIES:
        where = out / folder if folder else out
        if not where.is_dir() or where.is_symlink():
            continue
        for entry in where.iterdir():
            if pattern.fullmatch(entry.name) and entry.is_file() and not entry.is_symlink():
                entry.unlink(missing_ok=True)
                removed.append(entry)
    return removed


__all__ = ["FIGURES", "OLD_TEMPORARIES", "Stage", "TMP_PREFIX", "clean_leftovers", "relink"]
