"""The Benchmark widget in a real viewer (Xvfb) on the real hippocampus MRI dataset.

The LiteMedSAM run is limited to three cases (about a minute a case on two
loaded CPU cores); cancelling and resuming use the ``box`` baseline, which
runs a case in well under a second, since the model does not matter there.
Every number the widget shows is checked against the run folder the same
core runner wrote.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
from qtpy.QtCore import Qt

from plugin_dock import dock, undock
from napari_medsam_eval._widgets import BenchmarkWidget
from napari_medsam_eval._widgets.common import _worker as worker_module
from napari_medsam_eval._widgets.benchmark import dock as benchmark_module
from napari_medsam_eval._widgets.common._layers import current_index
from napari_medsam_eval._widgets.benchmark._results_table import ROW_HEADERS
from napari_medsam_eval.evaluation.error_parts import error_parts, part_masks
from napari_medsam_eval.benchmark import CaseStep, load_table, read_manifest, run_benchmark
from napari_medsam_eval.datasets import get_layout
from napari_medsam_eval.io import read_label
from napari_medsam_eval.core.prompt import prompts_from_json

pytestmark = pytest.mark.gui

TIMEOUT_MS = 1_800_000
DSC = ROW_HEADERS.index("DSC")


@pytest.fixture
def errors(monkeypatch):
    """Error notifications the widget raises (napari's show_error, captured)."""
    seen: list[str] = []
    monkeypatch.setattr(worker_module, "show_error", seen.append)
    return seen


def _wait(qtbot, worker, timeout: int = TIMEOUT_MS) -> None:
    """Until ``worker`` has finished and its finished handlers ran (see tests/test_widgets_segment.py)."""
    from superqt.utils._qthreading import WorkerBase

    qtbot.waitUntil(lambda: worker not in WorkerBase._worker_set, timeout=timeout)


def _widget(viewer, dataset, out, model: str = "litemedsam", limit: int = 3) -> BenchmarkWidget:
    widget = dock(viewer, "benchmark")
    widget.dataset.value = dataset
    widget.out_dir.value = out
    widget.model.value = model
    widget.limit.value = limit
    return widget


def _most_errors_shown(viewer, layers, target: int) -> int:
    """The slice the viewer shows of the opened row; it must be the one where the prediction's dominant error
    part (why it missed) is largest (a result without one: the most FP + FN voxels), the image visible."""
    truth, predicted = layers["ground_truth"].data == target, layers["prediction"].data == target
    parts = error_parts(predicted, truth)
    wrong = part_masks(predicted, truth)[parts.dominant] if parts.dominant != "ok" else truth ^ predicted
    errors = wrong.sum(axis=(1, 2))
    shown = current_index(viewer, layers["image"])
    assert errors.max() > 0 and errors[shown] == errors.max() and layers["image"].visible, (shown, errors)
    return shown


def _shown(widget) -> dict[tuple[str, str], str]:
    """(case, target) -> DSC text of every table line."""
    view = widget.results
    return {(c, t): d for c, t, d in zip(view.column_values("case"), view.column_values("target"),
                                         view.column_values("DSC"))}


def _expected(table) -> dict[tuple[str, str], str]:
    return {(r.case_id, f"{r.label_name} ({int(r.target_label)})"): f"{r.dice:.4f}" for r in table.itertuples()}


@pytest.mark.slow
def test_litemedsam_run_table_summary_and_open_case(make_napari_viewer, shared_data, tmp_path, qtbot, errors):
    viewer = make_napari_viewer()
    dataset, out = shared_data / "hippocampus_mri", tmp_path / "run"
    widget = _widget(viewer, dataset, out)
    assert widget.model.value == "litemedsam" and widget.protocol.value == "medsam2"
    worker = widget.run()
    assert worker is not None and widget.busy and not widget.run_button.enabled and widget.cancel_button.enabled
    _wait(qtbot, worker)
    assert errors == [] and not widget.busy and widget.run_button.enabled
    assert widget.last_status == "completed"
    qtbot.waitUntil(lambda: not widget.results.pending, timeout=30_000)  # summary and plot: off the GUI thread
    assert widget.progress.value == widget.progress.max == 3 * benchmark_module.STEP_SCALE

    # the table shows the run folder's rows, DSC to 4 decimals, the exact value behind each item
    table = load_table(out)
    assert len(table) == 6 and set(table["status"]) == {"ok"}
    assert _shown(widget) == _expected(table)
    view = widget.results
    by_key = {(r.case_id, r.label_name): r.dice for r in table.itertuples()}
    for line in range(view.table.rowCount()):
        row = view.row_at(line)
        assert view.table.item(line, DSC).data(Qt.UserRole) == pytest.approx(by_key[row["case_id"], row["label_name"]])
    view.table.sortItems(DSC, Qt.AscendingOrder)  # numeric sort
    shown = [view.table.item(line, DSC).data(Qt.UserRole) for line in range(view.table.rowCount())]
    assert shown == sorted(table["dice"].tolist())

    # per-task summary: the task medians of the folder's rows
    summary = view.summary
    assert summary.rowCount() == 2
    for line in range(2):
        task = summary.item(line, 0).toolTip()  # the whole name (the cell: the part that tells the tasks apart)
        assert summary.item(line, 0).text() == task.split("/")[-1]
        values = table.loc[table["task"] == task, "dice"].to_numpy()
        assert summary.item(line, 1).text() == "3"
        assert summary.item(line, 2).text() == f"{np.median(values):.4f}"
        q25, q75 = np.percentile(values, [25, 75])
        assert summary.item(line, 3).text() == f"[{q25:.3f}, {q75:.3f}]"
        nsd = table.loc[table["task"] == task, "nsd"].to_numpy()
        assert summary.item(line, 4).text() == f"{np.median(nsd):.4f}"
    assert len(view.axes.get_xticks()) == 2  # one box per task

    # double-click a posterior row (label 2: it wins overlaps in the saved label map, so its DSC is exact)
    compare = dock(viewer, "compare")
    line = next(i for i in range(view.table.rowCount()) if view.row_at(i)["target_label"] == 2)
    row = view.row_at(line)
    item = view.table.item(line, 0)
    view.table.scrollToItem(item)
    rect = view.table.visualItemRect(item)
    qtbot.mouseClick(view.table.viewport(), Qt.LeftButton, pos=rect.center())
    qtbot.mouseDClick(view.table.viewport(), Qt.LeftButton, pos=rect.center())
    opener = widget.opener.worker
    assert opener is not None
    _wait(qtbot, opener)
    assert errors == []
    layers = widget.opened
    assert {"image", "ground_truth", "prediction", "prompt_boxes"} <= set(layers)
    ref = next(r for r in get_layout("msd").list_cases(dataset) if r.case_id == row["case_id"])
    case = get_layout("msd").load(ref)
    np.testing.assert_array_equal(layers["image"].data, case.image)
    np.testing.assert_array_equal(layers["ground_truth"].data, case.label)
    prediction = read_label(out / row["prediction_path"]).array
    np.testing.assert_array_equal(layers["prediction"].data, prediction)
    assert layers["prediction"].metadata["role"] == "prediction" and layers["prediction"].metadata["target_label"] == 2
    (prompt,) = prompts_from_json(row["prompt"])
    (vertices,) = layers["prompt_boxes"].data
    x0, y0, x1, y1 = prompt.boxes[0]
    np.testing.assert_allclose(vertices[:, 0], prompt.slice_index)
    np.testing.assert_allclose([vertices[:, 2].min(), vertices[:, 1].min(), vertices[:, 2].max(), vertices[:, 1].max()],
                               [x0 - 0.5, y0 - 0.5, x1 + 0.5, y1 + 0.5])
    assert prompt.slice_index == row["prompt_slice"]
    _most_errors_shown(viewer, layers, 2)  # in view where the prediction is most wrong
    # the open Compare widget now compares exactly these layers, and finds the row's DSC
    assert compare.pred_layer.value is layers["prediction"] and compare.gt_layer.value is layers["ground_truth"]
    assert compare.target_label.value == 2
    assert compare.update_comparison().dice == pytest.approx(row["dice"], abs=1e-9)


def test_cancel_then_resume_without_duplicates(make_napari_viewer, shared_data, tmp_path, qtbot, errors):
    viewer = make_napari_viewer()
    out = tmp_path / "run"
    widget = _widget(viewer, shared_data / "hippocampus_mri", out, model="box", limit=20)
    widget.rows_added.connect(lambda _n: widget.cancel())  # cancel as soon as the first case's rows arrive
    worker = widget.run()
    _wait(qtbot, worker)
    assert errors == [] and not widget.busy and widget.last_status == "cancelled"
    assert widget.run_button.enabled and widget.resume_button.enabled and not widget.cancel_button.enabled
    assert read_manifest(out)["status"] == "cancelled"
    cancelled = load_table(out)
    assert 2 <= len(cancelled) < 40  # two targets a case: stopped early, after at least one case
    assert _shown(widget) == _expected(cancelled)

    # a fresh widget on the same folder shows its rows; Resume finishes the run without duplicates
    undock(viewer, widget)
    widget = _widget(viewer, shared_data / "hippocampus_mri", out, model="box", limit=20)
    qtbot.waitUntil(lambda: not widget.loading, timeout=60_000)  # read in a worker
    assert widget.results.table.rowCount() == len(cancelled)
    worker = widget.run(resume=True)
    assert worker is not None
    _wait(qtbot, worker)
    assert errors == [] and widget.last_status == "completed"
    final = load_table(out)
    keys = list(zip(final["case_id"], final["target_label"]))
    assert len(final) == 40 and len(set(keys)) == 40
    assert widget.results.table.rowCount() == 40 and _shown(widget) == _expected(final)
    # rows computed before the cancel are the same rows, not recomputed ones
    before = cancelled.set_index(["case_id", "target_label"])["dice"]
    after = final.set_index(["case_id", "target_label"]).loc[before.index, "dice"]
    np.testing.assert_array_equal(before.to_numpy(), after.to_numpy())


def test_errors_are_notifications(make_napari_viewer, shared_data, tmp_path, qtbot, errors):
    viewer = make_napari_viewer()
    widget = _widget(viewer, tmp_path / "missing", tmp_path / "run", model="box")
    assert widget.run() is None and "dataset folder not found" in errors[-1]
    widget.dataset.value = shared_data / "hippocampus_mri"
    assert not widget.checkpoint.native.isVisibleTo(widget.native)
    widget.model.value = "medsam2"
    assert widget.checkpoint.native.isVisibleTo(widget.native)  # the checkpoint field shows up
    assert widget.run() is None and "needs a checkpoint" in errors[-1]
    widget.model.value = "box"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("something else")
    assert widget.run() is None and "not empty" in errors[-1]
    assert widget.run(resume=True) is None and "nothing to resume" in errors[-1]
    # a folder of no known layout fails in the worker: a notification, the widget idle again
    (tmp_path / "empty").mkdir()
    widget.dataset.value = tmp_path / "empty"
    widget.out_dir.value = tmp_path / "run2"
    worker = widget.run()
    assert worker is not None
    _wait(qtbot, worker, timeout=60_000)
    assert "no known dataset layout" in errors[-1] and "no known dataset layout" in widget.status.value
    assert not widget.busy and widget.run_button.enabled and widget.last_status == "failed"


def test_opens_from_the_manifest(make_napari_viewer):
    """What ``napari -w napari-medsam-eval`` does for the Benchmark widget (viewer injected by npe2)."""
    viewer = make_napari_viewer()
    _dock, widget = viewer.window.add_plugin_dock_widget("napari-medsam-eval", "Benchmark")
    assert isinstance(widget, BenchmarkWidget)
    assert widget.layout_choice.value == "auto-detect" and widget.limit.value == 0 and widget.workers.value == 1
    assert widget.results.table.rowCount() == 0 and not widget.busy


def _drain(job) -> tuple[list, object]:
    """Every step a generator job yields, and what it returns."""
    steps = []
    while True:
        try:
            steps.append(next(job))
        except StopIteration as stop:
            return steps, stop.value


def _cases(steps: list) -> list[tuple[int, int, int]]:
    return [(s.done, s.total, len(s.rows)) for s in steps if isinstance(s, benchmark_module.Progress)]


def test_job_reports_totals_first_then_a_row_opens(make_napari_viewer, shared_data, tmp_path, qtbot, errors):
    """The runner's first report gives (done, total) before any case, then every slice of the running case;
    a row of the run opens in the viewer, and the shortcut opens the next line."""
    dataset, out = shared_data / "hippocampus_mri", tmp_path / "run"
    request = benchmark_module.RunConfig(dataset, out, "box", "medsam2", limit=2, save_predictions=True)
    steps, table = _drain(benchmark_module.benchmark_job(request, threading.Event()))
    assert _cases(steps) == [(0, 2, 0), (1, 2, 2), (2, 2, 2)]
    assert len(table) == 4
    # between two cases, the slices of each target of the case: anterior then posterior, counting up
    first = table["case_id"].iloc[0]
    slices = [s for s in steps if isinstance(s, benchmark_module.CaseStep) and s.case_id == first]
    assert [s.target for s in slices if s.total == 0] == ["anterior", "posterior"]
    anterior = [s.done for s in slices if s.target == "anterior" and s.total]
    assert anterior == list(range(1, len(anterior) + 1)) and anterior[-1] == slices[1].total
    fractions = [s.fraction for s in slices]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    resumed = benchmark_module.RunConfig(dataset, out, "box", "medsam2", limit=3, resume=True,
                                         save_predictions=True)
    steps, table = _drain(benchmark_module.benchmark_job(resumed, threading.Event()))
    assert _cases(steps) == [(2, 3, 0), (3, 3, 2)]
    assert table["case_id"].nunique() == 3

    viewer = make_napari_viewer()
    widget = _widget(viewer, dataset, out, model="box", limit=3)
    qtbot.waitUntil(lambda: not widget.loading, timeout=60_000)  # read in a worker
    assert widget.results.table.rowCount() == 6 and widget.rows_dir == out  # the folder's rows, shown
    row = next(r for r in table.to_dict("records") if r["target_label"] == 2)
    opener = widget.open_row(row)
    _wait(qtbot, opener, timeout=60_000)
    assert errors == [] and {"image", "ground_truth", "prediction", "prompt_boxes"} <= set(widget.opened)
    layers = widget.opened
    ref = next(r for r in get_layout("msd").list_cases(dataset) if r.case_id == row["case_id"])
    np.testing.assert_array_equal(layers["ground_truth"].data, get_layout("msd").load(ref).label)
    np.testing.assert_array_equal(layers["prediction"].data, read_label(out / row["prediction_path"]).array)
    assert layers["prediction"].metadata["target_label"] == 2
    # in view on the target's slice with the most FP + FN (the box fits best where it was drawn: not there)
    shown = _most_errors_shown(viewer, layers, 2)
    assert shown != row["prompt_slice"]
    assert widget.status.value.startswith(f"opened {row['case_id']}")
    if row.get("dominant_error") not in (None, "ok"):  # the status line says why, in words
        main = row["dominant_error"].replace("_", " ")
        assert f"on slice {shown} its main error ({main}) is largest" in widget.status.value, \
            widget.status.value

    # the next-row key (in the table's tooltip) opens the line below the selected one, in the same layers
    view = widget.results
    assert benchmark_module.NEXT_ROW_KEY in view.table.toolTip()
    view.table.selectRow(0)
    window = viewer.window._qt_window
    window.show()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5_000)
    view.table.setFocus()
    qtbot.waitUntil(lambda: not widget.opener.busy, timeout=5_000)  # (a key pressed while a row opens waits)
    qtbot.keyClick(view.table, Qt.Key_N, Qt.ControlModifier | Qt.ShiftModifier)
    opener = widget.opener.worker
    assert opener is not None
    _wait(qtbot, opener, timeout=60_000)
    second = view.row_at(1)
    assert errors == [] and view.table.selectionModel().selectedRows()[0].row() == 1
    assert widget.opened["image"] is layers["image"] and layers["image"].name == second["case_id"]
    assert widget.opened["prediction"].metadata["target_label"] == int(second["target_label"])
    _most_errors_shown(viewer, widget.opened, int(second["target_label"]))


