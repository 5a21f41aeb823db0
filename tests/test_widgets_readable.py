"""Issue 58, a screen that stays readable (real napari viewers under Xvfb, widgets docked from the Plugins menu).

What is drawn is what the legend says: the agreement map's bins hold their lower edge on screen (the GPU's
lookup put 20 % and 40 % in the bin below); a run folder chosen shows its rows.
"""
from __future__ import annotations

import numpy as np
import pytest

from plugin_dock import dock
from napari_medsam_eval.core.palette import AGREEMENT_BINS, hex_to_rgb

pytestmark = pytest.mark.gui


def _bands(shot: np.ndarray) -> list[tuple[tuple[int, ...], int]]:
    """The colours down the middle column of a screenshot, each with how many pixels it runs."""
    runs: list[list] = []
    for pixel in shot[:, shot.shape[1] // 2, :3]:
        colour = tuple(int(v) for v in pixel)
        if runs and runs[-1][0] == colour:
            runs[-1][1] += 1
        else:
            runs.append([colour, 1])
    return [(colour, count) for colour, count in runs]


def test_each_agreement_is_drawn_in_the_colour_its_legend_says(make_napari_viewer):
    from napari_medsam_eval._widgets.compare._result_layers import agreement_colormap, agreement_legend

    viewer = make_napari_viewer(show=True)
    values = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    data = np.repeat(np.array(values, np.float32), 10)[:, None].repeat(100, axis=1)
    viewer.add_image(data, colormap=agreement_colormap(), contrast_limits=(0, 1), interpolation2d="nearest")
    viewer.reset_view()
    bands = [band for band in _bands(viewer.screenshot(canvas_only=True, flash=False)) if band[0] != (0, 0, 0)]
    legend = [(text, tuple(int(round(255 * c)) for c in hex_to_rgb(colour))) for text, colour in agreement_legend()]
    assert [colour for colour, _n in bands] == [colour for _text, colour in legend]
    per_value = bands[0][1]  # one value's height: < 20 % holds 0.1 alone
    assert [round(n / per_value) for _colour, n in bands] == [1, 2, 2, 2, 3]  # 0.2 and 0.4 drawn with the bin above
    assert [text for text, _c in legend] == ["<20%", "20%-40%", "40%-60%", "60%-80%", "80%-100%"]
    assert [low for low, _c in AGREEMENT_BINS] == [0.0, 0.2, 0.4, 0.6, 0.8]


def test_choosing_a_run_folder_shows_its_rows(make_napari_viewer, shared_data, tmp_path, qtbot):
    from napari_medsam_eval.benchmark import run_benchmark

    run_benchmark(shared_data / "hippocampus_mri", tmp_path / "run", "box", limit=2)
    viewer = make_napari_viewer()
    widget = dock(viewer, "benchmark")
    assert widget.tabs.currentIndex() == 0  # the run tab
    widget.out_dir.value = tmp_path / "run"
    qtbot.waitUntil(lambda: widget.results.table.rowCount() == 4, timeout=30_000)
    qtbot.waitUntil(lambda: widget.tabs.tabText(widget.tabs.currentIndex()) == "rows", timeout=5_000)


def test_case_names_of_a_two_task_run_can_be_told_apart_with_three_docks_at_1366_by_768(
        make_napari_viewer, shared_data, tmp_path, qtbot):
    from qtpy.QtCore import Qt

    from napari_medsam_eval.benchmark import run_benchmark
    from napari_medsam_eval._widgets.benchmark._rows_table import CASE_CHARACTERS

    run_benchmark(shared_data / "hippocampus_mri", tmp_path / "run", "box", limit=4)  # two tasks, 8 rows
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1366, 768)
    dock(viewer, "segment")
    dock(viewer, "compare")
    widget = dock(viewer, "benchmark")
    widget.out_dir.value = tmp_path / "run"
    qtbot.waitUntil(lambda: widget.results.table.rowCount() == 8, timeout=30_000)
    qtbot.wait(300)
    table = widget.results.table
    column = table.columnWidth(0)
    metrics = table.fontMetrics()
    assert column >= metrics.horizontalAdvance("M" * CASE_CHARACTERS) - 1, column
    shown = []
    for line in range(table.rowCount()):
        name = table.item(line, 0).text()
        shown.append(metrics.elidedText(name, Qt.ElideMiddle, column - 8))  # what the cell draws
        assert table.item(line, 0).toolTip() == name  # the whole name on hover
    cases = [table.item(line, 0).text() for line in range(table.rowCount())]
    assert len(set(shown)) == len(set(cases)) == 4, shown  # each case its own text, the middle elided at most


