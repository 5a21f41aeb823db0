"""Where a report or a comparison is written: never over a file it did not write.

``report RUN`` writes into the results folder it reports on, as it always
has: that folder's report files are the report's. ``report RUN --out DIR``
and ``compare A B --out DIR`` write into a folder that may be anyone's, so
before any work every file they would replace or remove there
(:data:`REPORT_FILES`, :data:`COMPARE_FILES`) must be one this package wrote:
listed in the folder's record :data:`RECORD`, or the folder is a run folder of
this package (its manifest). Anything else is refused, naming the folder and
the files; new files are only added. After writing, the record lists what was
written, so the next report into the same folder may replace it.

Outputs are also never one of the inputs (the results table, the manifest),
through links too (:func:`napari_medsam_eval.core.ownership.check_not_inputs`).
"""
from __future__ import annotations

import json
import os
from fnmatch import fnmatch
from pathlib import Path
from typing import Iterable, Sequence

from ..benchmark.manifest import MANIFEST_FILE, is_run_manifest
from ..core.errors import DataError
from ..core.ownership import SHOWN_ENTRIES, check_not_inputs
from . import markup as mk
from .effort_section import EFFORT_FIGURE

#: the record of the files this package wrote into a folder that is not a run folder
RECORD = ".medsam-eval-written.json"
RECORD_KIND = "napari-medsam-eval written files"
#: what ``report --out`` writes or removes (relative paths, shell patterns)
REPORT_FILES = ("report.md", "report.html", "task_summary.csv", "figures/box_*.png", "figures/slices_*.png",
                f"figures/{EFFORT_FIGURE}")
#: what ``compare --out`` writes
COMPARE_FILES = ("compare.md", "compare.csv", "paired_difference_*.png")


def existing(folder: Path, patterns: Sequence[str]) -> list[str]:
    """The entries of ``folder`` (relative POSIX paths) that match ``patterns``."""
    found = set()
    for pattern in patterns:
        parent, _, name = pattern.rpartition("/")
        try:
            with os.scandir(folder / parent if parent else folder) as it:
                found.update(f"{parent}/{e.name}" if parent else e.name for e in it if fnmatch(e.name, name))
        except (FileNotFoundError, NotADirectoryError):
            continue
    return sorted(found)


def read_record(folder: Path) -> set[str] | None:
    """The files the record lists (empty without a record); None when a file of that name is not our record."""
    path = folder / RECORD
    if not path.exists() and not path.is_symlink():
        return set()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) and data.get("kind") == RECORD_KIND else None
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files) or path.is_symlink():
        return None
    return set(files)


def _is_run_folder(folder: Path) -> bool:
    try:
        return is_run_manifest(json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return False


def check_output_folder(folder: Path, patterns: Sequence[str], what: str) -> None:
    """A :class:`DataError` when ``what`` would replace or remove a file in ``folder`` it did not write."""
    if not folder.is_dir() or _is_run_folder(folder):
        return
    recorded = read_record(folder)
    if recorded is None:
        raise DataError(f"{RECORD} there is not the record medsam-eval keeps of the files it wrote; "
                        f"give another folder for the {what}", folder)
    foreign = [name for name in existing(folder, patterns) if name not in recorded]
    if foreign:
        shown = ", ".join(foreign[:SHOWN_ENTRIES]) + (f" and {len(foreign) - SHOWN_ENTRIES} more"
                                                      if len(foreign) > SHOWN_ENTRIES else "")
        raise DataError(f"the {what} would replace {shown}, which medsam-eval did not write there; give an "
                        "empty or new folder", folder)


def record_written(folder: Path, patterns: Sequence[str]) -> None:
    """List in the folder's record every file of ``patterns`` there now (each checked or written by us)."""
    if _is_run_folder(folder):
        return
    kept = {name for name in read_record(folder) or set() if (folder / name).exists()}
    files = kept | set(existing(folder, patterns))
    mk.write_text(folder / RECORD, json.dumps({"kind": RECORD_KIND, "files": sorted(files)}, indent=1) + "\n")


def check_apart(outputs: Iterable[Path], inputs: Iterable[Path | None]) -> None:
    """No output file is an input file (the results table, the manifest), through links too."""
    check_not_inputs([("the output", path) for path in outputs],
                     [("the input", path) for path in inputs if path is not None])


__all__ = ["COMPARE_FILES", "RECORD", "REPORT_FILES", "check_apart", "check_output_folder", "existing",
           "read_record", "record_written"]
