"""The Compare widget's prompt sensitivity in a real viewer (Xvfb) with real LiteMedSAM on a real DeepLesion case:
the prompt of the propagated prediction is given again N times, perturbed; the agreement map and the worst
run become layers, the DSC spread and its histogram are shown, and the runs reuse the slice embeddings."""
from __future__ import annotations

import numpy as np
import pytest

from plugin_dock import dock
from napari_medsam_eval._widgets.compare._sensitivity import NEEDS_SEGMENT, prompt_of
from test_widgets_segment import LESION, _wait, _widget, backend, errors  # noqa: F401 - shared

pytestmark = pytest.mark.gui


def test_compare_shows_the_prompt_sensitivity_of_a_propagation(make_napari_viewer, shared_data, backend, qtbot,
                                                                errors):
    viewer = make_napari_viewer()
    compare = dock(viewer, "compare")
    image, gt = viewer.open(str(shared_data / "deeplesion_ct_npz" / LESION), plugin="napari-medsam-eval")
    assert compare.sensitivity.start() is None and errors[-1] == NEEDS_SEGMENT  # no Segment widget yet
    errors.clear()
    segment = _widget(viewer, backend)
    prompt = segment.prompt_from_ground_truth()
    _wait(qtbot, segment.propagate())
    qtbot.waitUntil(lambda: compare.comparison is not None, timeout=10_000)
    prediction = viewer.layers[f"{image.name} prediction"]
    assert compare.pred_layer.value is prediction and compare.gt_layer.value is gt
    assert prompt_of(prediction, 1).boxes == prompt.boxes

    calls = backend.encoder_calls
    compare.sensitivity.runs.value = 3
    worker = compare.sensitivity.start()
    assert worker is not None and compare.sensitivity.cancel_button.enabled
    _wait(qtbot, worker)
    assert not errors
    result = compare.sensitivity.result
    assert result.done == 3 and not result.cancelled and len(result.dice) == 3
    assert result.made_by == "litemedsam fp32"  # what made the runs, as a prediction says it
    assert "(by litemedsam fp32)" in compare.sensitivity.status.value
    # the propagation encoded the slices it reached; the perturbed runs reach few others, if any
    n_slices = image.data.shape[0]
    assert backend.encoder_calls - calls <= n_slices - prediction.data.any(axis=(1, 2)).sum()
    agreement = viewer.layers[f"{image.name} agreement"]
    np.testing.assert_array_equal(agreement.data, result.agreement)
    assert agreement.data.min() >= 0 and agreement.data.max() <= 1 and (agreement.data == 1).any()
    assert agreement.metadata["role"] == "agreement" and tuple(agreement.scale) == tuple(gt.scale)
    assert agreement.metadata["made_by"] == "by litemedsam fp32"
    worst = viewer.layers[f"{image.name} worst run"]
    np.testing.assert_array_equal(worst.data > 0, result.worst_mask)
    spread = result.spread()
    assert f"{spread['dice_min']:.3f} / {spread['dice_median']:.3f} / {spread['dice_max']:.3f}" in \
        compare.sensitivity.spread.value
    assert sum(patch.get_height() for patch in compare.sensitivity.axes.patches) == 3  # the histogram
    assert compare.pred_layer.value is prediction, "the new layers do not take the comparison over"