def _visible_texts(root) -> list[str]:
    """Every text a user reads in ``root``: labels, buttons, choices, tab names."""
    from qtpy.QtWidgets import QAbstractButton, QComboBox, QLabel, QListWidget, QTabBar, QWidget

    texts = []
    for child in root.findChildren(QWidget):
        if not child.isVisibleTo(root):
            continue
        if isinstance(child, (QLabel, QAbstractButton)):
            texts.append(child.text())
        elif isinstance(child, QComboBox):
            texts += [child.itemText(i) for i in range(child.count())]
        elif isinstance(child, QTabBar):
            texts += [child.tabText(i) for i in range(child.count())]
        elif isinstance(child, QListWidget):
            texts += [child.item(i).text() for i in range(child.count())]
    return texts


def test_a_video_is_told_in_frames_and_a_volume_in_slices(make_napari_viewer, qtbot):
    from napari_medsam_eval.models.baselines import BoxBackend

    viewer = make_napari_viewer(show=True)
    volume = viewer.open_sample("napari-medsam-eval", "phantom_ct")[0]
    video = viewer.open_sample("napari-medsam-eval", "phantom_video")[0]
    segment, compare = dock(viewer, "segment", None), dock(viewer, "compare")
    segment.set_backend(BoxBackend())
    assert segment.image_layer.value is volume and "Segment slice" in _visible_texts(segment.native)
    segment.image_layer.value = video
    segment.prompt_from_ground_truth()
    segment.correct_slice()  # an anchor, then propagated from it
    qtbot.waitUntil(lambda: not segment.busy and bool(segment.anchor_list.lines), timeout=60_000)
    qtbot.waitUntil(lambda: compare.comparison is not None and not compare.metrics.pending, timeout=30_000)
    compare.next_worst()
    texts = _visible_texts(segment.native) + _visible_texts(compare.native)
    assert [text for text in texts if "slice" in text.lower()] == []
    assert {"Segment frame", "Correct frame", "key frame", "Next worst frame"} <= set(texts)
    assert compare.metrics.worst_info.value.startswith("#1/") and "frame" in compare.metrics.worst_info.value
    assert segment.anchor_list.lines[0].startswith("frame ")
    assert segment.prompt_slice.value == "key slice"  # the names change, the choice stays

    segment.image_layer.value = volume  # back to slices, the choice kept
    texts = _visible_texts(segment.native)
    assert {"Segment slice", "Correct slice", "key slice", "current slice"} <= set(texts)
    assert [text for text in texts if "frame" in text.lower()] == [segment.status.value]  # what it did on the video
    segment.prompt_slice.value = "current slice"
    segment.reset_choices()
    assert segment.prompt_slice.value == "current slice" and segment.prompt_slice.current_choice == "current slice"


@pytest.mark.parametrize("curve", ["high", "low", "falling", "near"])
def test_stop_labels_are_whole_and_clear_of_the_dsc_curve(qtbot, curve):
    from napari_medsam_eval._widgets.compare._compare_plot import MIN_HEIGHT, SliceDicePlot

    values = {"high": np.full(40, 0.95), "low": np.full(40, 0.1), "falling": np.linspace(1.0, 0.0, 40),
              "near": np.full(40, 0.95)}[curve]
    stops = [(16, "intensity"), (28, "intensity")] if curve == "near" else [(3, "intensity"), (36, "end")]
    values[:stops[0][0]] = np.nan  # no foreground beyond the stops
    values[stops[1][0] + 1:] = np.nan
    plot = SliceDicePlot(("#262930", "#f0f1f2"), lambda _index: None)
    qtbot.addWidget(plot.canvas)
    plot.canvas.resize(340, MIN_HEIGHT)  # the least the dock gives it
    plot.canvas.show()
    plot.show(values, stops, "slice")
    plot.canvas.draw()
    renderer = plot.canvas.get_renderer()
    figure_box = plot.figure.bbox
    points = plot.axes.transData.transform(np.column_stack([np.arange(40), values])[~np.isnan(values)])
    labels = [text for text in plot.axes.texts]
    assert [text.get_text() for text in labels] == ["brightness changed", "brightness changed" if curve == "near"
                                                    else "end reached"]
    first, second = (text.get_window_extent(renderer) for text in labels)
    assert not first.overlaps(second)  # two stops close together: their labels apart
    for text in labels:
        box = text.get_window_extent(renderer)
        assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1, (text.get_text(), box)  # not cut
        assert figure_box.y0 <= box.y0 and box.y1 <= figure_box.y1, (text.get_text(), box)
        inside = [(x, y) for x, y in points if box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1]
        assert inside == [], (text.get_text(), inside)  # no point of the curve under the words


