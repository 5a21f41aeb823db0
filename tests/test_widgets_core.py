"""The Qt-free parts behind the widgets: session.Session (without a model), compare_masks,
and the napari layer <-> Prompt conversions (layers without a viewer), on real data."""
from __future__ import annotations

import numpy as np
import pytest

from napari_medsam_eval.core.case import infer_kind
from napari_medsam_eval.core.palette import NEGATIVE_POINT, POSITIVE_POINT, hex_to_rgb
from napari_medsam_eval.evaluation.mask_comparison import OVERLAY_FN, OVERLAY_FP, OVERLAY_TP, binary_target, compare_masks
from napari_medsam_eval.session.session import NoImageError, NoModelError, Session
from napari_medsam_eval.io import read_case
from napari_medsam_eval.evaluation.metrics import compute_dice, compute_per_slice_dice
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.protocols import build_protocol

HIPPO = "hippocampus_015"


@pytest.fixture(scope="module")
def hippo(shared_data):
    root = shared_data / "hippocampus_mri"
    return read_case(root / "imagesTr" / f"{HIPPO}.nii.gz", root / "labelsTr" / f"{HIPPO}.nii.gz")


def test_infer_kind():
    assert infer_kind((30, 40, 50)) == "volume"
    assert infer_kind((30, 40, 50, 3), rgb=True) == "video"
    assert infer_kind((40, 50)) == "image"
    assert infer_kind((40, 50, 3), rgb=True) == "image"
    assert infer_kind((30, 40, 50), hint="video") == "video"
    with pytest.raises(ValueError, match="spatial"):
        infer_kind((40, 50), hint="volume")
    with pytest.raises(ValueError, match="2D or 3D"):
        infer_kind((2, 30, 40, 50))


def test_session_prepares_intensity_once(hippo):
    session = Session()
    prepared = session.set_image(hippo.image, kind="volume", modality="MR", image_id="h")
    assert hippo.image.dtype == np.float32 and prepared.dtype == np.uint8
    assert prepared.shape == hippo.image.shape and session.n_slices == hippo.image.shape[0]
    from napari_medsam_eval.core.intensity import prepare_intensity

    np.testing.assert_array_equal(prepared, prepare_intensity(hippo.image, "MR"))
    assert session.set_image(hippo.image, kind="volume", modality="MR", image_id="h") is prepared  # cached
    assert session.image_id == "h"
    session.set_image(hippo.image.copy(), kind="volume", modality="MR", image_id="h")
    assert session.image_id != "h"  # a new array never shares cache keys with the old one
    assert session.cache_key(4) == (session.image_id, 4)


def test_session_needs_model_and_image(hippo):
    session = Session()
    prompt = Prompt(target_label=1, slice_index=3, boxes=[(1, 1, 5, 5)])
    with pytest.raises(NoImageError):
        session.propagate(prompt)
    session.set_image(hippo.image, modality="MR")
    with pytest.raises(NoModelError):
        session.segment_slice(prompt)


@pytest.mark.parametrize("protocol", ["medsam2", "litemedsam-3dbox", "box-jitter"])
def test_prompt_from_ground_truth_is_the_protocols(hippo, protocol):
    session = Session()
    session.set_image(hippo.image, kind="volume", modality="MR")
    prompt = session.prompt_from_ground_truth(hippo.label, 2, protocol)
    expected = build_protocol(protocol).prompts(hippo.label, kind="volume", target_labels=[2])[0]
    assert prompt.to_dict() == expected.to_dict()


def test_prompt_from_ground_truth_on_a_slice(hippo):
    session = Session()
    z = 12
    mazurowski = session.prompt_from_ground_truth(hippo.label, 1, "mazurowski", slice_index=z, kind="volume", modes=(2,))
    expected = build_protocol("mazurowski", modes=(2,)).prompts(hippo.label[z], kind="image", target_labels=[1])[0]
    assert mazurowski.slice_index == z and mazurowski.points == expected.points and mazurowski.info["mode"] == 2 and mazurowski.points
    key = session.prompt_from_ground_truth(hippo.label, 1, "mazurowski", kind="volume")  # slices="key" by default
    assert key.slice_index == build_protocol("medsam2").prompts(hippo.label, kind="volume", target_labels=[1])[0].slice_index
    with pytest.raises(ValueError, match="absent"):
        session.prompt_from_ground_truth(hippo.label, 1, "medsam2", slice_index=0, kind="volume")
    with pytest.raises(ValueError, match="absent"):
        session.prompt_from_ground_truth(hippo.label, 7, "medsam2", kind="volume")
    session.set_image(hippo.image[:, :, :20], modality="MR")
    with pytest.raises(ValueError, match="does not match"):
        session.prompt_from_ground_truth(hippo.label, 1)


