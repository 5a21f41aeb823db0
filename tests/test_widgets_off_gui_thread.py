"""The work behind a result landing and a big run folder stays off the GUI thread, in a real viewer (Xvfb).

No stopwatch (the freeze times are ``benchmarks/responsiveness.py``'s): what keeps the viewer
responsive is asserted instead (``gui_probe``):

* the Compare dock's automatic comparison (a prediction's data changed, as when a propagation's
  result is written or a row opened) computes the masks, the TP/FP/FN map, the DSC and the worst
  slices on a worker thread; the GUI thread puts the overlay in the viewer in one turn of the event
  loop and the numbers and the plot in a later one; the result is the one the synchronous
  comparison gives, and an older comparison still computing is dropped;
* a run folder of 2,000 rows chosen in the dock is read (rows and table cells) on a worker thread and
  shown whole, the rows added to the table's Qt model in one insertion
  (not a table rebuilt or filled item by item), the summary and box plot computed on a worker
  thread and equal to the report's; the table still sorts by value (NaN last);
* a burst of progress steps (the box baseline yields hundreds a second) is shown as two: the first
  at once, the latest when :data:`~napari_medsam_eval._widgets.common._worker.STEP_MS` is over, and
  the last step before the job's end.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from qtpy.QtCore import Qt

from gui_probe import LoopTurns, ThreadLog, on_gui_thread
from plugin_dock import dock
from napari_medsam_eval._widgets.benchmark import _bench_results, _results_table
from napari_medsam_eval._widgets.compare import _compare_metrics
from napari_medsam_eval.benchmark import ResultStore
from napari_medsam_eval.benchmark.store import encode_case, table_of_rows
from napari_medsam_eval.evaluation.mask_comparison import binary_target, compare_masks
from napari_medsam_eval.io import read_label
from napari_medsam_eval.report import summarize_tasks

pytestmark = pytest.mark.gui

HIPPO = "hippocampus_015"
ROWS = 2000
DSC = _results_table.ROW_HEADERS.index("DSC")


def _done(compare) -> bool:
    return not compare.metrics.pending


def test_compare_updates_are_computed_on_a_worker(make_napari_viewer, shared_data, qtbot, monkeypatch):
    root = shared_data / "hippocampus_mri"
    viewer = make_napari_viewer(show=True)
    label = read_label(root / "labelsTr" / f"{HIPPO}.nii.gz").array
    gt_layer = viewer.add_labels(label, name="ground truth", metadata={"role": "ground_truth"})
    gt = label == 2
    threads = ThreadLog(monkeypatch).watch(_compare_metrics, "compute_comparison")
    turns = LoopTurns()
    shown: list[tuple[str, int, bool]] = []  # (what, loop ticks so far, on the GUI thread?)
    original_overlay, original_numbers = _compare_metrics.write_overlay, _compare_metrics.ComparisonSection._show_numbers_now

    def write_overlay(*args, **kwargs):
        shown.append(("overlay", turns.mark(), on_gui_thread()))
        return original_overlay(*args, **kwargs)

    def show_numbers(self, *args, **kwargs):
        shown.append(("numbers", turns.mark(), on_gui_thread()))
        return original_numbers(self, *args, **kwargs)
    monkeypatch.setattr(_compare_metrics, "write_overlay", write_overlay)
    monkeypatch.setattr(_compare_metrics.ComparisonSection, "_show_numbers_now", show_numbers)
    compare = dock(viewer, "compare")
    with turns:
        # a prediction arrives (as a propagation's result does): compared by itself, off the GUI thread
        pred = np.roll(gt, 2, axis=1)
        pred_layer = viewer.add_labels(pred.astype(np.uint8) * 2, name="prediction", metadata={
            "role": "prediction", "target_label": 2})
        qtbot.waitUntil(lambda: compare.comparison is not None and _done(compare), timeout=30_000)
        # its data replaced (a second result): compared again, the overlay layer reused
        overlay = compare.overlay_layer
        shown.clear()
        pred2 = np.roll(gt, 1, axis=2)
        pred_layer.data = pred2.astype(np.uint8) * 2
        qtbot.waitUntil(lambda: threads.count("compute_comparison") == 2 and _done(compare), timeout=30_000)
    assert threads.on_gui == [] and threads.count("compute_comparison") == 2, threads.calls
    # the overlay, then the numbers and plot, on the GUI thread in two turns of the event loop
    assert [what for what, _, _ in shown] == ["overlay", "numbers"] and all(gui for _, _, gui in shown)
    assert shown[1][1] > shown[0][1], shown
    assert compare.overlay_layer is overlay
    assert len([layer for layer in viewer.layers if layer.metadata.get("role") == "overlay"]) == 1
    # the same comparison as the synchronous one (and the core's)
    expected = compare_masks(binary_target(pred_layer.data, 2, binary_fallback=True), binary_target(label, 2))
    result = compare.comparison
    assert result.dice == expected.dice and compare.volume_dice.value == f"{expected.dice:.4f}"
    np.testing.assert_array_equal(result.per_slice, expected.per_slice)
    np.testing.assert_array_equal(compare.overlay_layer.data, expected.overlay)
    np.testing.assert_array_equal(compare.metrics._worst, expected.worst_slices())
    assert compare.status.value == "label 2: prediction vs ground truth"
    now = compare.update_comparison()
    assert now.dice == result.dice and np.array_equal(now.overlay, result.overlay)
    assert gt_layer in viewer.layers


def test_an_older_comparison_is_dropped(make_napari_viewer, shared_data, qtbot):
    root = shared_data / "hippocampus_mri"
    viewer = make_napari_viewer()
    label = read_label(root / "labelsTr" / f"{HIPPO}.nii.gz").array
    viewer.add_labels(label, name="ground truth", metadata={"role": "ground_truth"})
    compare = dock(viewer, "compare")
    pred_layer = viewer.add_labels((label == 1).astype(np.uint8), name="prediction",
                                   metadata={"role": "prediction", "target_label": 1})
    qtbot.waitUntil(lambda: compare.comparison is not None and _done(compare), timeout=30_000)
    # two comparisons asked in a row: only the later one is shown
    first = compare.metrics.compare_soon()
    pred_layer.data = np.zeros_like(pred_layer.data)
    compare.metrics.compare_soon()
    qtbot.waitUntil(lambda: _done(compare) and first not in _running(), timeout=30_000)
    assert compare.comparison.dice == 0.0 and compare.volume_dice.value == "0.0000"


def _running():
    from superqt.utils._qthreading import WorkerBase

    return WorkerBase._worker_set


def _big_folder(folder, rows: int = ROWS):
    """A run folder of ``rows`` rows (two targets per synthetic case, a few NaN and failed rows), written as
    the runner writes it; returns the rows."""
    rng = np.random.default_rng(0)
    blocks = []
    for case in range(rows // 2):
        block = []
        for target, name in ((1, "anterior"), (2, "posterior")):
            failed = case % 97 == 5 and target == 2
            block.append({"case_id": f"synthetic_{case:04d}", "dataset": "hippocampus_mri", "target_label": target,
                          "label_name": name, "task": f"hippocampus_mri/{name}", "model": "box", "protocol": "medsam",
                          "status": "failed" if failed else "ok", "error": "boom" if failed else "",
                          "dice": float("nan") if failed or case % 50 == 3 else float(rng.uniform(0.4, 0.95)),
                          "nsd": float(rng.uniform(0.4, 1.0))})
        blocks.append(block)
    folder.mkdir(parents=True)
    (folder / ResultStore(folder).path.name).write_bytes(b"".join(encode_case(block) for block in blocks))
    return ResultStore(folder).recover(truncate=False)


def test_a_2000_row_folder_is_read_and_summarized_off_the_gui_and_appended_in_one_step(make_napari_viewer, tmp_path,
                                                                                       qtbot, monkeypatch):
    rows = _big_folder(tmp_path / "big")
    assert len(rows) == ROWS
    viewer = make_napari_viewer()
    widget = dock(viewer, "benchmark")
    view = widget.results
    summarized: list[tuple[int, bool]] = []  # (rows, on the GUI thread?) of each summary of some rows
    original = _results_table.summarize_rows

    def summarize_rows(some):
        if some:
            summarized.append((len(some), on_gui_thread()))
        return original(some)
    monkeypatch.setattr(_results_table, "summarize_rows", summarize_rows)
    read: list[bool] = []  # on the GUI thread? of each reading of the folder's rows and their table cells
    original_read = _bench_results.read_run_rows

    def read_run_rows(folder):
        read.append(on_gui_thread())
        return original_read(folder)
    monkeypatch.setattr(_bench_results, "read_run_rows", read_run_rows)
    efforts: list[bool] = []  # on the GUI thread? of each computing of the rows' effort curves
    original_effort = _bench_results.effort_of

    def effort_of(some):
        efforts.append(on_gui_thread())
        return original_effort(some)
    monkeypatch.setattr(_bench_results, "effort_of", effort_of)
    model = view.table.rows_model
    insertions, resets = model.insertions, model.resets
    cells: list[int] = []  # the model's cells read (the table fitting its columns while hidden read them all)
    original_data = type(model).data
    monkeypatch.setattr(type(model), "data", lambda self, *args: cells.append(1) or original_data(self, *args))
    widget.out_dir.value = tmp_path / "big"  # as a user chooses the folder: read in a worker
    assert widget.loading and view.table.rowCount() == 0
    qtbot.waitUntil(lambda: not widget.loading, timeout=60_000)
    assert read == [False] and efforts == [False]
    # every row shown at once, added to the model in one insertion (the table cleared once before)
    assert view.table.rowCount() == ROWS and model.insertions == insertions + 1 and model.resets == resets + 1
    assert view.rows == rows
    assert len(cells) < ROWS, len(cells)  # a hidden table measures no row (shown: the lines in view only)
    qtbot.waitUntil(lambda: not view.pending, timeout=60_000)
    assert summarized == [(ROWS, False)]
    # the summary is the report's
    expected = summarize_tasks(table_of_rows(rows), metrics=("dice", "nsd"))
    pd.testing.assert_frame_equal(view.summary_frame.reset_index(drop=True), expected.reset_index(drop=True))
    assert view.summary.rowCount() == 2
    assert [view.summary.item(line, 1).text() for line in range(2)] == ["1000", "1000 (11 failed)"]
    # lines show their row's texts and numbers; sorting by DSC is by value, NaN last
    for line in (0, 1, ROWS - 1):
        row = view.row_at(line)
        dice = view.table.item(line, DSC).data(Qt.UserRole)
        assert (math.isnan(dice) and math.isnan(row["dice"])) or dice == row["dice"]
        assert view.table.item(line, 0).text() == row["case_id"]
    view.table.sortItems(DSC, Qt.AscendingOrder)
    shown = [view.row_at(line)["dice"] for line in range(ROWS)]
    numbers = [value for value in shown if not math.isnan(value)]
    assert numbers == sorted(numbers) and all(math.isnan(value) for value in shown[len(numbers):])
    assert view.column_values("DSC")[0] == f"{numbers[0]:.4f}"
    failed = next(line for line in range(ROWS) if view.row_at(line)["status"] == "failed")
    assert view.table.item(failed, _results_table.ROW_HEADERS.index("status")).toolTip() == "failed: boom"
    # rows arriving later are appended in one insertion each, in their sorted place
    view.add_rows([{**rows[0], "case_id": "late", "dice": -1.0}], later=True)
    assert view.table.rowCount() == ROWS + 1 and model.insertions == insertions + 2
    assert view.row_at(0)["case_id"] == "late"


def test_a_burst_of_steps_is_shown_as_two(qtbot):
    """Steps arriving faster than STEP_MS: the first shown at once, the latest when the interval ends (each
    shown step repaints the bar at once: a burst would queue one repaint per step into one turn)."""
    import threading

    from magicgui.widgets import Label, ProgressBar

    from napari_medsam_eval._widgets.common._worker import WorkerRunner

    status, bar = Label(), ProgressBar(min=0, max=1, value=0)
    runner = WorkerRunner(status, progress_bar=bar)
    release = threading.Event()

    def job(cancel):  # a generator job (napari's cancellable kind) that waits to be released
        release.wait(30)
        yield from ()
        return "done"
    worker = runner.start(job, text="working", cancellable=True, steps=lambda done, total: f"{done} of {total}")
    for done in range(1, 101):  # a burst, no turn of the event loop in between
        runner.step(done, 100)
    assert runner.pacer.shown == 1 and bar.value == 1 and status.value == "1 of 100"
    qtbot.waitUntil(lambda: runner.pacer.shown == 2, timeout=10_000)
    assert bar.value == 100 and status.value == "100 of 100"
    runner.step(7, 100)  # shown now or, within the interval, at the latest when the job ends
    release.set()
    qtbot.waitUntil(lambda: not runner.busy, timeout=30_000)
    assert runner.pacer.shown == 3 and bar.value == 7
    assert worker is not None


def test_pieces_of_gui_work_queued_together_run_one_per_turn(qtbot):
    """Pieces queued in one go (signals of several workers delivered together) run in order, each in a turn
    of the event loop of its own (the loop ticked between any two); a piece whose owner is gone is dropped (its
    ``dropped`` runs: a row opening's job waiting for it goes on)."""
    from qtpy.QtWidgets import QWidget

    from napari_medsam_eval._turns import Turns

    turns, ran, dropped = Turns(), [], []
    gone = QWidget()
    with LoopTurns(interval_ms=5) as loop:
        for name in ("a", "b", "c"):
            turns.soon(None, lambda name=name: ran.append((name, loop.mark())))
        turns.soon(gone, lambda: ran.append(("gone", loop.mark())), dropped=lambda: dropped.append("gone"))
        turns.soon(None, lambda: ran.append(("d", loop.mark())))
        gone.deleteLater()
        assert ran == [] and turns.waiting == 5  # nothing in the turn that queued them
        qtbot.waitUntil(lambda: turns.waiting == 0, timeout=10_000)
        qtbot.wait(50)
    assert [name for name, _ in ran] == ["a", "b", "c", "d"] and turns.ran == 4 and dropped == ["gone"]
    marks = [mark for _, mark in ran]
    assert all(later > earlier for earlier, later in zip(marks, marks[1:])), ran


def test_the_slice_shown_beyond_the_comparison_shown_is_no_error(make_napari_viewer, qtbot):
    """While a longer volume's comparison computes (a row opening), the viewer may already show a slice
    past the end of the comparison on screen: the slice DSC says the whole one's, nothing raises (under
    PyQt6 an exception in a slot aborts the process; the clinician session found it)."""
    viewer = make_napari_viewer(show=True)
    compare = dock(viewer, "compare")
    short = np.zeros((3, 8, 8), dtype=np.uint8)
    short[1, 2:6, 2:6] = 1
    compare.metrics.comparison = compare_masks(short, short)
    longer = viewer.add_labels(np.zeros((20, 8, 8), dtype=np.uint8), name="longer",
                               metadata={"role": "ground_truth"})
    compare.gt_layer.value = longer
    viewer.dims.set_current_step(0, 14)
    assert compare.metrics.choice.current_index() == 14
    compare.metrics.on_dims()
    assert compare.slice_dice.value == "1.0000"  # the whole comparison's DSC, not a slice's
