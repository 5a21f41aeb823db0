"""The Benchmark dock widget: run a dataset through a model, watch the rows arrive, open a case.

A thin shell around :func:`napari_medsam_eval.benchmark.run_benchmark`, the
function ``medsam-eval run`` calls. The widget only composes its sections,
each in its own module and given what it drives, never the widget:

- the run settings (:class:`._bench_settings.RunSettings`: dataset, model,
  checkpoint, precision, protocol, workers, executor, output, ...), which
  make the run's :class:`~napari_medsam_eval.benchmark.config.RunConfig`;
- the results (:class:`._bench_results.ResultsBrowser`: table, per-task
  summary, box plot, the DSC-vs-interactions curve of a ``corrections`` run;
  a double-clicked row, or :data:`NEXT_ROW_KEY`, opens its case);
- two run folders side by side, run A vs run B (:class:`._two_runs.TwoRunsWidget`);
- the actions and footer (:class:`._bench_run.RunFooter`: Run / Cancel /
  Resume, progress, status), whose buttons drive the run
  (:class:`._bench_run.BenchmarkRun`).

All background work goes through :class:`._worker.WorkerRunner`: the widget
makes the run's runner (it locks the settings, moves the footer's bar and
enables Cancel) and the runner that opens a row (same status line), and
hands them to the sections. Every layer change happens in the workers'
callbacks on the GUI thread; errors become napari notifications and the
status line. The dock is tabs over the footer (:func:`._dock_tabs.tabbed_dock`): *run* (the
settings), *rows* (the table, ten rows and more in view in a 1366 x 768 window beside the Compare
dock), *summary* (per-task summary, box plot, effort curve: one click from the rows) and *two
runs*; the rows tab comes to the front when a run starts or rows arrive.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from magicgui.widgets import Container
from psygnal import Signal
from qtpy.QtWidgets import QSizePolicy

from napari_medsam_eval.benchmark.config import RunConfig
from napari_medsam_eval.benchmark.gui_job import CaseStep, Progress, benchmark_job
from napari_medsam_eval._widgets.benchmark._bench_results import NEXT_ROW_KEY, ResultsBrowser
from napari_medsam_eval._widgets.benchmark._bench_run import STEP_SCALE, BenchmarkRun, RunFooter
from napari_medsam_eval._widgets.benchmark._bench_settings import SETTINGS, RunSettings
from napari_medsam_eval._widgets.common._dock_layout import one_label_column
from napari_medsam_eval._widgets.common._dock_tabs import bring_forward, tabbed_dock
from napari_medsam_eval._widgets.common._layers import follow_viewer
from napari_medsam_eval._widgets.common._canvas_style import warm_legend
from napari_medsam_eval._meanwhile import warm_canvas_text, warm_layer_kinds
from napari_medsam_eval._turns import soon
from napari_medsam_eval._widgets.common._prompt_layers import warm_prompt_layers
from napari_medsam_eval._widgets.common._theme import theme_colors
from napari_medsam_eval._widgets.benchmark._two_runs import TwoRunsWidget
from napari_medsam_eval._widgets.common._viewer import real_viewer
from napari_medsam_eval._widgets.common._worker import WorkerRunner

if TYPE_CHECKING:
    import napari

#: the footer's controls, shown as the widget's own attributes (as the settings' are, :data:`SETTINGS`)
FOOTER = ("run_button", "cancel_button", "resume_button", "progress", "status")
#: the dock's tabs, in order
TABS = ("run", "rows", "summary", "two runs")
#: the height the dock asks for (:data:`._dock_tabs.DOCK_HEIGHT`): ten rows and more and the footer, beside the
#: Compare dock in a 1600 x 1000 window; in a shorter one the two give way to each other as tabs (_dock_tabs)
HEIGHT = 480



def warm_up() -> None:
    """Before the first dock is built (on a thread, :func:`napari_medsam_eval._widgets.__getattr__`): napari's
    layer kinds built once (an opened row's layers: its prompt is a Shapes or Points layer, numba compiles)."""
    warm_layer_kinds()
    warm_prompt_layers()

class BenchmarkWidget(Container):
    """Run / cancel / resume a benchmark on a dataset folder; results table, summary and box plot."""

    #: emitted on the GUI thread with the number of rows shown, whenever rows arrive
    rows_added = Signal(int)

    def __init__(self, napari_viewer: "napari.viewer.Viewer") -> None:
        super().__init__(labels=True)
        self.viewer = napari_viewer = real_viewer(napari_viewer)  # not napari's proxy (._viewer)
        colors = theme_colors(napari_viewer)
        self.settings = RunSettings()
        self.footer = footer = RunFooter()
        #: the run's worker (locked settings, Cancel, progress) and the worker opening a row
        self.runner = WorkerRunner(footer.status, [*self.settings.inputs, footer.run_button, footer.resume_button],
                                   footer.cancel_button, footer.progress)
        self.opener = WorkerRunner(footer.status)
        self.browser = ResultsBrowser(napari_viewer, self.opener, colors)
        self.job = BenchmarkRun(self.settings, self.browser, self.runner, on_rows=self.rows_added.emit)
        self.two_runs = TwoRunsWidget(napari_viewer)  # run A vs run B: a section of its own
        for name in SETTINGS:
            setattr(self, name, getattr(self.settings, name))
        for name in FOOTER:
            setattr(self, name, getattr(footer, name))
        self.results, self.effort = self.browser.results, self.browser.effort
        footer.run_button.changed.connect(lambda: self.run())
        footer.resume_button.changed.connect(lambda: self.run(resume=True))
        footer.cancel_button.changed.connect(lambda: self.cancel())
        one_label_column(self.settings, footer)  # the footer's fields line up with the settings'
        follow_viewer(self, [], on_close=self._close)  # a closed widget ends its jobs
        summary = self.browser.summary_page
        for page in (self.browser.native, summary):
            page.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Expanding)  # the table and plots take the height
        pages = ([self.settings.native], [self.browser.native], [summary], [self.two_runs.native])
        #: run | rows | summary | two runs, over the footer (Run/Cancel/Resume, progress, status: always in view)
        self.tabs = tabbed_dock(self, list(zip(TABS, pages)), footer, height=HEIGHT)
        self.browser.next_row_shortcut.setParent(self.native)  # the key works whichever tab is shown
        self.rows_added.connect(lambda _count: self.show_tab("rows", forward=True))
        self.browser.folder_shown.connect(lambda _count: self.show_tab("rows", forward=True))  # a folder: its rows
        soon(self.native, lambda: warm_canvas_text(self.viewer))  # a turn of its own: a first prompt layer draws faster
        warm_legend(self.viewer, self.native)  # the canvas legend's lines, each in a turn of its own

    def show_tab(self, name: str, forward: bool = False) -> None:
        """Bring tab ``name`` (one of :data:`TABS`) to the front (``forward``: the dock too, where docks share a
        place as tabs: rows arriving make it the dock in use)."""
        self.tabs.setCurrentIndex(TABS.index(name))
        if forward:
            bring_forward(self.native)

    def _close(self) -> None:
        """The Qt widget is gone: cancel the run (its finished cases stay stored), end every job."""
        self.runner.close()
        self.browser.end_jobs()
        self.two_runs.end_jobs()

    # -- the sections' state, as the widget's ----------------------------------------

    @property
    def busy(self) -> bool:
        return self.job.busy

    @property
    def last_table(self) -> pd.DataFrame | None:
        """The last finished run's table (as ``run_benchmark`` returned it)."""
        return self.job.last_table

    @property
    def last_status(self) -> str | None:
        """The last run's status (completed, cancelled, failed; None while it runs)."""
        return self.job.last_status

    @property
    def rows_dir(self) -> Path | None:
        """The run folder whose rows the table shows (rows open from there)."""
        return self.browser.rows_dir

    @property
    def opened(self) -> dict[str, Any]:
        """The layers of the last row opened, by role."""
        return self.browser.opened

    # -- what the buttons and keys do --------------------------------------------------

    def request(self, resume: bool = False) -> RunConfig:
        """The run the settings describe; ValueError naming what is missing or wrong."""
        return self.settings.request(resume)

    def run(self, resume: bool = False) -> Any:
        """Start the run the settings describe (``resume``: continue the output folder's run); returns the
        worker, or None when a run is going or the settings are refused."""
        worker = self.job.run(resume)
        if worker is not None:  # its rows in view as they arrive
            self.show_tab("rows")
        return worker

    def cancel(self) -> None:
        """Stop the run within a slice; the rows of finished cases are kept (Resume finishes the run)."""
        self.job.cancel()

    def progress_text(self) -> str:
        """The status line of a running job: cases done, and where the running case is."""
        return self.job.progress_text()

    def load_results(self, out_dir: str | Path) -> int:
        """Show the rows already in the run folder ``out_dir`` now; returns how many. (Choosing a folder in
        the dock reads its rows in a worker: :attr:`loading` until they show.)"""
        return self.browser.load_results(out_dir)

    @property
    def loading(self) -> bool:
        """Whether the rows of the folder chosen last are being read and not shown yet."""
        return self.browser.loading

    def open_row(self, row: dict[str, Any]) -> Any:
        """Open ``row``'s case in the viewer (in a worker); returns it (None while another row opens)."""
        return self.browser.open_row(row)

    def next_row(self) -> Any:
        """Open the table line below the selected one (:data:`NEXT_ROW_KEY`); returns its row."""
        return self.browser.next_row()


__all__ = ["BenchmarkWidget", "CaseStep", "NEXT_ROW_KEY", "Progress", "RunConfig", "STEP_SCALE", "TABS", "benchmark_job"]