def test_cancel_within_a_case_records_nothing_of_it_and_resume_redoes_it(shared_data, tmp_path):
    """The run's cancel event stops it inside the running case, at the slice it is set: that case gets no
    row (neither done nor failed), the cases before it keep theirs, and a resume runs it again."""
    dataset, out = shared_data / "hippocampus_mri", tmp_path / "run"
    cancel, steps, cases = threading.Event(), [], []

    def step(at: CaseStep) -> None:
        steps.append(at)
        if len(cases) == 2 and at.target == "posterior" and at.done == 2:  # the second case, its second target
            cancel.set()
    table = run_benchmark(dataset, out, model="box", limit=3, save_predictions=True, steps=step, cancel=cancel,
                          progress=lambda done, total, rows: cases.append((done, total, len(rows))))
    cut = steps[-1]
    assert (cut.target, cut.done) == ("posterior", 2) and cut.case_id == "hippocampus_004"  # stopped right there
    assert cases == [(0, 3, 0), (1, 3, 2)] and read_manifest(out)["status"] == "cancelled"
    kept = load_table(out)
    assert len(kept) == len(table) == 2 and set(kept["case_id"]) == {"hippocampus_001"}
    saved = sorted(path.name for path in (out / "predictions").iterdir())  # the first case's only
    assert set(kept["status"]) == {"ok"} and saved == ["hippocampus_001.label1.nii.gz", "hippocampus_001.nii.gz"]
    resumed = benchmark_module.RunConfig(dataset, out, "box", "medsam2", limit=3, resume=True,
                                         save_predictions=True)
    steps, table = _drain(benchmark_module.benchmark_job(resumed, threading.Event()))
    assert _cases(steps) == [(1, 3, 0), (2, 3, 2), (3, 3, 2)]
    assert len(table) == 6 and read_manifest(out)["status"] == "completed"
    before = kept.set_index(["case_id", "target_label"])["dice"]
    np.testing.assert_array_equal(before.to_numpy(),
                                  table.set_index(["case_id", "target_label"]).loc[before.index, "dice"].to_numpy())


