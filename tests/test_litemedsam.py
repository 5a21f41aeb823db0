"""LiteMedSAM backend: official preprocessing, checkpoint checks, embedding cache, prompts, devices."""
from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from napari_medsam_eval.models import build_backend
from napari_medsam_eval.models.device import DeviceUnavailableError, autocast_context, resolve_device
from napari_medsam_eval.models.litemedsam import (
    SHIPPED_CHECKPOINT_SHA256,
    CheckpointError,
    LiteMedSAMBackend,
    SliceEmbedding,
    build,
    file_sha256,
    get_bbox256,
    preprocess_slice,
    resize_box_to_256,
    resize_longest_side,
    shipped_checkpoint_path,
)
from napari_medsam_eval.core.prompt import Prompt

pytestmark = pytest.mark.usefixtures("no_shared_store")  # they count encoder passes

LESION = "CT_Lesion_000009_03_01_036-048.npz"


def dice(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a) > 0, np.asarray(b) > 0
    return float(2.0 * (a & b).sum() / (a.sum() + b.sum()))


@pytest.fixture(scope="module")
def backend() -> LiteMedSAMBackend:
    return build(device="cpu", cache_size=8)


@pytest.fixture(scope="module")
def lesion_slice(shared_data: Path) -> tuple[np.ndarray, np.ndarray]:
    """A non-square crop (400 x 512) of a DeepLesion slice and its ground truth."""
    with np.load(shared_data / "deeplesion_ct_npz" / LESION) as npz:
        imgs, gts = npz["imgs"], npz["gts"]
    z = int(np.argmax((gts > 0).sum(axis=(1, 2))))
    ys = np.nonzero(gts[z].any(axis=1))[0]
    top = int(max(0, min(ys.min() - 150, 512 - 400)))
    return imgs[z, top : top + 400], gts[z, top : top + 400] > 0


def gt_box(mask: np.ndarray) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())


# --- preprocessing and box scaling (no model) --------------------------------

def test_box_scaling_truncates_like_the_official_script():
    # non-square (H=300, W=500): ratio 256/500 = 0.512
    box = resize_box_to_256(np.array([10, 20, 499, 299]), (300, 500))
    assert box.tolist() == [5, 10, 255, 153]  # int(5.12), int(10.24), int(255.488), int(153.088)
    assert box.dtype == np.array([10]).dtype
    # float boxes keep their dtype but are truncated too; tall image uses H
    assert resize_box_to_256(np.array([1.9, 2.9, 3.9, 99.9]), (512, 100)).tolist() == [0.0, 1.0, 1.0, 49.0]


def test_resize_and_pad_non_square():
    image = (np.arange(300 * 500) % 251).astype(np.uint8).reshape(300, 500)
    assert resize_longest_side(image).shape == (154, 256)  # int(153.6 + 0.5)
    padded, new_size, original = preprocess_slice(image)
    assert padded.shape == (256, 256, 3) and new_size == (154, 256) and original == (300, 500)
    assert np.array_equal(padded[..., 0], padded[..., 2])
    valid = padded[:154, :256]
    assert valid.min() == 0.0 and valid.max() == 1.0
    assert not padded[154:].any()
    expected = cv2.resize(image, (256, 154), interpolation=cv2.INTER_AREA).astype(np.float64)
    expected = (expected - expected.min()) / (expected.max() - expected.min())
    assert np.allclose(padded[:154, :, 1], expected)


def test_bbox256_widens_by_3_and_clips_to_256():
    mask = np.zeros((256, 256), np.uint8)
    mask[100:110, 250:256] = 1
    assert get_bbox256(mask).tolist() == [247, 97, 256, 112]
    mask[:] = 0
    mask[0:2, 0:2] = 1
    assert get_bbox256(mask).tolist() == [0, 0, 4, 4]


# --- checkpoint --------------------------------------------------------------

def test_shipped_checkpoint_is_verified_and_described(backend):
    assert file_sha256(shipped_checkpoint_path()) == SHIPPED_CHECKPOINT_SHA256
    facts = backend.describe()
    assert facts["name"] == "litemedsam"
    assert facts["checkpoint_sha256"] == SHIPPED_CHECKPOINT_SHA256
    assert facts["shipped_checkpoint"] is True
    assert facts["device"] == "cpu"


def test_damaged_shipped_checkpoint_is_refused(monkeypatch):
    import napari_medsam_eval.models.litemedsam_checkpoint as weights

    monkeypatch.setattr(weights, "SHIPPED_CHECKPOINT_SHA256", "0" * 64)
    with pytest.raises(CheckpointError, match="damaged") as info:
        build(device="cpu")
    assert "lite_medsam.pth" in str(info.value)


