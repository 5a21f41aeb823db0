"""Replacing an earlier run in its folder (``RunConfig(overwrite=True)``): its files, and nothing else.

A second run into a folder that holds a run is refused unless it resumes (``resume``) or replaces
(``overwrite``) the earlier one. Replacing removes what a run and its report wrote there: the run's own
files (:mod:`.files`: rows, tables, manifest, log, ``lesions.csv``, ``explain.csv`` and its masks), its saved
predictions (``predictions/``), the long cells of its rows (``records/``), the report ``report RUN`` writes beside them (its pages, table and figures)
and every file the folder's ledger (:mod:`napari_medsam_eval.core.ledger`) names as ours with its bytes
unchanged, then the ledger. A folder that is not a run
folder of this tool, or that holds anything else (a note, an edited report, a file of another tool), is
refused before anything is removed, naming what is in the way.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from ..core.errors import DataError
from ..core.ledger import LEDGER, is_ours, read_ledger
from .files import (CSV_FILE, EXPLAIN_FILE, EXPLAIN_FOLDER, LESIONS_FILE, LOCK_FILE, LOG_FILE, MANIFEST_FILE,
                    PARQUET_FILE, RECORDS_DIR, ROWS_FILE)
from .manifest import check_run_folder
from .prediction_files import PREDICTIONS_DIR

#: the files a run writes in its folder
RUN_FILES = (ROWS_FILE, CSV_FILE, PARQUET_FILE, LESIONS_FILE, EXPLAIN_FILE, MANIFEST_FILE, LOG_FILE)
#: the folders a run writes in its folder (everything inside them is the run's)
RUN_FOLDERS = (PREDICTIONS_DIR, EXPLAIN_FOLDER, RECORDS_DIR)
#: what ``report RUN`` writes into the run folder itself (report.folder's ``REPORT_FILES``, which lie in a room
#: above this one: a test holds the two together): its pages and table, and its figures (PNG) in ``figures/``
REPORT_FILES = ("report.md", "report.html", "task_summary.csv")
REPORT_FIGURES = ("figures", ".png")


def earlier_run_entries(out_dir: Path) -> list[Path]:
    """What replacing the run in ``out_dir`` removes (files and folders), or a :class:`DataError` naming the
    folder and what it holds that is not the run's (nothing is removed). Reads only."""
    check_run_folder(out_dir)
    ledger = read_ledger(out_dir) or {}
    removed: list[Path] = []
    foreign: list[str] = []
    for path in sorted(out_dir.iterdir()):
        name, folder = path.name, path.is_dir() and not path.is_symlink()
        if name in (LOCK_FILE, LEDGER):
            continue
        if (folder and name in RUN_FOLDERS) or (not folder and name in RUN_FILES + REPORT_FILES):
            removed.append(path)
            continue
        inside = [p for p in path.rglob("*") if p.is_symlink() or not p.is_dir()] if folder else [path]
        for item in inside:  # a folder of the report's (figures/): each file in it must be ours
            relative = item.relative_to(out_dir).as_posix()
            figure = relative.startswith(REPORT_FIGURES[0] + "/") and relative.endswith(REPORT_FIGURES[1])
            if figure or is_ours(out_dir, relative, ledger):
                removed.append(item)
            else:
                foreign.append(relative)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f", ... ({len(foreign)} in all)" if len(foreign) > 5 else "")
        raise DataError(f"overwrite replaces an earlier run's own files only; the folder also holds {shown}: "
                        "move them, or choose a new folder", out_dir)
    return removed


def clear_earlier_run(out_dir: Path) -> int:
    """Remove the earlier run in ``out_dir`` (:func:`earlier_run_entries`), then its ledger and the folders it
    leaves empty; returns the number of entries removed."""
    entries = earlier_run_entries(out_dir)
    for path in entries:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    (out_dir / LEDGER).unlink(missing_ok=True)
    for folder in sorted((p for p in out_dir.rglob("*") if p.is_dir() and not p.is_symlink()), reverse=True):
        try:
            folder.rmdir()  # only when empty (a figures/ folder the report's files left)
        except OSError:
            pass
    return len(entries)


__all__ = ["REPORT_FIGURES", "REPORT_FILES", "RUN_FILES", "RUN_FOLDERS", "clear_earlier_run", "earlier_run_entries"]
