"""Issue 59, item 4: an opened Benchmark row tells what would have fixed it (``medsam-eval explain``), and one
variant's mask opens as a layer beside the prediction (a real napari viewer under Xvfb).

The run is the weight-free ``box`` baseline on one hippocampus case (two rows: anterior, posterior), made and
explained through the console script as a user does; everything is written in ``tmp_path``.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from plugin_dock import dock
from napari_medsam_eval.io import read_label
from napari_medsam_eval.studies.counterfactuals import VARIANTS
from napari_medsam_eval._widgets.benchmark._counterfactuals import (
    ROLE, SHORT_WORDS, choice_text, fitted, fix_sentence, fix_summary, variant_name)
from napari_medsam_eval._widgets.benchmark._open_row import OPENED_KEY
from napari_medsam_eval._widgets.common._canvas_style import legend_shown
from napari_medsam_eval.evaluation.mask_comparison import ab_overlay, binary_target

pytestmark = pytest.mark.gui

TIMEOUT_MS = 60_000


@pytest.fixture
def explained_run(tmp_path, shared_data) -> Path:
    """A box run of one hippocampus case with its predictions, then ``medsam-eval explain`` on it."""
    cli = str(Path(sys.executable).with_name("medsam-eval"))
    run_dir = tmp_path / "run"
    subprocess.run([cli, "run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "1",
                    "--save-predictions", "--no-report", "--quiet", "--out", str(run_dir)], check=True)
    subprocess.run([cli, "explain", str(run_dir), "--quiet", "--no-report"], check=True)
    return run_dir


def _told(explained: dict, variant: str) -> str:
    """A variant's DSC and gain as explain.csv holds them, written as the dock writes them."""
    return f"{explained[f'dice_{variant}']:.2f} ({explained[f'gain_{variant}']:+.2f})"


def _open(qtbot, widget, row: dict) -> None:
    """Open ``row`` and wait until its layers and what would fix it are in view."""
    qtbot.waitUntil(lambda: not widget.opener.busy, timeout=TIMEOUT_MS)
    assert widget.open_row(row) is not None
    qtbot.waitUntil(lambda: not widget.opener.busy and widget.opened.get("image") is not None
                    and widget.opened["image"].name == row["case_id"], timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: widget.browser.fix.reader.running == 0, timeout=TIMEOUT_MS)
    qtbot.wait(200)  # the worker's result is shown in a turn of its own


def _variant_layers(viewer) -> list:
    return [layer for layer in viewer.layers if layer.metadata.get(OPENED_KEY) == ROLE]


def test_an_opened_row_tells_what_would_fix_it_and_shows_a_variant_beside_the_prediction(
        make_napari_viewer, explained_run, qtbot):
    table = pd.read_csv(explained_run / "explain.csv", dtype={"case_id": str, "label_name": str})
    by_target = {row["label_name"]: row for row in table.to_dict("records")}
    viewer = make_napari_viewer(show=True)
    widget = dock(viewer, "benchmark")
    widget.out_dir.value = explained_run
    qtbot.waitUntil(lambda: widget.results.table.rowCount() == 2 and not widget.loading, timeout=TIMEOUT_MS)
    rows = {row["label_name"]: row for row in widget.results.rows}
    fix = widget.browser.fix
    assert not fix.isVisible()  # no row opened yet

    # (a) the opened row names the three variants with explain.csv's DSC and gain
    _open(qtbot, widget, rows["anterior"])
    explained = by_target["anterior"]
    assert fix.isVisible() and fix.isEnabled()
    items = [fix.itemText(i) for i in range(fix.count())]
    assert items[1:] == [f"{SHORT_WORDS[v]} {_told(explained, v)}" for v in VARIANTS], items
    assert items[0].startswith("fix: box +") and items[0] == fix_summary(explained)  # the gains, largest first
    sentence = ("what would fix it: " + f"true extent {_told(explained, 'oracle_extent')} · best prompt slice "
                f"{_told(explained, 'oracle_prompt_slice')} · true box {_told(explained, 'oracle_box')}")
    assert fix.toolTip().startswith(sentence), fix.toolTip()
    assert widget.status.value.startswith("opened hippocampus_001 (anterior")  # the status line is kept as it was
    assert _variant_layers(viewer) == []  # nothing shown before a variant is chosen

    # (b) choosing the true box (as a pick in the list does) adds its saved mask over the image
    index = fix.findData("oracle_box")
    fix.setCurrentIndex(index)
    fix.activated.emit(index)
    qtbot.waitUntil(lambda: ROLE in widget.opened, timeout=TIMEOUT_MS)
    layer, image = widget.opened[ROLE], widget.opened["image"]
    assert _variant_layers(viewer) == [layer]
    assert layer.name == "prediction vs true box on every slice (hippocampus_001 anterior)"
    saved = read_label(explained_run / explained["mask_oracle_box"]).array
    prediction = binary_target(np.asarray(widget.opened["prediction"].data), 1, binary_fallback=True)
    # a pair against the prediction (prediction only 1, variant only 2, both 3), never drawn over it
    np.testing.assert_array_equal(np.asarray(layer.data),
                                  ab_overlay(prediction, binary_target(saved, 1, binary_fallback=True)))
    assert not widget.opened["prediction"].visible and layer.visible
    legend = [text for text, _color in legend_shown(viewer)]
    assert legend == ["prediction only", "true box on every slice only", "both"], legend
    assert layer.data.shape == image.data.shape and "prediction" in widget.opened
    np.testing.assert_array_equal(layer.scale, image.scale)
    np.testing.assert_array_equal(layer.translate, image.translate)
    assert layer.metadata["case_id"] == "hippocampus_001" and layer.metadata["label_name"] == "anterior"
    assert layer.metadata["variant"] == "oracle_box" and layer.metadata["target_label"] == 1
    order = list(viewer.layers)
    assert order.index(layer) == order.index(image) + 1  # directly above its image

    # (c) another row opened: the anterior mask is gone, the chosen variant shows the posterior's own
    _open(qtbot, widget, rows["posterior"])
    qtbot.waitUntil(lambda: [v.metadata["label_name"] for v in _variant_layers(viewer)] == ["posterior"],
                    timeout=TIMEOUT_MS)
    posterior = widget.opened[ROLE]
    assert fix.currentData() == "oracle_box"
    assert fix.currentText() == f"true box {_told(by_target['posterior'], 'oracle_box')}"
    saved = read_label(explained_run / by_target["posterior"]["mask_oracle_box"]).array
    prediction = binary_target(np.asarray(widget.opened["prediction"].data), 2, binary_fallback=True)
    np.testing.assert_array_equal(np.asarray(posterior.data),
                                  ab_overlay(prediction, binary_target(saved, 2, binary_fallback=True)))
    assert posterior.name == "prediction vs true box on every slice (hippocampus_001 posterior)"
    assert not any("anterior" in layer.name for layer in _variant_layers(viewer))

    # the prediction only: the variant's layer removed
    fix.setCurrentIndex(0)
    fix.activated.emit(0)
    qtbot.waitUntil(lambda: _variant_layers(viewer) == [] and ROLE not in widget.opened, timeout=TIMEOUT_MS)

    # a run folder without explain.csv says nothing more
    (explained_run / "explain.csv").rename(explained_run / "explain.csv.away")
    fix.choose("oracle_box")
    _open(qtbot, widget, rows["anterior"])
    assert not fix.isVisible() and _variant_layers(viewer) == []


