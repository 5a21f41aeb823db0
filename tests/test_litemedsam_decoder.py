"""LiteMedSAM's mask decoder on OpenVINO (models/litemedsam_decoder.py), shipped weights, real slices.

The masks equal the torch decoder's pixel for pixel (the embedding shared, so only the decoders
differ); the export is cached, checked at every load, rebuilt when damaged, and the torch decoder
runs (saying why) when the cache cannot be written. Its speed: ``benchmarks/latency.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("openvino")

from napari_medsam_eval.core.prompt import Prompt  # noqa: E402
from napari_medsam_eval.models import build_backend  # noqa: E402
from napari_medsam_eval.models import litemedsam_decoder as dec  # noqa: E402

CASES = ("CT_Lesion_000001_02_01_008-023.npz", "CT_Lesion_000002_03_01_035-047.npz")


@pytest.fixture(scope="module")
def torch_backend():
    return build_backend("litemedsam", device="cpu", engine="torch")


@pytest.fixture(scope="module")
def lesion_slices(shared_data) -> list[tuple[np.ndarray, Prompt, Prompt]]:
    """Every lesion slice of two DeepLesion cases with a box prompt and a two-point prompt."""
    out = []
    for name in CASES:
        with np.load(shared_data / "deeplesion_ct_npz" / name) as data:
            imgs, gts = data["imgs"], data["gts"]
        for z in np.flatnonzero(gts.any(axis=(1, 2))):
            ys, xs = np.nonzero(gts[z])
            out.append((imgs[z], Prompt(1, boxes=[(xs.min(), ys.min(), xs.max(), ys.max())]),
                        Prompt(1, points=[(xs.mean(), ys.mean()), (xs.min() - 5, ys.min() - 5)], point_labels=[1, 0])))
    return out


def _masks(backend, decoder, slices) -> list[np.ndarray]:
    """Masks of every prompt with ``decoder`` in ``backend`` (the backend's own decoder put back after)."""
    own, backend.decoder_engine = backend.decoder_engine, decoder
    try:
        return [backend.segment(image, prompt, cache_key=(i, len(prompt.points))).mask
                for i, (image, *prompts) in enumerate(slices) for prompt in prompts]
    finally:
        backend.decoder_engine = own


def _load(backend, root):
    return dec.load_openvino_decoder(backend.model, backend._image_pe, backend.checkpoint_sha256, 2, root=root)


@pytest.mark.slow
def test_openvino_masks_equal_torch_masks_and_the_export_is_reused(torch_backend, lesion_slices, tmp_path):
    before = dec.export_count
    decoder = _load(torch_backend, tmp_path)
    assert isinstance(decoder, dec.OpenVINODecoder) and dec.export_count == before + 1
    ours = _masks(torch_backend, decoder, lesion_slices)
    theirs = _masks(torch_backend, torch_backend.decoder_engine, lesion_slices)
    assert len(ours) == 2 * len(lesion_slices) >= 20 and all(m.any() for m in theirs[::2])  # every box's mask
    assert [int((a != b).sum()) for a, b in zip(ours, theirs)] == [0] * len(ours)
    again = _load(torch_backend, tmp_path)
    assert isinstance(again, dec.OpenVINODecoder) and dec.export_count == before + 1  # loaded, not exported


@pytest.mark.slow
def test_a_damaged_export_is_rebuilt_with_a_warning(torch_backend, lesion_slices, tmp_path):
    _load(torch_backend, tmp_path)
    (folder,) = [p for p in tmp_path.iterdir() if p.name.startswith("litemedsam-decoder-")]
    weights = folder / "decoder.bin"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2: len(data) // 2 + 4096] = bytes(4096)  # zeroed weights: the hash check fails
    weights.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="incomplete or corrupt; rebuilding"):
        rebuilt = _load(torch_backend, tmp_path)
    assert isinstance(rebuilt, dec.OpenVINODecoder)
    ours = _masks(torch_backend, rebuilt, lesion_slices[:3])
    assert all(np.array_equal(a, b) for a, b in zip(ours, _masks(torch_backend, torch_backend.decoder_engine,
                                                                  lesion_slices[:3])))


def test_a_wrong_export_with_matching_hashes_falls_back_to_torch(torch_backend, tmp_path, monkeypatch):
    monkeypatch.setattr(dec, "check_difference", lambda decoder, graph: 0.5)  # as a graph computing something else
    with pytest.warns(RuntimeWarning, match="decoder runs in torch: the OpenVINO decoder made now gives logits 0.5"):
        decoder = _load(torch_backend, tmp_path)
    assert isinstance(decoder, dec.TorchDecoder)
    assert decoder.describe()["decoder_fallback"].startswith("the OpenVINO decoder made now")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("litemedsam-decoder-")]  # never left to load


def test_an_unwritable_cache_runs_the_torch_decoder_and_says_why(torch_backend, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    with pytest.warns(RuntimeWarning, match="decoder export cannot be written"):
        decoder = _load(torch_backend, blocker)
    assert decoder.describe() == {"decoder": "torch", "decoder_requested": "openvino",
                                  "decoder_fallback": decoder.fallback_reason}


@pytest.mark.slow
def test_the_openvino_engine_decodes_on_openvino_from_its_first_decode(cache_root, torch_backend, lesion_slices):
    backend = build_backend("litemedsam", device="cpu", engine="openvino")
    image, box, _ = lesion_slices[0]
    backend.embed(image, "slice")
    assert backend.describe()["decoder"] == "openvino" and backend.decoder_engine._decoder is None  # not loaded yet
    mask = backend.segment(image, box, cache_key="slice").mask
    assert isinstance(backend.decoder_engine.decoder(), dec.OpenVINODecoder)
    assert "decoder_export" in backend.describe()
    assert np.array_equal(mask, torch_backend.segment(image, box).mask)
    assert build_backend("litemedsam", device="cpu", engine="torch").describe()["decoder"] == "torch"
