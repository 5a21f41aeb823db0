"""Why it failed, in the Benchmark dock docked from the Plugins menu: the rows filtered by their dominant
error part, and a row opened at the slice where that part is largest, with a "why" layer colouring each wrong
voxel by its part (the legend under the table)."""
from __future__ import annotations

import numpy as np
import pytest
from qtpy.QtCore import Qt
from superqt.utils._qthreading import WorkerBase

from plugin_dock import dock
from napari_medsam_eval.benchmark import run_benchmark
from napari_medsam_eval.core.palette import ERROR_PART_COLORS
from napari_medsam_eval.evaluation.error_parts import PART_VALUES, PARTS, part_masks, part_overlay
from napari_medsam_eval._widgets.common._layers import current_index

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def box_run(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("why") / "run"
    return out, run_benchmark(shared_data / "hippocampus_mri", out, "box", limit=3, save_predictions=True)


def test_filter_by_part_then_open_at_the_dominant_part(make_napari_viewer, box_run, qtbot):
    out, table = box_run
    dominant = table["dominant_error"].tolist()
    assert set(dominant) == {"leak"}  # the box baseline's box on every slice of the volume: leak above all
    viewer = make_napari_viewer()
    widget = dock(viewer, "benchmark")
    assert widget.load_results(out) == len(table)
    view = widget.results
    assert view.column_values("why") == ["leak"] * len(table)
    for part, lines in (("over", 0), ("ok", 0), ("leak", len(table)), ("n/a", 0)):
        view.why_filter.choose(part)
        assert view.table.rowCount() == lines
    view.why_filter.choose(None)
    view.table.sortItems(2)  # by DSC: the filter keeps the order
    worst = view.row_at(0)
    view.why_filter.choose("leak")
    part = "leak"
    row = view.row_at(0)
    assert row == worst and "why it missed: leak" in view.table.item(0, 4).toolTip()
    chip = view.table.item(0, 4).data(Qt.DecorationRole)  # the legend: the part's colour in the why layer
    assert chip.name().upper() == ERROR_PART_COLORS["leak"].upper()
    choice = view.why_filter.findData("leak")
    assert view.why_filter.itemData(choice, Qt.DecorationRole).name().upper() == ERROR_PART_COLORS["leak"].upper()
    opener = widget.open_row(row)
    qtbot.waitUntil(lambda: opener not in WorkerBase._worker_set, timeout=60_000)
    layers = widget.opened
    target = int(row["target_label"])
    truth, predicted = layers["ground_truth"].data == target, layers["prediction"].data == target
    per_slice = part_masks(predicted, truth)[part].sum(axis=(1, 2))
    shown = current_index(viewer, layers["image"])
    assert per_slice.max() > 0 and per_slice[shown] == per_slice.max()
    why = layers["error_parts"]
    np.testing.assert_array_equal(why.data, part_overlay(predicted, truth))
    assert np.count_nonzero(why.data == PART_VALUES[part]) == int(per_slice.sum())
    colors = {value: why.colormap.map(value) for value in PART_VALUES.values()}
    for name, value in PART_VALUES.items():  # each part in its own colour, as the legend says
        expected = ERROR_PART_COLORS[name].lstrip("#")
        assert "".join(f"{round(c * 255):02X}" for c in colors[value][:3]) == expected.upper()
    view.why_filter.choose(None)
    assert view.table.rowCount() == len(table)


def test_compare_says_why_the_result_on_display_missed(make_napari_viewer, box_run, qtbot):
    """The Compare dock, docked beside Benchmark: an opened row's comparison says why it missed, in the
    dock's width (the dominant part, then the largest shares) and in full on hover."""
    out, table = box_run
    viewer = make_napari_viewer()
    bench, compare = dock(viewer, "benchmark"), dock(viewer, "compare")
    bench.load_results(out)
    row = table.to_dict("records")[1]
    opener = bench.open_row(row)
    qtbot.waitUntil(lambda: opener not in WorkerBase._worker_set, timeout=60_000)
    comparison = compare.metrics.update_comparison()
    parts = comparison.parts
    assert parts is not None and parts.dominant == row["dominant_error"] == "leak"
    assert parts.shares == pytest.approx({p: row[f"error_{p}"] for p in PARTS}, abs=1e-12)
    why = compare.metrics.why.value  # issue 58: the part named once, the largest first and called the main one
    assert why.startswith("leak ") and "(main)" in why.split(",")[0] and why.count("leak") == 1
    assert "dominant: leak" in compare.metrics.why.tooltip and "(slices " in compare.metrics.why.tooltip
