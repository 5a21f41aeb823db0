"""Nested objects in napari (Xvfb), through the Plugins menu: each object keeps its own mask everywhere.

A sphere inside a sphere, segmented by the ``oracle`` as two objects (the outer one a region of both
labels): both objects keep their voxels in the prediction layer, Compare scores each one's own mask
(DSC > 0.9, the inner one included), and undoing or correcting the outer one never erases the inner
one. The CT phantom's lesion inside its liver, segmented by LiteMedSAM as three objects (the issue's
scenario, where the lesion was dropped): each keeps its voxels and is drawn. Saving the layer writes the
hidden object to a file of its own and says so.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from napari.layers import Labels

from plugin_dock import dock
from napari_medsam_eval.models.baselines import OracleBackend
from napari_medsam_eval._widgets.common._object_masks import object_mask
from napari_medsam_eval._writer import write_labels
from napari_medsam_eval.io import read_label

pytestmark = [pytest.mark.gui]
TIMEOUT_MS = 600_000


def ball(shape, centre, radii):
    grid = np.indices(shape, dtype=float)
    return sum(((g - c) / r) ** 2 for g, c, r in zip(grid, centre, radii)) <= 1.0


def _wait(qtbot, widget):
    qtbot.waitUntil(lambda: not widget.busy, timeout=TIMEOUT_MS)
    qtbot.wait(50)


def _segment_object(widget, qtbot, value: int, region: str = "") -> None:
    widget.target_label.value = value
    widget.region.value = region
    assert widget.prompt_from_ground_truth() is not None
    widget.propagate()
    _wait(qtbot, widget)


def _compare_dice(compare, qtbot) -> float:
    comparison = compare.update_comparison()
    assert comparison is not None, compare.status.value
    return comparison.dice


@pytest.fixture
def spheres(make_napari_viewer):
    shape = (20, 48, 48)
    label = np.zeros(shape, dtype=np.uint8)
    outer, inner = ball(shape, (10, 24, 24), (8, 18, 18)), ball(shape, (10, 24, 24), (6, 13, 13))
    label[outer] = 1
    label[inner] = 2
    viewer = make_napari_viewer()
    image = viewer.add_image((label * 80 + 30).astype(np.uint8), name="spheres", metadata={"kind": "volume"})
    truth = viewer.add_labels(label, name="spheres ground truth", metadata={"role": "ground_truth"})
    oracle = OracleBackend()
    oracle.set_ground_truth(label, {1: outer})  # object 1 is the region of labels 1 and 2: the whole outer sphere
    return viewer, image, truth, oracle, outer, inner


def test_a_sphere_inside_a_sphere_keeps_both_objects_in_the_docks(spheres, qtbot):
    viewer, image, truth, oracle, outer, inner = spheres
    widget = dock(viewer, "segment", oracle)
    compare = dock(viewer, "compare")
    _segment_object(widget, qtbot, 2)
    _segment_object(widget, qtbot, 1, "1,2")
    layer = viewer.layers["spheres prediction"]
    own_inner, own_outer = object_mask(layer, 2), object_mask(layer, 1)
    # (the propagation's stop rule may leave a tip slice of a few pixels: nearly all of each sphere)
    assert not (own_inner & ~inner).any() and own_inner.sum() > 0.99 * inner.sum()
    assert not (own_outer & ~outer).any() and own_outer.sum() > 0.99 * outer.sum()
    assert (own_outer & own_inner).sum() == own_inner.sum()  # nested: the outer object holds the inner one
    data = np.asarray(layer.data)
    assert ((data == 2) == own_inner).all() and ((data == 1) == (own_outer & ~own_inner)).all()  # inner on top
    assert layer.metadata["objects"][1]["labels"] == [1, 2] and widget.objects.title.value.startswith("labels 1, 2")
    # Compare follows the Segment widget's object and scores its own mask against its own region
    assert compare.pred_layer.value is layer and compare.gt_layer.value is truth
    assert compare.target_label.value == 1
    dice_outer = _compare_dice(compare, qtbot)
    widget.target_label.value = 2
    assert compare.target_label.value == 2
    dice_inner = _compare_dice(compare, qtbot)
    assert dice_outer > 0.9 and dice_inner > 0.9, (dice_outer, dice_inner)
    assert "object 1 (labels 1, 2)" not in compare.status.value and compare.status.value.startswith("label 2")
    # undoing the outer object's attempt leaves the inner one whole
    widget.target_label.value = 1
    undone = widget.objects.undo()
    assert undone is not None and undone.target_label == 1
    assert not object_mask(layer, 1).any() and (object_mask(layer, 2) == own_inner).all()
    assert ((np.asarray(layer.data) == 2) == own_inner).all() and not (np.asarray(layer.data) == 1).any()
    # segmented again, then corrected on a slice with a box over both: the inner object keeps every voxel
    _segment_object(widget, qtbot, 1, "1,2")
    z = 10
    viewer.dims.set_current_step(0, z)
    boxes = widget.box_layer.value
    boxes.data = []
    boxes.add_rectangles(np.array([[z, 5, 5], [z, 5, 43], [z, 43, 43], [z, 43, 5]]))
    widget.correct_slice()
    _wait(qtbot, widget)
    assert (object_mask(layer, 2) == own_inner).all() and ((np.asarray(layer.data) == 2) == own_inner).all()
    assert object_mask(layer, 1)[z].sum() >= outer[z].sum()  # the box filled by the outer region on slice z


def test_saving_nested_objects_writes_the_hidden_one_apart(spheres, qtbot, tmp_path):
    viewer, image, truth, oracle, outer, inner = spheres
    widget = dock(viewer, "segment", oracle)
    _segment_object(widget, qtbot, 2)
    _segment_object(widget, qtbot, 1, "1,2")
    layer = viewer.layers["spheres prediction"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = write_labels(str(tmp_path / "objects.nii.gz"), layer.data,
                               {"metadata": layer.metadata, "scale": layer.scale, "name": layer.name})
    assert [p.rsplit("/", 1)[-1] for p in written] == ["objects.nii.gz", "objects.label1.nii.gz"]
    assert any("object 1" in str(w.message) and "objects.label1.nii.gz" in str(w.message) for w in caught)
    assert ((read_label(written[1]).array == 1) == object_mask(layer, 1)).all()  # the outer object whole
    assert ((read_label(written[0]).array == 2) == object_mask(layer, 2)).all()


def test_the_ct_phantom_lesion_inside_the_liver_is_kept(make_napari_viewer, qtbot):
    from napari_medsam_eval.session.session import Session

    viewer = make_napari_viewer()
    viewer.open_sample("napari-medsam-eval", "phantom_ct")
    truth = next(layer for layer in viewer.layers if layer.metadata.get("role") == "ground_truth")
    widget = dock(viewer, "segment", Session.build_backend("litemedsam", device="cpu"))
    for value in (1, 2, 3):  # the liver, the kidney, then the lesion inside the liver
        _segment_object(widget, qtbot, value)
    layer = next(layer for layer in viewer.layers if isinstance(layer, Labels)
                 and layer.metadata.get("role") == "prediction")
    label = np.asarray(truth.data)
    liver, lesion = object_mask(layer, 1), object_mask(layer, 3)
    assert liver.any() and object_mask(layer, 2).any() and lesion.any()
    assert (liver & lesion).any()  # nested: the liver's prediction covers part of the lesion ...
    assert ((np.asarray(layer.data) == 3) == lesion).all()  # ... and the lesion is drawn whole over it
    lesion_dice = 2 * (lesion & (label == 3)).sum() / (lesion.sum() + (label == 3).sum())
    compare = dock(viewer, "compare")
    widget.target_label.value = 3
    assert compare.target_label.value == 3
    assert _compare_dice(compare, qtbot) == pytest.approx(lesion_dice)


def test_the_benchmark_dock_opens_a_missed_lesion_at_its_slice(make_napari_viewer, qtbot, tmp_path):
    """A run that missed lesions (the box baseline fills each lesion's box and leaks through the volume: its masks
    merge into one predicted lesion that matches none): the *missed lesions* filter keeps the row, and opening it
    shows the smallest missed lesion's largest slice, saying so."""
    from napari_medsam_eval.benchmark import run_benchmark
    from napari_medsam_eval._widgets.benchmark._why_filter import MISSED_LESIONS
    from napari_medsam_eval._widgets.common._layers import current_index

    shape = (20, 64, 64)
    label = np.zeros(shape, dtype=np.uint8)
    label[ball(shape, (10, 20, 20), (8, 14, 14))] = 1   # a large lesion
    label[12:15, 48:52, 46:50] = 1                     # a small one, largest on slices 12-14
    image = (label * 150 + 40).astype(np.uint8)
    folder = tmp_path / "lesions"
    folder.mkdir()
    np.savez_compressed(folder / "CT_lesions.npz", imgs=image, gts=label, spacing=np.array([1.0, 1.0, 2.0]))
    table = run_benchmark(folder, tmp_path / "run", "box", targets=["lesion=1:lesions"], save_predictions=True)
    row = table.iloc[0]
    assert (row["lesions_true"], row["lesions_missed"]) == (2, 2)
    from napari_medsam_eval.benchmark.open_row import missed_lesion

    missed = missed_lesion(row.to_dict())
    assert missed["voxels"] == 48 and missed["largest_slice"] == 12
    viewer = make_napari_viewer()
    widget = dock(viewer, "benchmark")
    widget.out_dir.value = tmp_path / "run"
    qtbot.waitUntil(lambda: not widget.loading and widget.results.table.rowCount() == 1, timeout=60_000)
    widget.results.why_filter.choose(MISSED_LESIONS)
    assert widget.results.table.rowCount() == 1
    widget.results.why_filter.choose("ok")
    assert widget.results.table.rowCount() == 0  # (its dominant part is not ok: the filters differ)
    widget.results.why_filter.choose(MISSED_LESIONS)
    opener = widget.open_row(widget.results.row_at(0))
    qtbot.waitUntil(lambda: not widget.opener.busy and "opened" in widget.status.value, timeout=60_000)
    ground_truth = widget.opened["ground_truth"]
    assert current_index(viewer, ground_truth) == missed["largest_slice"]
    assert f"lesion {missed['number']} (" in widget.status.value
    # what the IoU rule saw (issue 68): the merged blob lies on it, below the match, or nothing does
    assert ("below the IoU 0.5 match" in widget.status.value) != ("no predicted lesion touches it" in widget.status.value)
    assert opener is not None
