"""The Segment widget in a real viewer (Xvfb) with the real LiteMedSAM on real data.

Encoder passes are the cost (about a second each on two CPU cores), so the
volumes are small: hippocampus_015 (28 slices, float32 MR: intensity
preparation included) for prompts, one slice and cancelling; the 13-slice
DeepLesion npz (ground truth inside, anisotropic spacing) for the full
propagation, compared exactly with the core run on the same inputs.
"""
from __future__ import annotations

import numpy as np
import pytest

from gui_probe import LoopTurns, ThreadLog
from plugin_dock import dock
from napari_medsam_eval._widgets.common import _worker as worker_module
from napari_medsam_eval._widgets.common._prompt_layers import prompt_from_layers
from napari_medsam_eval.core.intensity import prepare_intensity
from napari_medsam_eval.core.palette import POSITIVE_POINT, hex_to_rgb
from napari_medsam_eval.io import read_label
from napari_medsam_eval.evaluation.metrics import compute_dice
from napari_medsam_eval.protocols import build_protocol
from napari_medsam_eval.propagation import propagate_volume

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("no_shared_store")]  # they count encoder passes

HIPPO = "hippocampus_015"
LESION = "CT_Lesion_000002_03_01_035-047.npz"
#: generous: a loaded 2-core CI machine encodes a slice in several seconds
TIMEOUT_MS = 600_000


@pytest.fixture(scope="module")
def backend():
    from napari_medsam_eval.session.session import Session

    # through the session: triton is loaded apart from the LLVM of Xvfb's OpenGL (else a segfault)
    return Session.build_backend("litemedsam", device="cpu")


@pytest.fixture
def errors(monkeypatch):
    """Notifications the widget raises (napari's show_error, captured)."""
    seen: list[str] = []
    monkeypatch.setattr(worker_module, "show_error", seen.append)
    return seen


def _open_hippocampus(viewer, shared_data):
    root = shared_data / "hippocampus_mri"
    image, *rest = viewer.open(str(root / "imagesTr" / f"{HIPPO}.nii.gz"), plugin="napari-medsam-eval")
    label = read_label(root / "labelsTr" / f"{HIPPO}.nii.gz").array
    if rest:  # the reader brings the MSD image's label
        (gt,) = rest
        np.testing.assert_array_equal(gt.data, label)
        return image, gt
    gt = viewer.add_labels(label, name=f"{HIPPO} ground truth", scale=image.scale, metadata={"role": "ground_truth"})
    return image, gt


def _widget(viewer, backend=None):
    widget = dock(viewer, "segment")
    if backend is not None:
        widget.set_backend(backend)
    return widget


def _wait(qtbot, worker):
    """Wait until ``worker`` has finished and its finished handlers have run.

    ``qtbot.waitSignal(worker.finished)`` races: a fast worker (an error) can
    emit ``finished`` before the test connects. superqt keeps a started worker
    in ``WorkerBase._worker_set`` until its ``_finished`` signal, queued after
    ``finished``, reaches the main thread, so leaving the set means every
    finished handler (the widget's included) has run.
    """
    from superqt.utils._qthreading import WorkerBase

    qtbot.waitUntil(lambda: worker not in WorkerBase._worker_set, timeout=TIMEOUT_MS)


def test_load_model_off_thread_and_errors(make_napari_viewer, shared_data, qtbot, errors, tmp_path):
    viewer = make_napari_viewer()
    _open_hippocampus(viewer, shared_data)
    widget = _widget(viewer)
    # a missing checkpoint: an error notification, the UI usable again
    widget.model.value = "medsam2"
    widget.checkpoint.value = tmp_path / "missing.pt"
    worker = widget.load_model()
    _wait(qtbot, worker)
    assert len(errors) == 1 and "missing.pt" in errors[0] and "CheckpointError" in errors[0]
    assert "missing.pt" in widget.status.value and widget.session.backend is None
    assert widget.load_button.enabled and not widget.busy
    # LiteMedSAM with its shipped weights, built in a worker while the UI runs
    widget.model.value = "litemedsam"
    widget.checkpoint.value = None
    widget.device.value = "cpu"
    worker = widget.load_model()
    assert widget.busy
    _wait(qtbot, worker)
    assert widget.session.backend is not None and widget.session.backend.name == "litemedsam"
    assert widget.status.value.startswith("model litemedsam loaded") and "fp32" in widget.status.value