def test_bad_checkpoint_files_name_the_file(tmp_path):
    missing = tmp_path / "nope.pth"
    with pytest.raises(CheckpointError, match="not found") as info:
        build(checkpoint=missing, device="cpu")
    assert str(missing) in str(info.value)
    text = tmp_path / "notes.pth"
    text.write_text("this is not a checkpoint\n")
    with pytest.raises(CheckpointError, match="not a readable PyTorch checkpoint") as info:
        build(checkpoint=text, device="cpu")
    assert "notes.pth" in str(info.value)
    truncated = tmp_path / "truncated.pth"
    truncated.write_bytes(shipped_checkpoint_path().read_bytes()[: 1 << 20])
    with pytest.raises(CheckpointError, match="truncated.pth"):
        build(checkpoint=truncated, device="cpu")
    wrong = tmp_path / "wrong.pth"
    torch.save({"linear.weight": torch.zeros(2, 2)}, wrong)
    with pytest.raises(CheckpointError, match="architecture"):
        build(checkpoint=wrong, device="cpu")


@pytest.mark.slow
def test_user_checkpoint_hash_is_recorded(tmp_path):
    state = torch.load(shipped_checkpoint_path(), map_location="cpu", weights_only=True)
    path = tmp_path / "finetuned.pth"
    torch.save({"model": state, "epoch": 3}, path)  # a training checkpoint layout
    # the torch engine: the default (OpenVINO) would export this checkpoint's encoder first (10-15 s), and
    # the hash is recorded the same way for every engine; an export's key holds it (checked below)
    user = build_backend("litemedsam", checkpoint=str(path), device="cpu", cache_size=0, engine="torch")
    facts = user.describe()
    assert facts["checkpoint"] == str(path.resolve())
    assert facts["checkpoint_sha256"] == file_sha256(path) != SHIPPED_CHECKPOINT_SHA256
    assert facts["shipped_checkpoint"] is False
    from napari_medsam_eval.models.litemedsam_engines import export_key

    assert export_key("openvino", facts["checkpoint_sha256"]) != export_key("openvino", SHIPPED_CHECKPOINT_SHA256)


# --- segmentation --------------------------------------------------------------

def test_segment_matches_the_official_pipeline_on_a_non_square_slice(backend, lesion_slice):
    image, gt = lesion_slice
    box = gt_box(gt)
    result = backend.segment(image, Prompt(1, boxes=[box]), cache_key=("lesion", "crop"))
    assert result.mask.shape == image.shape and result.mask.dtype == bool
    assert result.logits.shape == image.shape and result.logits.dtype == np.float32
    assert set(result.timings) == {"encoder", "decoder"} and result.timings["encoder"] > 0
    assert dice(result.mask, gt) > 0.8

    # the official CVPR24_LiteMedSAM_infer.py steps, written out independently
    H, W = image.shape
    img_3c = np.repeat(image[:, :, None], 3, axis=-1)
    scale = 256 / max(H, W)
    new_w, new_h = int(W * scale + 0.5), int(H * scale + 0.5)
    img_256 = cv2.resize(img_3c, (new_w, new_h), interpolation=cv2.INTER_AREA)
    img_256 = (img_256 - img_256.min()) / np.clip(img_256.max() - img_256.min(), a_min=1e-8, a_max=None)
    img_256 = np.pad(img_256, ((0, 256 - new_h), (0, 256 - new_w), (0, 0)))
    box_256 = np.array([int(v * scale) for v in box])
    model = backend.model
    with torch.no_grad():
        embedding = model.image_encoder(torch.tensor(img_256).float().permute(2, 0, 1).unsqueeze(0))
        sparse, dense = model.prompt_encoder(points=None, boxes=torch.as_tensor(box_256[None, None], dtype=torch.float),
                                             masks=None)
        low_res, _ = model.mask_decoder(image_embeddings=embedding, image_pe=model.prompt_encoder.get_dense_pe(),
                                        sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense,
                                        multimask_output=False)
        up = F.interpolate(low_res[..., :new_h, :new_w], size=(H, W), mode="bilinear", align_corners=False)
    official = (torch.sigmoid(up).squeeze().numpy() > 0.5)
    assert np.array_equal(result.mask, official)


