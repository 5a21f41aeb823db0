"""Encode ahead in the Segment widget: real viewer (Xvfb), real LiteMedSAM, real CT.

The 13-slice DeepLesion npz: ticking *encode ahead* embeds every slice in a worker, nearest
to the slice on screen first, while the GUI event loop keeps turning; a propagation afterwards makes no
encoder call and gives the mask of a propagation without it; unticking stops it within a slice. With
*at* a cheaper precision (bf16 where this CPU computes it, else int8: :mod:`cheaper_precision`), a first
look at it comes first and the status line says which precision made the mask.
"""
from __future__ import annotations

import numpy as np
import pytest

from napari_medsam_eval.session.encode_ahead import nearest_first
from napari_medsam_eval.core.intensity import prepare_intensity
from napari_medsam_eval.propagation import propagate_volume
from napari_medsam_eval.session.session import Session
from cheaper_precision import use_cheaper_precision
from gui_probe import LoopTurns, ThreadLog
from test_widgets_segment import _wait, _widget, backend, errors  # noqa: F401 - the same fixtures and wait

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("no_shared_store")]  # they count encoder passes

LESION = "CT_Lesion_000002_03_01_035-047.npz"


def test_encode_ahead_then_propagate_at_decoder_speed(make_napari_viewer, shared_data, backend, qtbot, errors,
                                                      monkeypatch, shared_embeddings):
    viewer = make_napari_viewer()
    image, _gt = viewer.open(str(shared_data / "deeplesion_ct_npz" / LESION), plugin="napari-medsam-eval")
    widget = _widget(viewer, backend)
    backend.clear_cache()
    n = image.data.shape[0]
    threads = ThreadLog(monkeypatch).watch(backend, "_run_encoder", "encoder pass")
    with LoopTurns() as turns:
        widget.encode_box.tick.value = True  # the tick starts the worker
        worker = widget.encoder.runner.worker
        assert worker is not None and widget.encoder.busy
        _wait(qtbot, worker)
    # every slice was encoded on the worker, and the event loop turned all along (about a second a slice)
    assert threads.count("encoder pass") == n and threads.on_gui == [], threads.calls
    assert turns.ticks >= n, turns.ticks
    assert widget.encode_box.bar.value == widget.encode_box.bar.max == n
    assert widget.encode_box.done.value == f"{n}/{n}"
    session = widget.session
    assert all(backend.is_cached(session.cache_key(z)) for z in range(n))

    prompt = widget.prompt_from_ground_truth()
    calls = backend.encoder_calls
    _wait(qtbot, widget.propagate())
    assert backend.encoder_calls == calls  # every slice came from what was encoded ahead
    mask = viewer.layers[f"{image.name} prediction"].data == 1
    # a propagation without encode ahead: another backend, the slices from the encoder or the run's store
    fresh = Session.build_backend("litemedsam", device="cpu", embeddings=shared_embeddings)
    assert fresh.describe()["engine"] == backend.describe()["engine"]
    core = propagate_volume(fresh, prepare_intensity(image.data, "CT"), prompt, case_id="fresh")
    if prompt.info.get("largest_component"):
        from napari_medsam_eval.core.postprocess import largest_component

        core = largest_component(core)
    np.testing.assert_array_equal(mask, core)
    assert not errors


def test_unticking_stops_encoding_within_a_slice(make_napari_viewer, shared_data, backend, qtbot, errors):
    viewer = make_napari_viewer()
    image, _gt = viewer.open(str(shared_data / "deeplesion_ct_npz" / LESION), plugin="napari-medsam-eval")
    widget = _widget(viewer, backend)
    backend.clear_cache()
    viewer.dims.set_current_step(0, 0)
    steps: list[tuple[int, int]] = []

    def untick_after_two(step):
        steps.append(step)
        if step[0] == 2:
            widget.encode_box.tick.value = False

    widget.encode_box.tick.value = True
    worker = widget.encoder.runner.worker
    worker.yielded.connect(untick_after_two)
    _wait(qtbot, worker)
    n = image.data.shape[0]
    cached = [z for z in range(n) if backend.is_cached(widget.session.cache_key(z))]
    assert 2 <= len(cached) <= 4 < n  # stopped after the slice in progress
    current = int(round(image.world_to_data(viewer.dims.point)[0]))
    assert cached == sorted(nearest_first(n, current)[:len(cached)])  # nearest to the slice on screen first
    assert not widget.encoder.busy and not errors


def test_a_first_look_at_a_cheaper_precision_then_the_model_at_fp32(make_napari_viewer, shared_data, backend, qtbot,
                                                                     errors, monkeypatch):
    """*at* bf16 (or int8): the first look's pass, then fp32's; a propagation says (and keeps) which one made it."""
    from napari_medsam_eval.models import build_backend

    cheap = use_cheaper_precision(shared_data, monkeypatch)
    viewer = make_napari_viewer()
    image, _gt = viewer.open(str(shared_data / "deeplesion_ct_npz" / LESION), plugin="napari-medsam-eval")
    widget = _widget(viewer, build_backend("box"))
    at = widget.encode_box.at
    assert not at.enabled and "LiteMedSAM" in at.tooltip and at.value == "model's"  # another model: no first look
    widget.set_backend(backend)
    assert at.enabled and at.value == "model's"
    assert cheap in at.choices and ("bf16" in at.choices) == (cheap == "bf16")  # bf16 only where the CPU has it
    backend.clear_cache()
    n = image.data.shape[0]
    widget.prompt_from_ground_truth()
    at.value = cheap
    counts: list[str] = []

    def untick_in_fp32_pass(step):
        if not widget.encode_box.tick.value:  # unticked: the worker may yield once more, ending its slice
            return
        counts.append(widget.encode_box.done.value)
        if step[0] == n + 2:
            widget.encode_box.tick.value = False

    widget.encode_box.tick.value = True  # builds LiteMedSAM at that precision in the worker, then encodes twice
    worker = widget.encoder.runner.worker
    worker.yielded.connect(untick_in_fp32_pass)
    _wait(qtbot, worker)
    assert counts == [f"{cheap} {d}/{n}" for d in range(1, n + 1)] + [f"fp32 {d}/{n}" for d in (1, 2)], counts
    first_look = widget.session.first_look.backend
    assert first_look is not None and first_look.precision == cheap and first_look is not backend

    _wait(qtbot, widget.propagate())
    layer = viewer.layers[f"{image.name} prediction"]
    assert widget.status.value.endswith(f"(by litemedsam {cheap} (first look))"), widget.status.value
    assert layer.metadata["made_by"] == f"by litemedsam {cheap} (first look)"
    quick = layer.data == 1

    counts.clear()
    widget.encode_box.tick.value = True  # both passes to the end: the first look's are cache hits now
    _wait(qtbot, widget.encoder.runner.worker)
    assert widget.encode_box.done.value == f"fp32 {n}/{n}"
    assert widget.session.first_look.backend is first_look  # built once for this model
    _wait(qtbot, widget.propagate())
    assert widget.status.value.endswith("(by litemedsam fp32)"), widget.status.value
    assert layer.metadata["made_by"] == "by litemedsam fp32"
    assert ((layer.data == 1) != quick).any()  # fp32's mask is another than the first look's here
    assert not widget.encoder.busy and not errors
