"""The Benchmark and Compare widgets keep the viewer responsive, in a real viewer (Xvfb) on real data.

No stopwatch: a loaded 2-core machine stretches every interval, so what keeps the
viewer responsive is asserted instead (``gui_probe``), the same on any machine, and
the freeze times themselves are measured by ``benchmarks/responsiveness.py``:

* opening benchmark rows reads the case and builds its layers on a worker
  thread; the GUI thread only puts one layer in the viewer per turn of the
  event loop (the loop turns between two of them), and rows after the first
  reuse the layers (none added or removed);
* a LiteMedSAM run on MSD hippocampus cases encodes every slice on a worker
  thread while the event loop keeps turning (rows arrive, the bar moves per
  slice), and Cancel ends it within the slice being encoded;
* both docks fit a 1600 x 1000 window.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from napari.layers import Labels
from qtpy.QtCore import QEvent
from qtpy.QtGui import QHelpEvent
from qtpy.QtWidgets import QApplication

from gui_probe import LoopTurns, ThreadLog, on_gui_thread
from plugin_dock import dock
from napari_medsam_eval._widgets.benchmark import _open_row
from napari_medsam_eval._widgets.compare._compare_metrics import ComparisonSection
from napari_medsam_eval._widgets.common import _worker as worker_module
from napari_medsam_eval.benchmark import load_table, read_manifest, run_benchmark
from napari_medsam_eval.benchmark.gui_job import CaseStep
from napari_medsam_eval.datasets import get_layout

# torch's one-time import, before any viewer is shown: under Xvfb torch's import of triton crashes a
# process where Mesa's software OpenGL (its own LLVM) is already loaded
import napari_medsam_eval.models.litemedsam  # noqa: E402,F401 - imported for its side effect
from napari_medsam_eval.models.litemedsam import LiteMedSAMBackend  # noqa: E402

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("no_shared_store")]  # they count encoder passes

#: encoder passes a run may still start after Cancel is clicked: the one in flight finishes, the
#: job checks its cancel event before the next slice
MAX_PASSES_AFTER_CANCEL = 1


@pytest.fixture
def errors(monkeypatch):
    seen: list[str] = []
    monkeypatch.setattr(worker_module, "show_error", seen.append)
    return seen


@pytest.fixture(scope="module")
def box_run(shared_data, tmp_path_factory):
    """A run folder of three hippocampus cases with saved predictions (the box baseline: the opening
    of a row does not depend on the model)."""
    out = tmp_path_factory.mktemp("responsive") / "run"
    run_benchmark(shared_data / "hippocampus_mri", out, model="box", limit=3, save_predictions=True)
    return out


def box_run_dataset(run_dir):
    return Path(read_manifest(run_dir)["config"]["dataset_path"])


def _docked(make_napari_viewer):
    Labels(np.zeros((2, 4, 4), np.uint8))  # napari's one-time Labels set-up, done before any row is opened
    viewer = make_napari_viewer(show=True)
    benchmark, compare = dock(viewer, "benchmark"), dock(viewer, "compare")
    viewer.window._qt_window.resize(1600, 1000)
    return viewer, benchmark, compare


def _finished(worker) -> bool:
    from superqt.utils._qthreading import WorkerBase

    return worker not in WorkerBase._worker_set


def _layer_changes(viewer) -> list[str]:
    """A log of the layers added to and removed from ``viewer`` from now on."""
    changes: list[str] = []
    viewer.layers.events.inserted.connect(lambda event: changes.append(f"added {event.value.name}"))
    viewer.layers.events.removed.connect(lambda event: changes.append(f"removed {event.value.name}"))
    return changes


def _logged(function, name: str, log: list, turns: LoopTurns):
    """``function``, logging its ``name`` and the loop's ticks so far in ``log`` when it is called."""
    def logged(*args, **kwargs):
        log.append((name, turns.mark()))
        return function(*args, **kwargs)
    return logged