def test_a_video_run_is_told_in_frames_in_the_benchmark_and_compare_docks(make_napari_viewer, shared_data,
                                                                           tmp_path, qtbot):
    from napari_medsam_eval.benchmark import run_benchmark

    run_benchmark(shared_data / "cvc_clinicdb_video", tmp_path / "run", "box", limit=2)
    viewer = make_napari_viewer(show=True)
    compare, bench = dock(viewer, "compare"), dock(viewer, "benchmark")
    bench.out_dir.value = tmp_path / "run"
    qtbot.waitUntil(lambda: bench.results.table.rowCount() == 2, timeout=30_000)
    bench.open_row(bench.results.rows[0])
    qtbot.waitUntil(lambda: bench.opened is not None and not bench.browser.opener.busy, timeout=30_000)
    qtbot.waitUntil(lambda: not compare.metrics.pending, timeout=30_000)
    texts = _visible_texts(bench.native) + _visible_texts(compare.native)
    filter_names = [bench.results.why_filter.itemText(i) for i in range(bench.results.why_filter.count())]
    assert [text for text in texts + filter_names if "slice" in text.lower()] == []
    assert "why: missed frames" in filter_names and "Next worst frame" in texts
    assert "prompt on frame 0" in bench.browser.opener.status.value


def test_a_prediction_contour_keeps_a_dark_ring_on_a_warm_image(make_napari_viewer, tmp_path):
    """On an endoscopy-like orange image the orange contour alone would vanish: a near-black ring runs either
    side of it. The data stay the labels (255 included), only the drawing gains the ring."""
    from napari_medsam_eval.core.palette import OUTLINE, PREDICTION, hex_to_rgb
    from napari_medsam_eval._layer_style import style_prediction
    from napari_medsam_eval._widgets.common._outlined_labels import OutlinedLabels

    viewer = make_napari_viewer(show=True)
    mucosa = np.zeros((2, 100, 100, 3), np.uint8)
    mucosa[...] = (200, 110, 40)
    viewer.add_image(mucosa, rgb=True)
    labels = np.zeros((2, 100, 100), np.uint8)
    labels[:, 30:70, 30:70] = 255
    layer = viewer.add_layer(style_prediction(OutlinedLabels(labels, name="prediction")))
    assert layer.get_value((1, 50, 50)) == 255 and layer.get_value((1, 29, 50)) == 0
    layer.data = (labels > 0).astype(np.uint8)  # a new mask of another type: the ring follows
    viewer.reset_view()
    colours = [colour for colour, _n in _bands(viewer.screenshot(canvas_only=True, flash=False))]
    ring, contour = tuple(round(255 * c) for c in hex_to_rgb(OUTLINE)), tuple(round(255 * c) for c in hex_to_rgb(PREDICTION))
    inner = [c for c in colours if c != (0, 0, 0)]  # down the middle: mucosa, ring, contour, ring, mucosa, ...
    assert inner[:5] == [(200, 110, 40), ring, contour, ring, (200, 110, 40)], inner
    assert np.array_equal(layer.data, labels > 0)
    assert layer.as_layer_data_tuple()[2] == "labels"  # napari's writers, menus and icons see a Labels layer
    viewer.layers.selection = {layer}
    viewer.layers.save(str(tmp_path / "prediction.npz"), selected=True, plugin="napari-medsam-eval")
    with np.load(tmp_path / "prediction.npz") as saved:  # the labels saved, never the ring
        assert np.array_equal(saved["segs"], labels > 0)


def test_a_long_status_shows_whole_lines_then_scrolls(make_napari_viewer, qtbot):
    """Segment's status beside Compare at 1366x768: a message longer than the box shows whole lines (its last
    line as tall as the others: none cut mid-height) and scrolls to the rest."""
    from qtpy.QtWidgets import QScrollArea

    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1366, 768)
    viewer.open_sample("napari-medsam-eval", "phantom_ct")
    segment, _compare = dock(viewer, "segment", None), dock(viewer, "compare")
    segment.status.value = ("segmented slices 17-27 (11 with the target); up: kept to slice 27, stopped at slice 28: "
                            "the mask's mean brightness moved too far from the prompted slice's (35 grey levels, "
                            "more than 32 allowed); down: kept to slice 17, stopped at slice 16: the mask's mean "
                            "brightness moved too far from the prompted slice's (40 grey levels, more than 32)")
    qtbot.wait(300)
    label = segment.status.native
    area = label.parentWidget().parentWidget()
    assert isinstance(area, QScrollArea) and area.verticalScrollBar().maximum() > 0  # the rest scrolls
    shot = area.viewport().grab().toImage()
    background = shot.pixel(shot.width() - 2, shot.height() - 1)
    inked = [y for y in range(shot.height()) if any(shot.pixel(x, y) != background for x in range(shot.width() - 12))]
    bands = [[inked[0], inked[0]]]  # each line of text: a run of rows with ink
    for row in inked[1:]:
        if row == bands[-1][1] + 1:
            bands[-1][1] = row
        else:
            bands.append([row, row])
    heights = [end - start + 1 for start, end in bands]
    assert len(heights) >= 3 and heights[-1] >= min(heights[:-1]), heights  # the last line shown whole
