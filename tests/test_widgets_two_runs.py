"""Two runs side by side in the Benchmark widget, in a real viewer (Xvfb), on real runs.

Two LiteMedSAM runs made with the real CLI on 3 hippocampus MRI cases, the
medsam2 protocol with margins 0 (A) and 10 (B), predictions saved. The
widget's statistics table must hold exactly the cells ``medsam-eval compare A B``
prints; a case missing from one run is listed as unpaired; double-clicking a
case opens both predictions and the A/B overlay at the target's slice of largest
difference, the case's image in view (a CT opened before hidden).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
from napari.layers import Labels
import pytest
from qtpy.QtCore import Qt

from plugin_dock import dock
from napari_medsam_eval._widgets.benchmark import _two_runs as two_runs_module
from napari_medsam_eval._widgets.common import _worker as worker_module
from napari_medsam_eval._widgets.common._layers import current_index
from napari_medsam_eval.benchmark import ResultStore, load_table, write_tables
from napari_medsam_eval._widgets.common._canvas_style import legend_shown
from napari_medsam_eval.evaluation.mask_comparison import binary_target
from napari_medsam_eval.io import read_label
from napari_medsam_eval.report import paired_scores
from napari_medsam_eval._layer_style import AB_COLORS
from napari_medsam_eval.evaluation.mask_comparison import AB_A_ONLY, AB_B_ONLY, AB_BOTH, ab_overlay
from margin_runs import make_run, margin_runs
from test_widgets_layout import _whole
from test_widgets_switching import LESION, in_view

pytestmark = pytest.mark.gui

TIMEOUT_MS = 600_000
#: cases in each run; the pairs: both targets of every case but the one dropped from B
CASES = 3
PAIRS = 2 * (CASES - 1)


def medsam_eval(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "napari_medsam_eval", *args], check=True, capture_output=True,
                          text=True)
    return done.stdout


@pytest.fixture(scope="module")
def runs(shared_data, tmp_path_factory, shared_embeddings):
    """(A, B): LiteMedSAM, medsam2 protocol with margin 0 and 10, 3 hippocampus cases each (the slices come from
    the run's embedding store: other tests encode the first 3 cases too)."""
    return margin_runs(shared_data / "hippocampus_mri", tmp_path_factory.mktemp("two-runs"), "litemedsam", CASES,
                       ("--embeddings", shared_embeddings))


@pytest.fixture
def messages(monkeypatch):
    """Error and warning notifications the widgets raise (captured)."""
    seen = {"error": [], "warning": []}
    monkeypatch.setattr(worker_module, "show_error", seen["error"].append)
    monkeypatch.setattr(two_runs_module, "show_warning", seen["warning"].append)
    return seen


def _wait(qtbot, worker, timeout: int = TIMEOUT_MS) -> None:
    from superqt.utils._qthreading import WorkerBase

    assert worker is not None
    qtbot.waitUntil(lambda: worker not in WorkerBase._worker_set, timeout=timeout)


def parse_text_table(text: str) -> list[list[str]]:
    """The cells of the table ``medsam-eval compare`` prints, cut at the columns its dashes line marks."""
    lines = text.splitlines()
    dashes = next(i for i, line in enumerate(lines) if line.startswith("---"))
    spans, start = [], 0
    for width in (len(part) for part in lines[dashes].split("  ")):
        spans.append((start, start + width))
        start += width + 2
    rows = []
    for line in lines[dashes + 1:]:
        if not line.strip() or line.startswith("note:"):
            break
        rows.append([line[a:b].strip() for a, b in spans])
    return [[line[a:b].strip() for a, b in spans] for line in lines[dashes - 1:dashes]] + rows


def drop_case(run, case_id: str) -> None:
    store = ResultStore(run)
    store.drop_cases({case_id})
    write_tables(run, store.recover())


def _differ_most_shown(viewer, layers, target: int) -> int:
    """The slice the viewer shows of the opened pair: of the target's slices, one where A and B differ most
    (voxels of the A/B overlay segmented by one run only); the image visible. Returns it."""
    truth = layers["ground_truth"].data == target
    differ = np.isin(layers["ab_overlay"].data, [AB_A_ONLY, AB_B_ONLY]).sum(axis=(1, 2))
    within = np.where(truth.any(axis=(1, 2)), differ, 0)
    shown = current_index(viewer, layers["image"])
    assert within.max() > 0 and within[shown] == within.max() and layers["image"].visible, (shown, differ)
    return shown


def _dock(make_napari_viewer):
    viewer = make_napari_viewer()
    widget = dock(viewer, "benchmark")
    return viewer, widget, widget.two_runs


@pytest.mark.slow
def test_two_litemedsam_runs_side_by_side(make_napari_viewer, runs, tmp_path, qtbot, messages):
    run_a, run_b = runs
    b_copy = tmp_path / "B"  # B without its first case: those rows must be listed as unpaired
    shutil.copytree(run_b, b_copy)
    dropped = sorted(load_table(b_copy)["case_id"])[0]
    drop_case(b_copy, dropped)
    printed = medsam_eval("compare", str(run_a), str(b_copy))

    viewer, _bench, widget = _dock(make_napari_viewer)
    _wait(qtbot, widget.compare(run_a, b_copy))
    assert messages["error"] == []
    view = widget.view

    # the statistics: cell for cell what `medsam-eval compare A B` printed
    expected = parse_text_table(printed)
    shown = [[view.stats.horizontalHeaderItem(c).text() for c in range(view.stats.columnCount())]]
    # (a task's cell: the part that tells the tasks apart, its whole name, as printed, on hover)
    shown += [[view.stats.item(r, c).toolTip() or view.stats.item(r, c).text() if c == 0 else
               view.stats.item(r, c).text() for c in range(view.stats.columnCount())]
              for r in range(view.stats.rowCount())]
    assert shown == expected and len(shown) == 4  # header, two tasks, (all)
    assert [view.stats.item(r, 0).text() for r in range(2)] == [t.split("/")[-1] for t, *_ in expected[1:3]]
    assert expected[-1][0] == "(all)" and expected[-1][2] == "2"  # the dropped case's two rows: only in A

    # the pairs: DSC A, B and B-A of every case scored in both, sorted by the difference
    pairs, _ = paired_scores(run_a, b_copy)
    pairs = pairs[pairs["paired"]]
    assert view.table.rowCount() == len(pairs) == PAIRS
    diffs = [view.table.item(r, 4).data(Qt.UserRole) for r in range(view.table.rowCount())]
    assert diffs == sorted(diffs)
    by_key = {(r.case_id, r.task, r.target_label): r for r in pairs.itertuples()}
    for line in range(view.table.rowCount()):
        row = by_key[view.key_at(view.table, line)]
        cells = [view.table.item(line, c).data(Qt.UserRole) for c in (2, 3, 4)]
        assert cells == [pytest.approx(row.a, abs=1e-12), pytest.approx(row.b, abs=1e-12),
                         pytest.approx(row.diff, abs=1e-12)]
        assert view.table.item(line, 2).text() == f"{row.a:.4f}"

    # the rows that do not pair are listed, with why
    assert view.unpaired.isVisibleTo(view) and view.unpaired.rowCount() == 2
    assert view.column_values(view.unpaired, "case") == [dropped, dropped]
    assert set(view.column_values(view.unpaired, "why not paired")) == {"only in A (no row in B)"}
    assert view.unpaired_label.text() == "rows that do not pair: 2"

    # the scatter: a dot per pair
    points = np.concatenate([c.get_offsets() for c in view.axes.collections])
    assert len(points) == PAIRS

    # double-click the largest drop: image, ground truth, both predictions and the A/B overlay
    item = view.table.item(0, 0)
    key = view.key_at(view.table, 0)
    view.table.scrollToItem(item)
    rect = view.table.visualItemRect(item)
    qtbot.mouseClick(view.table.viewport(), Qt.LeftButton, pos=rect.center())  # (Qt wants the press first)
    qtbot.mouseDClick(view.table.viewport(), Qt.LeftButton, pos=rect.center())
    _wait(qtbot, widget.opener.worker)
    assert messages["error"] == [] and messages["warning"] == []
    layers = widget.opened
    assert {"image", "ground_truth", "prediction", "prediction_b", "ab_overlay"} <= set(layers)
    row_a, row_b = widget.pair.rows(key)
    target = int(key[2])
    mask_a = binary_target(read_label(run_a / row_a["prediction_path"]).array, target, binary_fallback=True)
    mask_b = binary_target(read_label(b_copy / row_b["prediction_path"]).array, target, binary_fallback=True)
    overlay = layers["ab_overlay"].data
    np.testing.assert_array_equal(overlay, ab_overlay(mask_a, mask_b))
    np.testing.assert_array_equal(overlay == AB_A_ONLY, mask_a & ~mask_b)
    np.testing.assert_array_equal(overlay == AB_B_ONLY, mask_b & ~mask_a)
    np.testing.assert_array_equal(overlay == AB_BOTH, mask_a & mask_b)
    shown_slice = _differ_most_shown(viewer, layers, target)
    assert np.isin(overlay[shown_slice], [AB_A_ONLY, AB_B_ONLY]).sum() == (mask_a ^ mask_b)[shown_slice].sum()
    np.testing.assert_array_equal(layers["prediction"].data, read_label(run_a / row_a["prediction_path"]).array)
    np.testing.assert_array_equal(layers["prediction_b"].data, read_label(b_copy / row_b["prediction_path"]).array)
    assert "A only" in layers["ab_overlay"].name and layers["prediction_b"].metadata["target_label"] == target
    order = list(viewer.layers)  # the A vs B view (issue 65): the overlay directly above its image, alone
    assert order.index(layers["ab_overlay"]) == order.index(layers["image"]) + 1
    assert layers["ab_overlay"].visible and not any(layers[role].visible for role in
                                                    ("ground_truth", "prediction", "prediction_b") if role in layers)
    assert [text for text, _c in legend_shown(viewer)] == ["A only", "B only", "both"]
    # issue 58: nothing filled over the A/B layer (a row's "why" layer washed it purple), its legend in the dock
    assert "error_parts" not in layers and not any(layer.metadata.get("role") == "error_parts"
                                                   for layer in viewer.layers)
    filled_above = [layer.name for layer in order[order.index(layers["ab_overlay"]) + 1:]
                    if isinstance(layer, Labels) and not layer.contour and layer.visible]
    assert filled_above == [], filled_above
    legend = widget.legend.value
    assert not widget.legend.native.isHidden() and all(name in legend for name in ("A only", "B only", "both"))
    colours = [AB_COLORS[value] for value in (AB_A_ONLY, AB_B_ONLY, AB_BOTH)]
    assert len(set(colours)) == 3 and all(colour in legend for colour in colours)

    # a prediction file that is gone: said clearly, the case opens without the overlay
    other = next(view.key_at(view.table, r) for r in range(view.table.rowCount())
                 if view.key_at(view.table, r)[0] != key[0])
    _, other_b = widget.pair.rows(other)
    (b_copy / other_b["prediction_path"]).unlink()
    _wait(qtbot, widget.open_case(other))
    (warning,) = messages["warning"]
    assert "run B: prediction file not found" in warning and other_b["prediction_path"] in warning
    assert "prediction file not found" in widget.status.value
    assert "ab_overlay" not in widget.opened and "prediction_b" not in widget.opened
    assert not any(layer.metadata.get("role") == "ab_overlay" for layer in viewer.layers)


def test_other_model_and_other_dataset(make_napari_viewer, runs, shared_data, tmp_path, qtbot, messages):
    run_a, _ = runs
    box = tmp_path / "box"  # another model and margin: pairs as well
    make_run(shared_data / "hippocampus_mri", box, 10, model="box", limit=CASES)
    viewer, _bench, widget = _dock(make_napari_viewer)
    _wait(qtbot, widget.compare(run_a, box))
    assert messages["error"] == [] and widget.view.table.rowCount() == 2 * CASES and widget.pair.unpaired.empty
    assert "litemedsam" in widget.view.runs.text() and "box" in widget.view.runs.text()
    # why it failed: the pooled change in view (one line: the tables and the scatter stay in view), each task's
    # on hover
    tasks = list(widget.pair.part_changes["task"])
    assert len(tasks) > 1 and widget.view.runs.text().count("why it failed") == 1
    assert f"why it failed, {tasks[-1]} (" in widget.view.runs.text()
    assert all(f"why it failed, {task} (" in widget.view.runs.toolTip() for task in tasks)

    # a posterior pair, with a CT open before (the camera on it): the box, propagated, fills whole slices away
    # from the target, where A and B differ most; the view goes to the target's slice where they differ most
    ct, ct_truth = viewer.open(str(shared_data / "deeplesion_ct_npz" / LESION), plugin="napari-medsam-eval")
    keys = [widget.view.key_at(widget.view.table, line) for line in range(widget.view.table.rowCount())]
    _wait(qtbot, widget.open_case(next(k for k in keys if k[2] == 2)))
    layers = widget.opened
    shown = _differ_most_shown(viewer, layers, 2)
    differ = np.isin(layers["ab_overlay"].data, [AB_A_ONLY, AB_B_ONLY]).sum(axis=(1, 2))
    assert not (layers["ground_truth"].data[int(np.argmax(differ))] == 2).any()  # (the first largest: off it)
    assert not ct.visible and not ct_truth.visible and in_view(viewer, layers["image"])  # the case in view
    assert f"slice {shown} (where A and B differ most)" in widget.status.value

    other = tmp_path / "other"
    shutil.copytree(box, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["config"]["dataset_path"] = str(shared_data / "brats2021_flair")
    (other / "manifest.json").write_text(json.dumps(manifest))
    _wait(qtbot, widget.compare(run_a, other))
    (error,) = messages["error"]
    assert "different datasets" in error and "hippocampus_mri" in error and "brats2021_flair" in error
    assert "different datasets" in widget.status.value


def test_the_two_runs_tab_shows_its_results_without_scrolling_at_1366_by_768(make_napari_viewer, shared_data,
                                                                            tmp_path, qtbot, messages):
    """Issue 58: in a 1366 x 768 window the statistics, the pairs table and its scatter are in view without
    scrolling the dock (the scatter sat below the table, scrolled out; a wrapping line's least height at its
    least width made the tab 500 pixels taller)."""
    run_a, run_b = margin_runs(shared_data / "hippocampus_mri", tmp_path, "box", 5)
    viewer = make_napari_viewer(show=True)
    window = viewer.window._qt_window
    window.resize(1366, 768)
    bench = dock(viewer, "benchmark")
    widget = bench.two_runs
    bench.show_tab("two runs")
    _wait(qtbot, widget.compare(run_a, run_b))
    qtbot.wait(500)
    assert messages["error"] == [] and widget.view.table.rowCount() == 10
    assert window.height() <= 768, window.size()
    view = widget.view
    for part in (view.runs, view.stats, view.table, widget.status.native):
        assert _whole(part), (part, part.visibleRegion().boundingRect(), part.rect())
    assert view.table.viewport().height() >= 3 * view.table.rowHeight(0)  # three lines of pairs and more
    # the scatter: beside the table in a wide dock, else on the tab beside the pairs' (one click, no scrolling)
    if not view.pairs.beside:
        view.pairs.tabs.setCurrentWidget(view.canvas)
        qtbot.wait(200)
    assert _whole(view.canvas) and view.canvas.height() >= 100, view.canvas.size()
    # the case names in the pairs table tell the cases apart (the common part elided, the number kept)
    names = widget.view.column_values(widget.view.table, "case")
    assert len(set(names)) == 5, names