def test_opening_rows_never_freezes_the_viewer(make_napari_viewer, box_run, qtbot, errors, monkeypatch):
    viewer, widget, compare = _docked(make_napari_viewer)
    widget.out_dir.value = box_run
    qtbot.waitUntil(lambda: not widget.loading, timeout=60_000)  # the rows are read in a worker
    view = widget.results
    assert view.table.rowCount() == 6
    qtbot.wait(300)
    rows = [view.row_at(line) for line in range(view.table.rowCount())]
    layout = get_layout("msd")
    cases = {ref.case_id: layout.load(ref).label for ref in layout.list_cases(box_run_dataset(box_run))
             if ref.case_id in {row["case_id"] for row in rows}}
    threads = ThreadLog(monkeypatch).watch(_open_row, "load_run_case").watch(_open_row, "open_steps")
    turns = LoopTurns()
    applied: list[tuple[int, bool]] = []  # per layer put in the viewer: the loop's ticks so far, on the GUI?
    shown: list[str] = []  # the status line while layers are put in the viewer
    original_apply = _open_row.apply_step

    pieces: list[tuple[str, int]] = []  # every piece of GUI work of a row opening: its name, the ticks so far

    def apply_step(*args, **kwargs):
        applied.append((turns.mark(), on_gui_thread()))
        shown.append(widget.status.value)
        return original_apply(*args, **kwargs)
    monkeypatch.setattr(_open_row, "apply_step", apply_step)
    for owner, name in ((_open_row, "apply_step"), (type(widget.browser), "_show_case"),
                        (ComparisonSection, "_show_computed"), (ComparisonSection, "_show_numbers")):
        monkeypatch.setattr(owner, name, _logged(getattr(owner, name), name, pieces, turns))
    changes = _layer_changes(viewer)
    drawn: dict[int, list[tuple[int, bool]]] = {}  # per new layer (id): (ticks, visible) when added, then when shown

    def watch_drawing(event) -> None:
        layer = event.value
        drawn[id(layer)] = [(turns.mark(), layer.visible)]
        layer.events.visible.connect(lambda _e, key=id(layer), layer=layer: drawn[key].append((turns.mark(),
                                                                                             layer.visible)))
    viewer.layers.events.inserted.connect(watch_drawing)
    # three cases, both targets: the first open adds the layers, the others reuse them
    order = sorted(rows, key=lambda r: (r["case_id"], -int(r["target_label"])))
    for number, row in enumerate(order[::2] + [order[1]]):
        applied.clear()
        shown.clear()
        changes.clear()
        with turns:
            worker = widget.open_row(row)
            qtbot.waitUntil(lambda: _finished(worker), timeout=60_000)
            qtbot.waitUntil(lambda: compare.comparison is not None and compare.status.value.startswith(
                f"label {int(row['target_label'])}: {row['case_id']} prediction"), timeout=10_000)
        assert errors == []
        # reading the case and building its layers ran on the worker, each layer was put in the viewer
        # on the GUI thread in a turn of its own (the loop ticked between two of them: it repainted)
        assert threads.count("load_run_case") == number + 1 and threads.count("open_steps") == number + 1
        assert threads.on_gui == [] and len(applied) >= 4 and all(gui for _, gui in applied), threads.calls
        marks = [mark for mark, _ in applied]
        assert all(later > earlier for earlier, later in zip(marks, marks[1:])), marks
        # and so did every other piece of GUI work, whichever widget's: the case brought into view, the
        # Compare widget's overlay and numbers (pieces landing together would freeze the viewer for their sum)
        names = [name for name, _ in pieces]
        assert {"_show_case", "_show_computed", "_show_numbers"} <= set(names), names
        marks = [mark for _, mark in pieces]
        assert all(later > earlier for earlier, later in zip(marks, marks[1:])), pieces
        pieces.clear()
        # while napari sets up the layers (the first row: new layers) the dock says what is going on
        assert all(text.startswith(f"opening {row['case_id']}") for text in shown), shown
        # rows after the first reuse its layers: napari builds no new layer controls or canvas visuals
        if number:
            assert changes == [], changes
        else:  # the first row's new layers: each added hidden and drawn first in a later turn of its own
            opened = [drawn[id(layer)] for layer in widget.opened.values()]
            assert len(opened) >= 4 and all(not log[0][1] and log[1][1] and log[1][0] > log[0][0]
                                             for log in opened), drawn
        # the Compare widget compares this row's prediction for its target and finds the row's DSC
        assert compare.pred_layer.value is widget.opened["prediction"]
        assert compare.target_label.value == int(row["target_label"])
        if int(row["target_label"]) == 2:  # label 2 wins overlaps in the saved map: its DSC is exact
            assert compare.comparison.dice == pytest.approx(row["dice"], abs=1e-9)
        assert widget.opened["image"].name == row["case_id"]
        np.testing.assert_array_equal(widget.opened["ground_truth"].data, cases[row["case_id"]])
        # one layer per role, whatever the number of rows opened: nothing piles up
        roles = [layer.metadata.get("role", "image") for layer in viewer.layers]
        assert sorted(roles) == ["error_parts", "ground_truth", "image", "overlay", "prediction", "prompt_boxes"]
    # the opened layers stay (through napari's proxies they were removed about a second later)
    qtbot.wait(2000)
    assert all(widget.opened[role] in viewer.layers for role in ("image", "ground_truth", "prediction"))
    assert compare.comparison is not None and compare.volume_dice.value not in ("", "-")