def test_prompt_from_ground_truth_and_segment_slice(make_napari_viewer, shared_data, backend, qtbot, errors):
    viewer = make_napari_viewer()
    image, gt = _open_hippocampus(viewer, shared_data)
    widget = _widget(viewer, backend)
    assert widget.image_layer.value is image and widget.gt_layer.value is gt  # picked by role

    # nothing drawn yet: a notification, not an exception
    assert widget.segment_slice() is None and "prompt layers" in errors[-1]

    widget.target_label.value = 2
    prompt = widget.prompt_from_ground_truth()
    expected = build_protocol("medsam2").prompts(gt.data, kind="volume", target_labels=[2])[0]
    assert prompt.to_dict() == expected.to_dict()
    assert viewer.dims.current_step[0] == prompt.slice_index  # moved to the prompt's slice
    boxes, points = widget.box_layer.value, widget.point_layer.value
    assert len(boxes.data) == 1 and len(points.data) == 0
    assert prompt_from_layers(image, prompt.slice_index, 2, boxes, points).boxes == prompt.boxes
    assert widget.current_prompt() is prompt  # the layers still show it: the protocol's prompt itself

    worker = widget.segment_slice()
    assert widget.busy and not widget.segment_button.enabled
    _wait(qtbot, worker)
    assert not widget.busy and widget.segment_button.enabled
    layer = viewer.layers[f"{image.name} prediction"]
    # the precision that made the mask on display is said on screen and kept with the layer
    assert widget.status.value.endswith("(by litemedsam fp32)") and layer.metadata["made_by"] == "by litemedsam fp32"
    widget.precision.value = "int8"  # another precision is another model: it would be built anew
    assert not widget.session.has_backend(widget._model_spec())
    widget.precision.value = "fp32"
    assert widget.session.has_backend(widget._model_spec())
    z = prompt.slice_index
    # the same slice through the core (the session's cache answers it: no second encode)
    calls = backend.encoder_calls
    core = backend.segment(prepare_intensity(image.data, "MR")[z], prompt, cache_key=widget.session.cache_key(z)).mask
    assert backend.encoder_calls == calls
    np.testing.assert_array_equal(layer.data[z] == 2, core)
    assert core.any() and not np.delete(layer.data, z, axis=0).any()
    assert layer.metadata["role"] == "prediction" and tuple(layer.scale) == tuple(image.scale)

    # a box drawn by hand on the current slice (any float corners): the pixels whose centres it covers
    viewer.dims.set_current_step(0, z)
    boxes.data = []
    boxes.add_rectangles(np.array([[z, 7.6, 12.2], [z, 7.6, 30.7], [z, 25.4, 30.7], [z, 25.4, 12.2]]))
    drawn = widget.current_prompt()
    assert drawn.protocol == "manual" and drawn.boxes == [(13.0, 8.0, 30.0, 25.0)] and drawn.slice_index == z
    worker = widget.segment_slice()
    _wait(qtbot, worker)
    assert viewer.layers[f"{image.name} prediction"] is layer  # replaced, not added
    expected = backend.segment(prepare_intensity(image.data, "MR")[z], drawn, cache_key=widget.session.cache_key(z)).mask
    np.testing.assert_array_equal(layer.data[z] == 2, expected)
    assert backend.encoder_calls == calls  # still that slice's one encoding

    # Mazurowski points on the current slice: positive points, in the positive colour
    assert widget.mode.native.isHidden()
    widget.protocol.value = "mazurowski"
    assert not widget.mode.native.isHidden()  # shown for mazurowski only
    widget.mode.value = 2  # points of the largest parts
    widget.prompt_slice.value = "current slice"
    viewer.dims.set_current_step(0, z + 1)
    points_prompt = widget.prompt_from_ground_truth()
    assert points_prompt.slice_index == z + 1 and points_prompt.points and not points_prompt.boxes
    assert len(boxes.data) == 0 and len(points.data) == len(points_prompt.points)
    assert np.allclose(points.face_color[:, :3], hex_to_rgb(POSITIVE_POINT))
    assert points.features["label"].tolist() == [1] * len(points_prompt.points)
    assert errors == [errors[0]]  # nothing else went wrong