def test_session_is_the_model_a_widget_listens_to(hippo):
    """State the Segment widget used to copy (spec loaded, ground-truth prompt, last result) lives in the
    session, which emits events; a named image is prepared by the first call that needs it."""
    import dataclasses

    session = Session()
    seen: dict[str, list] = {"backend": [], "prompt": [], "slice": [], "result": []}
    session.backend_changed.connect(seen["backend"].append)
    session.prompt_changed.connect(seen["prompt"].append)
    session.slice_ready.connect(lambda prompt, mask: seen["slice"].append((prompt, mask)))
    session.result_ready.connect(seen["result"].append)
    backend = Session.build_backend("box")
    session.set_backend(backend, ("box", None, "cpu"))
    assert seen["backend"] == [backend] and session.model_name == "box"
    assert session.has_backend(("box", None, "cpu")) and not session.has_backend(("box", None, "cuda"))

    session.use_image(hippo.image, kind="volume", modality="MR", image_id="hippo")
    assert session.n_slices == hippo.image.shape[0] and session.volume is None  # named, not prepared yet
    prompt = session.prompt_from_ground_truth(hippo.label, 2, kind="volume")
    assert seen["prompt"] == [prompt] and session.gt_prompt is prompt
    drawn = dataclasses.replace(prompt, protocol="manual", info={})  # the same box, read back from layers
    assert session.resolve_prompt(drawn) is prompt
    moved = dataclasses.replace(drawn, boxes=[(0, 0, 3, 3)])
    assert session.resolve_prompt(moved) is moved

    mask = session.segment_slice(prompt).mask  # prepares the image
    assert session.volume.dtype == np.uint8 and session.image_name == "hippo" and session.volume.shape == hippo.image.shape
    assert not seen["slice"]  # the long calls emit nothing (they run in workers) ...
    session.publish_slice(prompt, mask)  # ... the GUI hands their results over on its own thread
    ((published, slice_mask),) = seen["slice"]
    assert published is prompt and slice_mask.dtype == bool and np.array_equal(slice_mask, mask)
    result = session.propagate(prompt, z_limits=(prompt.slice_index - 1, prompt.slice_index + 1))
    assert session.last_result is None and not seen["result"]
    session.publish(result)
    assert seen["result"] == [result] and session.last_result is result and result.mask[prompt.slice_index].any()


def test_compare_masks_on_real_labels(hippo):
    gt = hippo.label == 1
    pred = np.roll(hippo.label == 1, 2, axis=2)  # a shifted prediction
    pred[gt.any(axis=(1, 2)).nonzero()[0][0]] = False  # and a missed slice
    comparison = compare_masks(pred, gt)
    assert set(np.unique(comparison.overlay)) <= {0, OVERLAY_TP, OVERLAY_FP, OVERLAY_FN}
    np.testing.assert_array_equal(comparison.overlay == OVERLAY_TP, pred & gt)
    np.testing.assert_array_equal(comparison.overlay == OVERLAY_FP, pred & ~gt)
    np.testing.assert_array_equal(comparison.overlay == OVERLAY_FN, ~pred & gt)
    assert comparison.dice == compute_dice(pred, gt)
    np.testing.assert_array_equal(comparison.per_slice, compute_per_slice_dice(pred, gt))
    worst = comparison.worst_slices()
    valid = np.flatnonzero(pred.any(axis=(1, 2)) | gt.any(axis=(1, 2)))
    assert sorted(worst.tolist()) == valid.tolist()
    values = comparison.per_slice[worst]
    assert np.all(np.diff(values) >= 0) and values[0] == 0.0
    assert comparison.counts["TP"] == int((pred & gt).sum())


def test_binary_target():
    labels = np.array([[0, 1, 2], [2, 2, 0]])
    np.testing.assert_array_equal(binary_target(labels, 2), labels == 2)
    np.testing.assert_array_equal(binary_target(labels, None), labels > 0)
    binary = np.array([[0, 1], [1, 0]], dtype=np.uint8)
    assert not binary_target(binary, 2).any()
    np.testing.assert_array_equal(binary_target(binary, 2, binary_fallback=True), binary > 0)


