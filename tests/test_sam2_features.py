"""SAM2-family frames' image features kept between propagations (models/sam2_features.py).

MedSAM2's 512 config with seeded random weights on the CPU, on 3 real DeepLesion slices: a second
propagation over the same frames encodes none of them and gives the same masks as a model that
encodes every frame; other frames, another thread count or other weights encode again.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sam2")

from napari_medsam_eval.models import sam2_backend as sb  # noqa: E402
from napari_medsam_eval.models.checkpoint_files import ModelOptionError  # noqa: E402
from napari_medsam_eval.models.sam2_features import SHARED, FrameFeatures, parse_limit  # noqa: E402
from napari_medsam_eval.core.prompt import Prompt  # noqa: E402

CASE = "deeplesion_ct_npz/CT_Lesion_000002_03_01_035-047.npz"


@pytest.fixture(scope="module")
def slices(shared_data):
    """Three slices around the lesion's middle and the lesion's box on the middle one."""
    with np.load(shared_data / CASE) as data:
        imgs, gts = data["imgs"], data["gts"]
    z = np.flatnonzero(gts.any(axis=(1, 2)))
    key = int((z.min() + z.max()) // 2)
    ys, xs = np.nonzero(gts[key])
    return imgs[key - 1:key + 2], Prompt(1, slice_index=1, boxes=[(xs.min(), ys.min(), xs.max(), ys.max())])


class EncoderCalls:
    """Counts passes of the model's image encoder (a forward hook)."""

    def __init__(self, backend) -> None:
        self.count = 0
        self._handle = backend.model.image_encoder.register_forward_hook(self._seen)

    def _seen(self, *_) -> None:
        self.count += 1

    def close(self) -> None:
        self._handle.remove()


def _propagate(backend, frames, prompt) -> tuple[np.ndarray, int]:
    calls = EncoderCalls(backend)
    try:
        return backend.propagate(frames, prompt), calls.count
    finally:
        calls.close()


@pytest.fixture(scope="module")
def medsam2():
    SHARED.clear()
    yield sb.build_medsam2(random_init=True, device="cpu")
    SHARED.clear()


@pytest.mark.slow
def test_a_second_propagation_encodes_no_frame_and_equals_an_uncached_model(medsam2, slices):
    frames, prompt = slices
    first, first_calls = _propagate(medsam2, frames, prompt)
    again, again_calls = _propagate(medsam2, frames, prompt)
    assert first_calls == len(frames) and again_calls == 0
    assert np.array_equal(first, again)
    uncached = sb.build_medsam2(random_init=True, device="cpu", feature_cache="off")
    plain, plain_calls = _propagate(uncached, frames, prompt)
    assert plain_calls == len(frames) and np.array_equal(plain, first)  # the same seeded weights, encoded anew
    assert first.any() and SHARED.hits >= len(frames)


@pytest.mark.slow
def test_other_frames_threads_or_weights_encode_again(medsam2, slices):
    frames, prompt = slices
    _propagate(medsam2, frames, prompt)
    _, shifted_calls = _propagate(medsam2, frames[::-1].copy(), prompt)
    assert shifted_calls == 0  # the same frames in another order: every one found by its content
    changed = frames.copy()
    changed[0, 0, 0] ^= 1  # one pixel of one frame
    _, changed_calls = _propagate(medsam2, changed, prompt)
    assert changed_calls == 1
    threads = torch.get_num_threads()
    torch.set_num_threads(1 if threads > 1 else 2)
    try:
        _, thread_calls = _propagate(medsam2, frames, prompt)
    finally:
        torch.set_num_threads(threads)
    assert thread_calls == len(frames)  # float sums split otherwise: not the same features bit for bit
    same = sb.build_medsam2(random_init=True, device="cpu", seed=0)  # the fixture's seed: the same weights
    _, same_calls = _propagate(same, frames, prompt)
    other = sb.build_medsam2(random_init=True, device="cpu", seed=1)
    _, other_calls = _propagate(other, frames, prompt)
    assert same_calls == 0 and other_calls == len(frames)  # random weights are found by their bytes


@pytest.mark.slow
def test_segment_without_a_cache_key_finds_the_features_of_its_image(medsam2, slices):
    frames, prompt = slices
    calls = EncoderCalls(medsam2)
    try:
        masks = [medsam2.segment(frames[1], Prompt(1, boxes=prompt.boxes)).mask for _ in range(2)]
    finally:
        calls.close()
    assert calls.count == 1 and np.array_equal(*masks)


def _features(megabytes: float) -> dict:
    fpn = [torch.zeros(int(megabytes * 2**20) // 4)]
    return {"vision_features": fpn[-1], "vision_pos_enc": [torch.ones(4)], "backbone_fpn": fpn}


def test_the_cache_keeps_the_most_recently_used_within_its_limit():
    cache = FrameFeatures(limit=3 * 2**20)
    cpu = torch.device("cpu")
    for name in "abc":
        cache.put(("model", name), _features(1))
    assert cache.get(("model", "a"), cpu) is not None  # a is now the most recent
    cache.put(("model", "d"), _features(1))
    assert cache.get(("model", "b"), cpu) is None and len(cache) == 3 and cache.size <= cache.limit
    cache.put(("model", "huge"), _features(4))  # over the whole limit: not kept, nothing evicted for it
    assert cache.get(("model", "huge"), cpu) is None and len(cache) == 3
    found = cache.get(("model", "a"), cpu)
    found["backbone_fpn"][0] = None  # a caller replacing list items leaves the cache whole
    assert cache.get(("model", "a"), cpu)["backbone_fpn"][0] is not None


def test_the_option_reads_sizes_and_off():
    assert parse_limit("512MB") == 512 * 10**6 and parse_limit("1GiB") == 2**30 and parse_limit(0) == 0
    assert parse_limit("off") == 0 and parse_limit(False) == 0
    with pytest.raises(ModelOptionError, match="feature_cache must be a size"):
        parse_limit("lots")