@pytest.mark.slow
def test_propagate_matches_core_and_ui_stays_responsive(make_napari_viewer, shared_data, backend, qtbot, errors,
                                                       monkeypatch):
    viewer = make_napari_viewer()
    image, gt = viewer.open(str(shared_data / "deeplesion_ct_npz" / LESION), plugin="napari-medsam-eval")
    assert image.scale[0] == pytest.approx(5.0)
    widget = _widget(viewer, backend)
    assert widget.gt_layer.value is gt
    prompt = widget.prompt_from_ground_truth()
    assert viewer.dims.current_step[0] == prompt.slice_index  # world step of an anisotropic volume

    threads = ThreadLog(monkeypatch).watch(backend, "_run_encoder", "encoder pass")
    progress: list[tuple[int, int]] = []
    ticks: list[int] = []  # the loop's tick count at each step received
    with LoopTurns() as turns:
        worker = widget.propagate()
        # (connected after the start: the first steps may be missed)
        worker.yielded.connect(lambda step: (progress.append(step), ticks.append(turns.mark())))
        assert widget.cancel_button.enabled and not widget.propagate_button.enabled
        _wait(qtbot, worker)
    # every encoder pass ran on the worker while the event loop kept turning between the steps
    assert threads.count("encoder pass") > 0 and threads.on_gui == [], threads.calls
    assert sum(later > earlier for earlier, later in zip(ticks, ticks[1:])) >= len(ticks) // 2, ticks
    n = image.data.shape[0]
    assert progress[-1] == (n, n) and all(total == n for _, total in progress)
    assert [d for d, _ in progress] == sorted(d for d, _ in progress)
    assert not widget.cancel_button.enabled and widget.propagate_button.enabled

    result = widget.last_result
    assert not result.cancelled and result.prompt is prompt and result.done == n
    layer = viewer.layers[f"{image.name} prediction"]
    # the core on the same inputs: same backend, same prompt, same cache keys
    core = propagate_volume(backend, prepare_intensity(image.data, "CT"), prompt, case_id=widget.session.image_id)
    np.testing.assert_array_equal(layer.data == 1, core)
    assert compute_dice(layer.data == 1, gt.data == 1) == compute_dice(core, gt.data == 1) > 0.5

    # the compare widget on the model's prediction gives the same DSC
    compare = dock(viewer, "compare")
    assert compare.pred_layer.value is layer and compare.gt_layer.value is gt
    comparison = compare.update_comparison()
    assert comparison.dice == compute_dice(core, gt.data == 1)
    assert compare.volume_dice.value == f"{comparison.dice:.4f}"

    # re-running replaces the data of the same layer
    widget.margin.value = 6
    worker = widget.propagate()
    _wait(qtbot, worker)
    assert viewer.layers[f"{image.name} prediction"] is layer
    assert len([x for x in viewer.layers if x.name.endswith("prediction")]) == 1
    core6 = propagate_volume(backend, prepare_intensity(image.data, "CT"), prompt, margin=6,
                             case_id=widget.session.image_id)
    if prompt.info.get("largest_component"):  # the medsam2 protocol's step (segment_by_kind applies it)
        from napari_medsam_eval.core.postprocess import largest_component

        core6 = largest_component(core6)
    np.testing.assert_array_equal(layer.data == 1, core6)
    assert not errors


def test_cancel_stops_propagation(make_napari_viewer, shared_data, backend, qtbot, errors):
    viewer = make_napari_viewer()
    image, _gt = _open_hippocampus(viewer, shared_data)
    widget = _widget(viewer, backend)
    prompt = widget.prompt_from_ground_truth()

    def cancel_on_first_slice(value):
        if value[0] >= 1 and widget.cancel_button.enabled:
            widget.cancel_button.native.click()  # the user's click

    worker = widget.propagate()
    worker.yielded.connect(cancel_on_first_slice)
    _wait(qtbot, worker)
    result = widget.last_result
    assert result.cancelled and 1 <= result.done < result.total == image.data.shape[0]
    assert result.mask[prompt.slice_index].any() and result.mask.sum() > 0  # partial, kept off the layers
    assert f"{image.name} prediction" not in viewer.layers
    assert widget.status.value.startswith("cancelled after")
    assert not widget.busy and widget.propagate_button.enabled
    assert not errors