# ---------------------------------------------------------------- napari layers, no viewer
def test_box_vertices_round_trip():
    from napari_medsam_eval._widgets.common._prompt_layers import box_from_vertices, box_vertices

    for box in [(3, 4, 10, 20), (0, 0, 0, 0), (5, 7, 5, 9)]:
        vertices = box_vertices(box, 6)
        assert vertices.shape == (4, 3) and np.all(vertices[:, 0] == 6)
        assert box_from_vertices(vertices[:, 1:], (32, 32)) == box
    # a drawn rectangle takes the pixels whose centres it covers; clipped to the image
    assert box_from_vertices(np.array([[2.2, 3.7], [9.9, 12.0]]), (32, 32)) == (4, 3, 12, 9)
    assert box_from_vertices(np.array([[-4.0, -4.0], [40.0, 50.0]]), (32, 32)) == (0, 0, 31, 31)
    assert box_from_vertices(np.array([[40.0, 40.0], [50.0, 50.0]]), (32, 32)) is None
    assert box_from_vertices(np.array([[5.1, 5.2], [5.3, 5.4]]), (32, 32)) == (5, 5, 5, 5)


def test_prompt_layers_round_trip_with_scale(hippo):
    from napari.layers import Image, Shapes

    from napari_medsam_eval._widgets.common._prompt_layers import (make_box_layer, make_point_layer, prompt_from_layers,
                                                            prompt_slices, show_prompt, toggle_point_label)

    image = Image(hippo.image, scale=(2.0, 0.5, 0.5), translate=(10.0, 0.0, 0.0))
    boxes, points = make_box_layer(image), make_point_layer(image)
    assert tuple(boxes.scale) == tuple(image.scale) and tuple(points.translate) == tuple(image.translate)
    prompt = Prompt(target_label=1, slice_index=11, boxes=[(11, 27, 26, 43)], points=[(15, 30), (20, 35)],
                    point_labels=[1, 0])
    show_prompt(prompt, image, boxes, points)
    assert prompt_slices(image, boxes, points) == [11]
    back = prompt_from_layers(image, 11, 1, boxes, points)
    assert back.boxes == prompt.boxes and back.points == prompt.points and back.point_labels == [1, 0]
    assert prompt_from_layers(image, 10, 1, boxes, points).is_empty

    # a user's layer in world units (no scale): mapped through world coordinates
    world_boxes = Shapes(ndim=3)
    y0, x0, y1, x1 = 27 * 0.5 - 0.25, 11 * 0.5 - 0.25, 43 * 0.5 + 0.25, 26 * 0.5 + 0.25
    z = 10 + 2 * 11
    world_boxes.add_rectangles(np.array([[z, y0, x0], [z, y0, x1], [z, y1, x1], [z, y1, x0]]))
    assert prompt_from_layers(image, 11, 1, world_boxes, None).boxes == [(11.0, 27.0, 26.0, 43.0)]

    # toggling: while adding, T sets the NEXT point's label (the point napari selected last keeps its own);
    # in select mode the points the user selected flip
    points.mode = "add"
    points.selected_data = {1}
    assert toggle_point_label(points) == 0 and points.features["label"].tolist() == [1, 0]
    assert toggle_point_label(points) == 1
    points.mode = "select"
    points.selected_data = {1}
    assert toggle_point_label(points) is None
    assert points.features["label"].tolist() == [1, 1]
    points.selected_data = set()
    (key,) = [k for k in points.keymap if str(k) == "T"]  # the 'T' key calls the toggle
    assert points.keymap[key](points) == 0
    points.add([[11, 5, 5]])
    assert points.features["label"].tolist() == [1, 1, 0]
    points.selected_data = {0}  # napari copies a selected point's features into its defaults ...
    points.add([[11, 6, 6]])
    assert points.features["label"].tolist() == [1, 1, 0, 0]  # ... the chosen polarity wins
    assert tuple(points.face_color[-1][:3]) == hex_to_rgb(NEGATIVE_POINT)  # negative: black
    assert tuple(points.face_color[0][:3]) == hex_to_rgb(POSITIVE_POINT)  # positive: white