@pytest.mark.slow
def test_litemedsam_run_moves_per_slice_never_freezes_and_cancels_quickly(make_napari_viewer, shared_data,
                                                                         tmp_path, qtbot, errors, monkeypatch):
    viewer, widget, _compare = _docked(make_napari_viewer)
    out = tmp_path / "run"
    widget.dataset.value = shared_data / "hippocampus_mri"
    widget.out_dir.value = out
    widget.model.value = "litemedsam"
    widget.limit.value = 3
    threads = ThreadLog(monkeypatch).watch(LiteMedSAMBackend, "_run_encoder", "encoder pass")
    steps: list[CaseStep] = []
    bar: list[int] = []
    ticks: list[int] = []  # the loop's tick count at each step shown
    turns = LoopTurns()
    original = widget.job.on_progress

    def spy(step) -> None:
        original(step)
        if isinstance(step, CaseStep):
            steps.append(step)
            bar.append(widget.progress.value)
            ticks.append(turns.mark())
    widget.job.on_progress = spy
    qtbot.wait(300)
    with turns:
        worker = widget.run()
        # the first case's rows arrive, then the second case gets going
        qtbot.waitUntil(lambda: widget.results.table.rowCount() == 2, timeout=600_000)
        qtbot.waitUntil(lambda: any(s.case_id != steps[0].case_id and s.done >= 3 for s in steps), timeout=300_000)
        running = steps[-1]
        passes = threads.count("encoder pass")
        widget.cancel_button.native.click()
        qtbot.waitUntil(lambda: _finished(worker) and widget.run_button.enabled, timeout=300_000)
    after_cancel = threads.count("encoder pass") - passes
    print(f"encoder passes {passes} before Cancel, {after_cancel} after (at {running}); "
          f"loop ticks {turns.ticks} over {len(steps)} steps")
    assert errors == [] and widget.last_status == "cancelled"
    # every encoder pass ran on the worker; the loop turned between the steps shown (the viewer was free)
    assert passes >= 3 and threads.on_gui == [], threads.on_gui
    assert sum(later > earlier for earlier, later in zip(ticks, ticks[1:])) >= len(ticks) // 2, ticks
    # Cancel ends the run within the slice being encoded
    assert after_cancel <= MAX_PASSES_AFTER_CANCEL, after_cancel
    # the bar moved with the slices of each case, up and within the case's share
    first = [v for s, v in zip(steps, bar) if s.case_id == steps[0].case_id]
    assert len(set(first)) > 10 and first == sorted(first) and max(first) <= 100
    # the case cancelled is neither done nor failed: only the first case's rows, none failed
    table = load_table(out)
    assert set(table["case_id"]) == {steps[0].case_id} and set(table["status"]) == {"ok"}
    assert running.case_id not in set(table["case_id"]) and read_manifest(out)["status"] == "cancelled"
    assert widget.results.table.rowCount() == 2 and widget.resume_button.enabled


def test_both_docks_fit_a_1600_by_1000_window(make_napari_viewer, box_run, qtbot):
    viewer, widget, compare = _docked(make_napari_viewer)
    widget.out_dir.value = box_run  # rows, summary and plot filled
    qtbot.waitUntil(lambda: not widget.loading, timeout=60_000)
    window = viewer.window._qt_window
    qtbot.wait(300)
    hint = window.minimumSizeHint()
    print(f"window {window.width()}x{window.height()}, minimum size hint {hint.width()}x{hint.height()}")
    assert window.height() <= 1000 and window.width() <= 1600
    assert hint.height() <= 1000 and hint.width() <= 1600
    summary = widget.results.summary
    assert summary.rowCount() == 2  # anterior and posterior hippocampus: both lines visible
    assert summary.viewport().height() >= sum(summary.rowHeight(line) for line in range(2))

    # long messages wrap instead of widening the docks; the whole text shows on hover
    widths = (widget.native.minimumSizeHint().width(), compare.native.minimumSizeHint().width())
    long_path = "/a/very/long/folder/name/without/any/space" * 12
    for label in (widget.status, compare.status):
        label.value = f"cannot read the results in {long_path}: " + "a long reason " * 40
    qtbot.wait(100)
    assert (widget.native.minimumSizeHint().width(), compare.native.minimumSizeHint().width()) == widths
    assert window.minimumSizeHint().width() <= 1600 and window.width() <= 1600
    for label in (widget.status, compare.status):
        native = label.native
        centre = native.rect().center()
        QApplication.sendEvent(native, QHelpEvent(QEvent.ToolTip, centre, native.mapToGlobal(centre)))
        assert native.wordWrap() and native.toolTip() == label.value
