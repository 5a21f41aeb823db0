"""One canvas, composed (issue 65), the other views' pixels: a variant of "what would fix it", a prompt
sensitivity's agreement map and an opened hippocampus row's TP / FP / FN, at 1600 x 1000 and 1366 x 768 (a real
viewer under Xvfb): each colour on screen is the legend's, blended at its layer's opacity, and the view's layer
sits directly above its image (the checks: ``tests/test_canvas_composed.py``)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from napari.layers import Labels
from superqt.utils._qthreading import WorkerBase

from plugin_dock import dock
from test_canvas_composed import SIZES, TOLERANCE, _directly_above, _interior, _legend_named, _pixel, _settle, \
    check_drawn
from napari_medsam_eval.core import palette
from napari_medsam_eval.core.palette import hex_to_rgb
from napari_medsam_eval.evaluation.mask_comparison import AB_A_ONLY, AB_B_ONLY, AB_BOTH, OVERLAY_FN, OVERLAY_FP, \
    OVERLAY_TP, ab_overlay
from napari_medsam_eval.studies.sensitivity import SensitivityResult
from napari_medsam_eval._widgets.benchmark._variant_layer import ROLE as VARIANT_ROLE
from napari_medsam_eval._widgets.common._canvas import compose
from napari_medsam_eval._widgets.common._canvas_style import legend_shown
from napari_medsam_eval._widgets.common._layers import go_to_index
from napari_medsam_eval._widgets.compare._sensitivity import show_result

pytestmark = pytest.mark.gui

SIZE_IDS = [f"{w}x{h}" for w, h in SIZES]


def _hippocampus(viewer, shared_data: Path, size):
    viewer.window._qt_window.resize(*size)
    image, truth = viewer.open(str(shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"),
                               plugin="napari-medsam-eval")
    mask = np.asarray(truth.data) == 1
    return image, truth, mask, int(np.argmax(mask.sum(axis=(1, 2))))


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_a_variant_is_a_pair_against_the_prediction_in_its_legends_colours(make_napari_viewer, qtbot, shared_data,
                                                                          size):
    viewer = make_napari_viewer(show=True)
    image, truth, mask, index = _hippocampus(viewer, shared_data, size)
    variant = viewer.add_layer(Labels(ab_overlay(mask, np.roll(mask, 2, axis=1)), name="prediction vs true box",
                                      opacity=0.6, metadata={"role": VARIANT_ROLE, "image": image.name}))
    compose(viewer, "variant", image, {VARIANT_ROLE: variant}, words={VARIANT_ROLE: "true box"})
    _directly_above(viewer, variant, image)
    assert [text for text, _c in legend_shown(viewer)] == ["prediction only", "true box only", "both"]
    assert not truth.visible
    go_to_index(viewer, image, index)
    viewer.reset_view()
    colours = {AB_A_ONLY: palette.A_ONLY, AB_B_ONLY: palette.B_ONLY, AB_BOTH: palette.BOTH}
    _legend_named(viewer, colours)
    check_drawn(qtbot, viewer, variant, colours, index)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_an_agreement_map_is_drawn_in_its_bins_colours(make_napari_viewer, qtbot, shared_data, size):
    viewer = make_napari_viewer(show=True)
    image, truth, mask, index = _hippocampus(viewer, shared_data, size)
    agreement = np.zeros(mask.shape, np.float32)
    bins = [0.1, 0.3, 0.5, 0.7, 0.9]  # one voxel band of each bin across the object, on the slice shown
    rows = np.nonzero(mask[index].any(axis=1))[0]
    for band, value in zip(np.array_split(rows, len(bins)), bins):
        agreement[index, band] = np.where(mask[index, band], value, 0)
    prediction = viewer.add_layer(Labels(mask.astype(np.uint8), name=f"{image.name} prediction",
                                         metadata={"role": "prediction", "image": image.name, "target_label": 1}))
    result = SensitivityResult(prompts=[], agreement=agreement, dice=[0.5], worst_mask=mask, done=1)
    layer, _worst = show_result(viewer, truth, result, image.name, under=prediction)
    _directly_above(viewer, layer, image)
    assert layer.visible and not prediction.visible and not truth.visible
    assert [c for _t, c in legend_shown(viewer)] == [c.upper() for _low, c in palette.AGREEMENT_BINS]
    go_to_index(viewer, image, index)
    viewer.reset_view()
    shot = _settle(qtbot, viewer)
    for value, (_low, colour) in zip(bins, palette.AGREEMENT_BINS):  # opaque: the bin's colour itself
        voxels = _interior(agreement[index] == value, count=6)
        good = sum(np.abs(shot[_pixel(viewer, layer, shot, (index, *v))] - np.array(hex_to_rgb(colour)) * 255).max()
                   <= TOLERANCE for v in voxels)
        assert voxels and good >= 0.8 * len(voxels), (value, colour, good, len(voxels))


@pytest.fixture(scope="module")
def box_run(tmp_path_factory, shared_data) -> Path:
    """A box run of one hippocampus case with its predictions (the console script, as a user runs it)."""
    out = tmp_path_factory.mktemp("canvas") / "run"
    subprocess.run([str(Path(sys.executable).with_name("medsam-eval")), "run", str(shared_data / "hippocampus_mri"),
                    "--model", "box", "--limit", "1", "--save-predictions", "--no-report", "--quiet", "--out",
                    str(out)], check=True)
    return out


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_an_opened_hippocampus_row_compared_shows_tp_fp_fn_over_its_image(make_napari_viewer, qtbot, box_run, size):
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(*size)
    bench = dock(viewer, "benchmark")
    compare = dock(viewer, "compare")
    bench.out_dir.value = box_run
    qtbot.waitUntil(lambda: bench.results.table.rowCount() == 2 and not bench.loading, timeout=60_000)
    row = next(r for r in bench.results.rows if r["label_name"] == "anterior")
    worker = bench.open_row(row)
    qtbot.waitUntil(lambda: worker not in WorkerBase._worker_set and not bench.opener.busy, timeout=60_000)
    image = bench.opened["image"]
    compare.pred_layer.value, compare.gt_layer.value = bench.opened["prediction"], bench.opened["ground_truth"]
    assert compare.compare() is not None  # the user presses Compare on the opened row
    qtbot.waitUntil(lambda: compare.overlay_layer is not None and compare.overlay_layer.visible, timeout=60_000)
    overlay = compare.overlay_layer
    _directly_above(viewer, overlay, image)
    data = np.asarray(overlay.data)
    prompt_slice = int(row["prompt_slice"]) if "prompt_slice" in row and row["prompt_slice"] == row["prompt_slice"] \
        else -1
    counts = [(np.isin(data[i], [OVERLAY_TP, OVERLAY_FP, OVERLAY_FN]).sum(), i) for i in range(len(data))
              if i != prompt_slice and all((data[i] == v).any() for v in (OVERLAY_TP, OVERLAY_FP))]
    index = max(counts)[1]  # the slice with most of TP and FP (not the prompt's: its box is a marker)
    go_to_index(viewer, image, index)
    viewer.reset_view()
    colours = {v: c for v, c in {OVERLAY_TP: palette.TRUE_POSITIVE, OVERLAY_FP: palette.FALSE_POSITIVE,
                                 OVERLAY_FN: palette.FALSE_NEGATIVE}.items() if (data[index] == v).sum() >= 9}
    _legend_named(viewer, colours)
    check_drawn(qtbot, viewer, overlay, colours, index)