def test_reprompting_an_encoded_slice_does_not_run_the_encoder(backend, lesion_slice, monkeypatch):
    image, gt = lesion_slice
    calls = []
    engine = backend.encoder_engine  # whichever engine runs the image encoder
    monkeypatch.setattr(backend, "encoder_engine", lambda padded: calls.append(1) or engine(padded))
    key = ("reprompt", 0)
    box = gt_box(gt)
    first = backend.segment(image, Prompt(1, boxes=[box]), cache_key=key)
    assert len(calls) == 1
    second = backend.segment(image, Prompt(1, boxes=[(box[0] - 5, box[1] - 5, box[2] + 5, box[3] + 5)]), cache_key=key)
    points = backend.segment(image, Prompt(1, points=[((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)],
                                           point_labels=[1]), cache_key=key)
    assert len(calls) == 1, "a cached slice must not be encoded again"
    assert second.timings["encoder"] == 0.0 and points.timings["encoder"] == 0.0
    assert first.mask.any() and second.mask.any()
    # same key, different pixels: the fingerprint catches it and re-encodes
    backend.segment(np.ascontiguousarray(image[::-1]), Prompt(1, boxes=[box]), cache_key=key)
    assert len(calls) == 2


def test_points_and_several_boxes(backend, lesion_slice):
    image, gt = lesion_slice
    key = ("lesion", "crop")  # encoded by the pipeline test when it ran first
    x0, y0, x1, y1 = gt_box(gt)
    centre = ((x0 + x1) / 2, (y0 + y1) / 2)
    pos = backend.segment(image, Prompt(1, points=[centre], point_labels=[1]), cache_key=key)
    assert pos.mask.shape == image.shape and pos.logits.shape == image.shape and pos.logits.dtype == np.float32
    # LiteMedSAM was trained with boxes only: a lone point does not reach sigmoid > 0.5,
    # but the logits do single out the clicked object
    assert pos.logits[gt].mean() > pos.logits[~gt].mean() + 5
    both = backend.segment(image, Prompt(1, boxes=[(x0, y0, x1, y1)], points=[centre, (5, 5)], point_labels=[1, 0]),
                           cache_key=key)
    assert dice(both.mask, gt) > 0.7
    other = (10, 10, 60, 60)
    one = backend.segment(image, Prompt(1, boxes=[(x0, y0, x1, y1)]), cache_key=key)
    two = backend.segment(image, Prompt(1, boxes=[other]), cache_key=key)
    union = backend.segment(image, Prompt(1, boxes=[(x0, y0, x1, y1), other]), cache_key=key)
    assert np.array_equal(union.mask, one.mask | two.mask)
    assert np.array_equal(union.logits, np.maximum(one.logits, two.logits))


def test_prompt_kinds_checked(backend):
    with pytest.raises(ValueError, match="mask"):
        backend.segment(np.zeros((8, 8), np.uint8), Prompt(1, mask=np.zeros((8, 8), bool)))
    with pytest.raises(ValueError, match="empty"):
        backend.segment(np.zeros((8, 8), np.uint8), Prompt(1))


def test_embedding_cache_is_a_bounded_lru(backend, monkeypatch):
    small = LiteMedSAMBackend(backend.model, device=backend.device, checkpoint_path=backend.checkpoint_path,
                              checkpoint_sha256=backend.checkpoint_sha256, shipped=True, cache_size=2)
    encoded = []

    def fake_encode(image, fingerprint):
        encoded.append(fingerprint)
        return SliceEmbedding(torch.zeros(1), (1, 1), (1, 1), fingerprint)

    monkeypatch.setattr(small, "_encode", fake_encode)
    images = [np.full((4, 4), v, np.uint8) for v in range(3)]
    for key in (0, 1, 0, 2):  # 1 is the least recently used when 2 arrives
        small.embed(images[key], cache_key=key)
    assert len(encoded) == 3 and small.is_cached(0) and small.is_cached(2) and not small.is_cached(1)
    small.embed(images[0], cache_key=None)  # no key: never cached
    assert len(encoded) == 4
    small.clear_cache()
    assert not small.is_cached(0)


# --- devices -------------------------------------------------------------------

def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device(None).type == expected and resolve_device("auto").type == expected
    with pytest.raises(DeviceUnavailableError, match="'tpu9'"):
        resolve_device("tpu9")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceUnavailableError, match="'cuda'.*no CUDA"):
            resolve_device("cuda")
        with pytest.raises(DeviceUnavailableError):
            build(device="cuda")
    assert isinstance(autocast_context(torch.device("cpu"), True), nullcontext)
