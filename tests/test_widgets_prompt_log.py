"""Drawn vs protocol prompts: a box drawn on a real DeepLesion CT case with its
ground truth is logged beside the medsam2 box, and `medsam-eval run --prompts LOG.csv` replays it
to the same DSC (real LiteMedSAM, real napari viewer under Xvfb)."""
from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.cli import main
from napari_medsam_eval.protocols.prompt_log import append_row, read_log
from napari_medsam_eval.protocols.geometry import tight_box
from test_widgets_clinician import _draw_box
from test_widgets_segment import _wait, _widget, backend, errors  # noqa: F401 - shared fixtures

pytestmark = pytest.mark.gui
CASE = "CT_Lesion_000001_02_01_008-023"


def _wait_rows(qtbot, widget, n):
    qtbot.waitUntil(lambda: widget.prompt_log.rows_written >= n and not widget.prompt_log.pending, timeout=120_000)


def _replay(tmp_path, dataset, log, name):
    out = tmp_path / name
    assert main(["run", str(dataset), "--prompts", str(log), "--model", "litemedsam", "--device", "cpu",
                 "--out", str(out), "--quiet", "--no-report"]) == 0
    return pd.read_csv(out / "results.csv")


def test_drawn_box_logged_and_replayed(make_napari_viewer, shared_data, backend, qtbot, errors, tmp_path):
    dataset = tmp_path / "data"
    dataset.mkdir()
    for name in (CASE, "CT_Lesion_000002_03_01_035-047"):  # the second case has no logged prompt
        shutil.copy(shared_data / "deeplesion_ct_npz" / f"{name}.npz", dataset)
    viewer = make_napari_viewer()
    image, gt = viewer.open(str(dataset / f"{CASE}.npz"), plugin="napari-medsam-eval")
    widget = _widget(viewer, backend)
    log = tmp_path / "prompt_log.csv"
    assert not widget.prompt_log.log_drawn.value  # the suite's MEDSAM_EVAL_PROMPT_LOG=off
    assert widget.prompt_log.summary.value.startswith("off: drawn prompts are not logged")
    widget.prompt_log.log_drawn.value = True
    widget.prompt_log.path.value = log
    assert widget.prompt_log.summary.value.startswith(  # the screen says where it writes, and what
        f"on: each drawn prompt, with its case id and image path, is added to {log}")
    assert widget.gt_layer.value is gt and widget.protocol.value == "medsam2"
    z = int(np.argmax((gt.data == 1).sum(axis=(1, 2))))
    x0, y0, x1, y1 = tight_box(gt.data[z] == 1)
    drawn = (x0 - 4.0, y0 + 2.0, x1 + 6.0, y1 + 3.0)  # a person's box: a little off the tight one
    shapes = viewer.add_shapes(ndim=3, scale=image.scale)
    _draw_box(shapes, image, drawn, z)
    viewer.dims.set_point(0, image.data_to_world([z, 0, 0])[0])

    # Segment slice: one row, the protocol's box beside the drawn one
    _wait(qtbot, widget.segment_slice())
    _wait_rows(qtbot, widget, 1)
    (row,) = read_log(log)
    assert (row.case_id, row.target_label, row.slice_index, row.operation) == (CASE, 1, z, "slice")
    assert row.values["model"] == "litemedsam" and row.values["protocol"] == "medsam2"
    assert row.image_path.endswith(f"{CASE}.npz")
    assert widget.prompt_log.summary.value.endswith(f"; logged in {log}")
    np.testing.assert_allclose(row.boxes[0], drawn, atol=1e-6)
    their = [float(v) for v in row.values["protocol_box"].strip("[]").split(",")]
    assert their == [float(v) for v in (x0, y0, x1, y1)]  # medsam2 on this slice: the tight box
    iou = row.number("box_iou")
    assert 0.3 < iou < 1.0
    dx, dy = ((drawn[0] + drawn[2]) - (x0 + x1)) / 2, ((drawn[1] + drawn[3]) - (y0 + y1)) / 2
    assert row.number("centre_offset_px") == pytest.approx(math.hypot(dx, dy))
    assert row.number("centre_offset_mm") == pytest.approx(math.hypot(dx * image.scale[2], dy * image.scale[1]))
    for column in ("drawn_dsc", "protocol_dsc", "drawn_dsc_slice", "protocol_dsc_slice"):
        assert 0.0 <= row.number(column) <= 1.0, column
    assert row.number("drawn_dsc_slice") > 0.5 and row.number("protocol_dsc_slice") > 0.5
    prediction = viewer.layers[f"{image.name} prediction"].data == 1
    truth = gt.data == 1
    expected = 2 * (prediction & truth).sum() / (prediction.sum() + truth.sum())
    assert row.number("drawn_dsc") == pytest.approx(expected, abs=1e-12)  # what the user got
    assert "box IoU" in widget.prompt_log.summary.value

    # Propagate the same box: a second row, the protocol's box propagated the same way
    _wait(qtbot, widget.propagate())
    _wait_rows(qtbot, widget, 2)
    rows = read_log(log)
    assert len(rows) == 2 and rows[1].operation == "propagate" and rows[1].slice_index == z
    interactive = rows[1].number("drawn_dsc")
    assert interactive == pytest.approx(widget.last_result and _dice(widget.last_result.mask, truth), abs=1e-12)
    assert 0.5 < rows[1].number("protocol_dsc") <= 1.0
    assert not errors

    # replay the log (its last row: the propagation) through the CLI: the same DSC, same operation
    table = _replay(tmp_path, dataset, log, "run")
    mine = table[table.case_id == CASE].iloc[0]
    assert mine.status == "ok" and mine.protocol == "replay"
    assert round(mine.dice, 4) == round(interactive, 4)
    other = table[table.case_id != CASE].iloc[0]
    assert other.status == "failed" and "no logged prompt" in other.error

    # the slice row alone: replayed on its slice only, the same DSC again
    only_slice = tmp_path / "slice_only.csv"
    append_row(only_slice, {k: v for k, v in rows[0].values.items()})
    table = _replay(tmp_path, dataset, only_slice, "run_slice")
    mine = table[table.case_id == CASE].iloc[0]
    assert mine.status == "ok" and round(mine.dice, 4) == round(rows[0].number("drawn_dsc"), 4)


def _dice(a, b):
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    return 2 * (a & b).sum() / (a.sum() + b.sum())
