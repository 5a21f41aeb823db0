"""The Benchmark widget's results section: the rows of a run, their summary and plots; a row opened.

:class:`ResultsBrowser` holds the results view (:class:`._results_table.ResultsView`:
the row table) and, in :attr:`ResultsBrowser.summary_page` (the dock places it), the per-task
summary, the box plot and, for a ``corrections`` run, the DSC-vs-interactions curve of the
selected task (:class:`._effort_plot.EffortPlot`, hidden for other runs). It reads the rows of a run folder, takes the rows a
running job yields, and opens a row in the viewer (:mod:`._open_row`: read in
the worker it is given, layers added one per turn of the event loop);
:data:`NEXT_ROW_KEY` opens the next line of the table.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
from psygnal import Signal
from magicgui.widgets import Container
from napari.utils.notifications import show_warning
from qtpy.QtCore import Qt
from qtpy.QtGui import QKeySequence
from qtpy.QtWidgets import QShortcut, QVBoxLayout, QWidget

from napari_medsam_eval.benchmark import ResultStore
from napari_medsam_eval.benchmark.open_row import missed_lesion
from napari_medsam_eval.evaluation.error_parts import part_name
from napari_medsam_eval._widgets.benchmark import _open_row
from napari_medsam_eval._widgets.benchmark._counterfactuals import FixChoice, beside
from napari_medsam_eval._widgets.benchmark._effort_plot import EffortPlot, effort_of
from napari_medsam_eval._widgets.benchmark._results_table import ResultsView, table_cells
from napari_medsam_eval._widgets.common._shortcuts import BENCHMARK_SHORTCUTS, key_text
from napari_medsam_eval._turns import soon
from napari_medsam_eval._widgets.common._unit_words import in_units, unit_of
from napari_medsam_eval._widgets.common._worker import WorkerRunner

#: the key that opens the next line of the results table (anywhere in the viewer window)
NEXT_ROW_KEY = key_text(BENCHMARK_SHORTCUTS["next_row"])  # Qt writes keys as people do


class ResultsBrowser(Container):
    """The rows shown (:attr:`results`, :attr:`effort`), the run folder they come from, the row opened.

    ``opener`` runs the reading of a row (its status line is the widget's); ``colors`` are the
    viewer theme's (background, text).
    """

    #: a run folder's rows were put in the table (how many): the dock shows them
    folder_shown = Signal(int)

    def __init__(self, viewer: Any, opener: WorkerRunner, colors: tuple[str, str]) -> None:
        super().__init__(labels=False)
        self.margins = (0, 0, 0, 0)
        self.viewer, self.opener = viewer, opener
        #: layers of the last row opened, by role
        self.opened: dict[str, Any] = {}
        #: the run folder whose rows the table shows (rows open from there)
        self.rows_dir: Path | None = None
        #: the run folder whose rows are being read (:meth:`load_results_soon`), None when none is
        self._loading: Path | None = None
        self.results = ResultsView(on_open=self.open_row, colors=colors,
                                   open_hint=f"; {NEXT_ROW_KEY} opens the next line")
        self.effort = EffortPlot(colors=colors)  # shown for runs with DSC curves only
        self.effort.follow(self.results)
        self.native.layout().addWidget(self.results, 1)
        #: what would have fixed the opened row (explain.csv), a variant shown: beside the why filter
        self.fix = FixChoice(viewer, lambda: self.opened)
        beside(self.results.why_filter, self.fix)
        #: the per-task summary, the box plot and the effort plot: the rows' summary, placed by the dock
        self.summary_page = QWidget()
        summary = QVBoxLayout(self.summary_page)
        summary.setContentsMargins(0, 0, 0, 0)
        summary.addWidget(self.results.summary_view, 1)
        summary.addWidget(self.effort)
        self.next_row_shortcut = QShortcut(QKeySequence(NEXT_ROW_KEY), self.native)
        self.next_row_shortcut.setContext(Qt.WindowShortcut)  # anywhere in the viewer's window
        self.next_row_shortcut.activated.connect(self.next_row)

    def end_jobs(self) -> None:
        """The widget is going away: end the row opening and the summary being computed."""
        for runner in (self.opener, self.results.summarizer, self.fix.reader):
            runner.close()

    # -- rows ---------------------------------------------------------------------

    def clear(self) -> None:
        """No rows (a new run starts; rows still being read from a folder are not shown)."""
        self.forget_loading()
        self.results.clear()
        self.effort.set_rows([])

    def add_rows(self, rows: list[dict[str, Any]]) -> int:
        """Rows a running job yields: in the table now, summary and plots within a second; returns the
        number of rows shown."""
        self.results.add_rows(rows, later=True)
        if rows:
            self.effort.set_rows(self.results.rows)
        return len(self.results.rows)

    def settle(self) -> None:
        """The run ended: the summary and plot of the last rows, computed now (in a worker)."""
        if self.results.pending:
            self.results.refresh_soon()

    def load_results(self, out_dir: str | Path) -> int:
        """Show the rows already in the run folder ``out_dir`` now (read on this thread); returns how many."""
        try:
            loaded = read_run_rows(out_dir)
        except Exception as error:  # noqa: BLE001 - a damaged file is reported, not raised into Qt
            self.opener.error(f"cannot read the results in {out_dir}: {error}")
            return 0
        return self._show_rows(Path(out_dir), *loaded)

    def load_results_soon(self, out_dir: str | Path) -> Any:
        """Show the rows already in the run folder ``out_dir``, read in a worker (a folder of 2,000 rows read
        on the GUI thread froze the viewer for 228 ms) and put in the table in a turn of its own
        (:func:`napari_medsam_eval._turns.soon`); returns the worker. The folder chosen last wins."""
        self._loading = Path(out_dir)

        def show(loaded: tuple[list[dict[str, Any]], list[Any], tuple]) -> None:
            if self._loading == Path(out_dir):  # else another folder was chosen meanwhile
                self._show_rows(Path(out_dir), *loaded)
        def failed(_error: BaseException) -> None:
            if self._loading == Path(out_dir):
                self._loading = None
        return self.opener.start(read_run_rows, Path(out_dir), text=f"reading the rows of {Path(out_dir).name} ...",
                                 returned=lambda loaded: soon(self.native, lambda: show(loaded)), errored=failed,
                                 error_prefix=f"cannot read the results in {out_dir}: ")

    def forget_loading(self) -> None:
        """Rows being read (:meth:`load_results_soon`) are not to be shown when they arrive."""
        self._loading = None

    @property
    def loading(self) -> bool:
        """Whether a run folder's rows are being read (:meth:`load_results_soon`) and not shown yet."""
        return self._loading is not None

    def _show_rows(self, out_dir: Path, rows: list[dict[str, Any]], cells: list[Any], effort: tuple) -> int:
        self._loading = None
        self.results.set_rows(rows, cells=cells)
        self.effort.show_effort(*effort)
        self.rows_dir = out_dir
        self.opener.status.value = f"{len(rows)} rows in {out_dir.name}"
        self.folder_shown.emit(len(rows))
        return len(rows)

    # -- a row opened ---------------------------------------------------------------

    def open_row(self, row: dict[str, Any]) -> Any:
        """Open ``row``'s case in the viewer: read in a worker, then image, ground truth, prediction and
        prompt, one layer per turn of the event loop (replacing the last row's). Returns the worker (None
        while another row is opening)."""
        if self.rows_dir is None:
            return self.opener.error("no run folder to open the case from")
        if self.opener.busy:  # two rows opening at once would interleave their layers
            return None
        ack, shown = threading.Event(), {}
        self.fix.forget()
        return self.opener.start(_open_row.open_job, self.rows_dir, row, ack, text=f"opening {row.get('case_id')} ...",
                                 yielded=_open_row.paced(self.native, ack, self.viewer, shown,
                                                         lambda opened: self._show_case(opened, shown)),
                                 error_prefix="cannot open the case: ")

    def next_row(self) -> Any:
        """Open the table line below the selected one (:data:`NEXT_ROW_KEY`); returns its row."""
        return None if self.opener.busy else self.results.next_line()  # (not while a row opens)

    def _show_case(self, loaded: _open_row.RunCase, shown: dict[str, Any]) -> None:
        self.opened = _open_row.finish_open(self.viewer, loaded, shown)  # the Compare widget picks these up itself
        unit = unit_of(loaded.case.kind)
        where = "" if loaded.prompt is None else f", prompt on {unit} {loaded.prompt.slice_index}"
        missed = missed_lesion(loaded.row)
        if missed is not None and loaded.view_slice == missed.get("largest_slice"):
            size = f"{missed['size']}, " if missed.get("size") else ""
            volume = f"{missed['volume_ml']:.2f} mL, " if missed.get("volume_ml") is not None else ""
            where += (f"; on {unit} {loaded.view_slice}: lesion {missed['number']} ({size}{volume}"
                      f"{missed['voxels']} voxels) {what_the_rule_saw(loaded, missed, self.rows_dir)}")
        elif loaded.view_slice is not None and loaded.prediction is not None:
            why = str(loaded.row.get("dominant_error") or "")
            said = f"its main error ({in_units(part_name(why), unit)}) is largest" if why and why != "ok" else "most errors"
            where += f"; on {unit} {loaded.view_slice} {said}"
        self.opener.status.value = f"opened {loaded.case.case_id} ({loaded.row.get('label_name')}{where})"
        self.fix.show_row(self.rows_dir, loaded)  # what would have fixed it, read in a worker
        if loaded.note:
            show_warning(f"{loaded.case.case_id}: {loaded.note}")


def what_the_rule_saw(loaded: _open_row.RunCase, missed: dict[str, Any], run_dir: Any) -> str:
    """How a true lesion the run counted missed met the prediction (``found at DSC 0.54 (IoU 0.37), below the
    IoU 0.5 match``, :func:`~napari_medsam_eval.evaluation.scoring.missed_words`); ``was missed`` without a
    prediction to look at."""
    from napari_medsam_eval.benchmark.manifest import read_manifest
    from napari_medsam_eval.benchmark.schema import row_target
    from napari_medsam_eval.evaluation.mask_comparison import binary_target
    from napari_medsam_eval.evaluation.scoring import lesion_overlap, missed_words
    from napari_medsam_eval.report.lesion_section import rule_of

    target = row_target(loaded.row)
    if loaded.prediction is None or loaded.case.label is None or target is None:
        return "was missed"
    truth = target.mask(loaded.case.label)
    if getattr(target, "instances", False):  # an instance map: each value one lesion
        truth = np.where(truth, loaded.case.label, 0)
    rule = rule_of((read_manifest(run_dir) if run_dir is not None else None) or {})
    predicted = binary_target(loaded.prediction, target.labels, binary_fallback=True)
    dice, iou = lesion_overlap(truth, predicted, int(missed["number"]))
    return missed_words(dice, iou, rule.threshold, rule.match)


def read_run_rows(out_dir: str | Path) -> tuple[list[dict[str, Any]], list[Any], tuple]:
    """The rows of the run folder ``out_dir``, their table cells and their effort curves
    (:func:`._effort_plot.effort_of`); no Qt, any thread."""
    rows = ResultStore(out_dir).recover(truncate=False)
    return rows, table_cells(rows), effort_of(rows)


__all__ = ["NEXT_ROW_KEY", "ResultsBrowser", "read_run_rows"]