def test_the_words_follow_the_image_and_a_shut_box_cuts_between_gains(qtbot):
    """A video's variants say frame; the shut box's text drops whole gains, never cuts a number."""
    from qtpy.QtWidgets import QLabel

    explained = {"dice_oracle_extent": 0.45, "gain_oracle_extent": 0.02, "dice_oracle_prompt_slice": 0.5,
                 "gain_oracle_prompt_slice": 0.05, "dice_oracle_box": 0.56, "gain_oracle_box": 0.11}
    assert fix_sentence(explained) == ("what would fix it: true extent 0.45 (+0.02) · best prompt slice 0.50 "
                                       "(+0.05) · true box 0.56 (+0.11)")
    video = fix_sentence(explained, "frame") + fix_summary(explained, "frame") + variant_name("oracle_box", "frame")
    assert "slice" not in video and "best prompt frame 0.50" in video and video.endswith("true box on every frame")
    assert fix_summary(explained) == "fix: box +0.11 · prompt slice +0.05 · extent +0.02"
    assert choice_text({**explained, "dice_oracle_extent": float("nan")}, "oracle_extent") == "true extent: n/a"
    label = QLabel()
    qtbot.addWidget(label)
    metrics = label.fontMetrics()
    summary = fix_summary(explained)
    room = metrics.horizontalAdvance("fix: box +0.11 · prompt slice +0.05 …") + 1
    assert fitted(summary, metrics, room) == "fix: box +0.11 · prompt slice +0.05 …"
    assert fitted(summary, metrics, 10_000) == summary


def test_a_video_row_tells_what_would_fix_it_in_frames(make_napari_viewer, shared_data, tmp_path, qtbot):
    """On a video every word of it says frame, and the variant's mask lies over the frames (RGB image)."""
    from qtpy.QtCore import Qt
    from test_widgets_readable import _visible_texts

    cli = str(Path(sys.executable).with_name("medsam-eval"))
    run_dir = tmp_path / "run"
    subprocess.run([cli, "run", str(shared_data / "cvc_clinicdb_video"), "--model", "box", "--limit", "1",
                    "--save-predictions", "--no-report", "--quiet", "--out", str(run_dir)], check=True)
    subprocess.run([cli, "explain", str(run_dir), "--quiet", "--no-report"], check=True)
    viewer = make_napari_viewer(show=True)
    widget = dock(viewer, "benchmark")
    widget.out_dir.value = run_dir
    qtbot.waitUntil(lambda: widget.results.table.rowCount() == 1 and not widget.loading, timeout=TIMEOUT_MS)
    row = widget.results.rows[0]
    _open(qtbot, widget, row)
    fix = widget.browser.fix
    assert fix.isVisible() and "best prompt frame" in fix.itemText(fix.findData("oracle_prompt_slice"))
    told = _visible_texts(widget.native) + [fix.toolTip()] + [fix.itemData(i, Qt.ToolTipRole) or "" for i in range(fix.count())]
    assert [text for text in told if "slice" in text.lower()] == [], told
    fix.choose("oracle_box")
    qtbot.waitUntil(lambda: ROLE in widget.opened, timeout=TIMEOUT_MS)
    layer, image = widget.opened[ROLE], widget.opened["image"]
    assert layer.name == f"prediction vs true box on every frame ({row['case_id']} {row['label_name']})"
    assert image.rgb and layer.data.shape == image.data.shape[:-1]
    np.testing.assert_array_equal(layer.scale, image.scale[:layer.ndim])
