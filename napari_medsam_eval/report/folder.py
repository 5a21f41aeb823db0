"""Where a report, a comparison or a study is written: never over a file it did not write.

``report RUN`` writes into the results folder it reports on, as it always
has: that folder's report files are the report's. ``report RUN --out DIR``,
``compare A B --out DIR`` and the studies' ``--out DIR`` write into a folder
that may be anyone's, so before any work every file they would replace or
remove there (:data:`REPORT_FILES`, :data:`COMPARE_FILES`, the studies' files)
must be one this package wrote: named with its hash in the folder's ledger
(:mod:`napari_medsam_eval.core.ledger`, :data:`RECORD`), or the folder is a run
folder of this package (its manifest). Anything else is refused, naming the
folder and the files, unless ``overwrite`` (``--overwrite``); a folder inside a
dataset is refused even then. The rule is
:func:`napari_medsam_eval.core.ownership.check_may_write_folder`; new files
are only added. After writing, the ledger lists what was written, so the next
report into the same folder may replace it.

Outputs are also never one of the inputs (the results table, the manifest),
through links too (:func:`napari_medsam_eval.core.ownership.check_not_inputs`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

from ..benchmark.manifest import MANIFEST_FILE, is_run_manifest
from ..core import ledger
from ..core.ledger import LEDGER as RECORD
from ..core.ledger import matching as existing
from ..core.ownership import check_may_write_folder, check_not_inputs
from .effort_section import EFFORT_FIGURE
from .error_section import ERROR_PARTS_FIGURE

#: what ``report --out`` writes or removes (relative paths, shell patterns)
REPORT_FILES = ("report.md", "report.html", "task_summary.csv", "figures/box_*.png", "figures/slices_*.png",
                f"figures/{EFFORT_FIGURE}", f"figures/{ERROR_PARTS_FIGURE}")
#: what ``compare --out`` writes
COMPARE_FILES = ("compare.md", "compare.csv", "paired_difference_*.png")


def read_record(folder: Path) -> set[str] | None:
    """The files the ledger lists (empty without one); None when a file of that name is not our ledger."""
    found = ledger.read_ledger(folder)
    return None if found is None else set(found)


def _is_run_folder(folder: Path) -> bool:
    try:
        return is_run_manifest(json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return False


def check_output_folder(folder: Path, patterns: Sequence[str], what: str, overwrite: bool = False) -> None:
    """A :class:`DataError` when ``what`` would replace or remove a file in ``folder`` it did not write
    (``overwrite``: those are replaced), or when ``folder`` lies in a dataset."""
    from ..datasets.dataset_roots import dataset_holding

    if _is_run_folder(folder):
        return
    check_may_write_folder(folder, patterns, what, overwrite=overwrite, dataset=dataset_holding(folder))


def record_written(folder: Path, patterns: Sequence[str]) -> None:
    """Note in the folder's ledger every file of ``patterns`` there now (each checked or written by us)."""
    if _is_run_folder(folder):
        return
    ledger.record_written(folder, existing(folder, patterns))


def check_apart(outputs: Iterable[Path], inputs: Iterable[Path | None]) -> None:
    """No output file is an input file (the results table, the manifest), through links too."""
    check_not_inputs([("the output", path) for path in outputs],
                     [("the input", path) for path in inputs if path is not None])


__all__ = ["COMPARE_FILES", "RECORD", "REPORT_FILES", "check_apart", "check_output_folder", "existing",
           "read_record", "record_written"]