@pytest.mark.slow
def test_video_propagates_forward_from_the_current_frame(make_napari_viewer, shared_data, backend, qtbot, errors):
    """An RGB colonoscopy clip (frame folder through the reader): prompt on frame 21, forward to the end."""
    from napari_medsam_eval.io import read_case
    from napari_medsam_eval.propagation import propagate_video

    root = shared_data / "cvc_clinicdb_video"
    viewer = make_napari_viewer()
    image, gt = viewer.open(str(root / "Frame" / "seq01"), plugin="napari-medsam-eval")  # the clip brings its GT/
    assert image.rgb and image.metadata["kind"] == "video"
    case = read_case(root / "Frame" / "seq01", root / "GT" / "seq01")
    np.testing.assert_array_equal(gt.data, case.label)
    widget = _widget(viewer, backend)
    assert widget.gt_layer.value is gt
    widget.prompt_slice.value = "current slice"
    t0 = image.data.shape[0] - 4
    viewer.dims.set_current_step(0, t0)
    prompt = widget.prompt_from_ground_truth()
    assert prompt.slice_index == t0 and prompt.boxes
    worker = widget.propagate()
    _wait(qtbot, worker)
    result = widget.last_result
    assert not result.cancelled and result.done == result.total == 4
    layer = viewer.layers[f"{image.name} prediction"]
    assert layer.data.shape == case.label.shape and not layer.data[:t0].any()
    core = propagate_video(backend, image.data, prompt, case_id=widget.session.image_id)
    np.testing.assert_array_equal(layer.data == 1, core)
    assert compute_dice(core[t0:], case.label[t0:] == 1) > 0.5
    assert not errors


def test_2d_image_segment_and_propagate(make_napari_viewer, shared_data, backend, qtbot, errors):
    """A 2D RGB endoscopy image: prompts without a slice, one segmentation either way."""
    root = shared_data / "kvasir_seg_2d"
    name = "cju0qoxqj9q6s0835b43399p4"
    viewer = make_napari_viewer()
    from napari_medsam_eval._reader import read_layers

    # the reader's layer data, added directly (napari would ask which reader opens a .jpg)
    (data, kwargs, _kind), *_ = read_layers(str(root / "images" / f"{name}.jpg"))
    image = viewer.add_image(data, **kwargs)
    assert image.rgb and image.ndim == 2
    label = read_label(root / "masks" / f"{name}.png").array
    gt = viewer.add_labels(label, name="polyp", metadata={"role": "ground_truth"})
    widget = _widget(viewer, backend)
    assert widget.gt_layer.value is gt
    prompt = widget.prompt_from_ground_truth()
    assert prompt.slice_index is None and prompt.boxes
    assert widget.box_layer.value.ndim == 2
    _wait(qtbot, widget.segment_slice())
    layer = viewer.layers[f"{image.name} prediction"]
    core = backend.segment(image.data, prompt, cache_key=widget.session.cache_key(None)).mask
    np.testing.assert_array_equal(layer.data == 1, core)
    assert compute_dice(core, label == 1) > 0.5
    _wait(qtbot, widget.propagate())
    assert widget.last_result.done == widget.last_result.total == 1
    np.testing.assert_array_equal(viewer.layers[f"{image.name} prediction"].data == 1, core)
    assert not errors


def test_session_generator_cancels_when_closed(shared_data, backend):
    """The core's generator: closing it early stops the run; a preset cancel event stops it at once."""
    import threading

    from napari_medsam_eval.session.session import Session
    from napari_medsam_eval.io import read_case

    root = shared_data / "hippocampus_mri"
    case = read_case(root / "imagesTr" / f"{HIPPO}.nii.gz", root / "labelsTr" / f"{HIPPO}.nii.gz")
    raw, label = case.image, case.label
    session = Session(backend)
    session.set_image(raw, modality="MR", image_id="generator-test")
    prompt = session.prompt_from_ground_truth(label, 1)
    calls = backend.encoder_calls
    token = threading.Event()
    token.set()
    preset = session.propagate(prompt, cancel=token)
    assert preset.cancelled and preset.done == 0 and not preset.mask.any() and backend.encoder_calls == calls

    generator = session.iter_propagate(prompt)
    assert next(generator) == (1, raw.shape[0])
    generator.close()
    assert session.cancel_requested
    # the next run waits for the stopped one's slice (the session's lock), then runs in full
    full = session.propagate(prompt, z_limits=(prompt.slice_index - 1, prompt.slice_index + 1))
    assert not full.cancelled and full.total == 3 and full.mask[prompt.slice_index].any()
    for thread in [t for t in threading.enumerate() if t.name == "medsam-eval-propagation"]:
        thread.join(timeout=60)
        assert not thread.is_alive()