def test_every_control_has_a_tooltip(make_napari_viewer):
    viewer = make_napari_viewer()
    widget = dock(viewer, "benchmark")
    controls = [widget.dataset, widget.layout_choice, widget.model, widget.checkpoint, widget.protocol,
                widget.protocol_options, widget.propagation, widget.propagation_margin, widget.seed, widget.limit,
                widget.workers, widget.save_predictions, widget.out_dir, widget.run_button, widget.cancel_button,
                widget.resume_button, widget.progress, widget.status]
    for control in controls:
        assert control.native.toolTip(), control.name
    view = widget.results
    for part in (view.table, view.summary, view.canvas, widget.effort.canvas):
        assert part.toolTip()


def test_run_options_as_the_cli_takes_them(make_napari_viewer, shared_data, tmp_path, qtbot, errors):
    """Propagation rules, their margin, protocol options and the seed go into the run (its manifest), as
    ``medsam-eval run --propagation ... --protocol-options ... --seed`` would put them; bad options are refused
    before the run starts, naming the option."""
    viewer = make_napari_viewer()
    widget = _widget(viewer, shared_data / "hippocampus_mri", tmp_path / "run", model="box", limit=2)
    widget.protocol_options.value = '{"margn": 10}'
    assert widget.run() is None and "margn" in errors[-1] and "the options are" in errors[-1]
    widget.protocol_options.value = '{"margin": 10}'
    widget.propagation.value = "legacy"
    widget.propagation_margin.value = 7
    widget.seed.value = 3
    _wait(qtbot, widget.run())
    assert widget.last_status == "completed", widget.status.value
    config = read_manifest(tmp_path / "run")["config"]
    assert config["protocol_options"]["margin"] == 10 and config["seed"] == 3
    assert config["propagation"]["margin"] == 7
    table = load_table(tmp_path / "run")
    assert len(table) == 4 and set(table["status"]) == {"ok"}
