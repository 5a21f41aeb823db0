"""SAM (ViT) backend: three candidates and scores, multi-box union, cache, errors.

The model has seeded random weights (no download; its masks mean nothing) in the small
``vit_tiny`` configuration (SAM's whole code path with a 2-block image encoder: a ViT-B pass
of random weights took 15-30 s here), run once on a real Kvasir-SEG image; every prompt
reuses the cached embedding.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("segment_anything")

from napari_medsam_eval.core.errors import MedsamEvalError  # noqa: E402
from napari_medsam_eval.models import build_backend  # noqa: E402
from napari_medsam_eval.models import sam_backend as sam  # noqa: E402
from napari_medsam_eval.models.sam2_backend import CheckpointError, MissingCheckpointError  # noqa: E402
from napari_medsam_eval.core.prompt import Prompt  # noqa: E402

KVASIR_CASE = "cju0tl3uz8blh0993wxvn7ly3"  # 529 x 622 RGB, one polyp


@pytest.fixture(scope="module")
def backend():
    return sam.build(random_init=True, model_type="vit_tiny", device="cpu")


@pytest.fixture(scope="module")
def polyp(shared_data):
    from PIL import Image

    image = np.asarray(Image.open(shared_data / "kvasir_seg_2d" / "images" / f"{KVASIR_CASE}.jpg").convert("RGB"))
    mask = np.asarray(Image.open(shared_data / "kvasir_seg_2d" / "masks" / f"{KVASIR_CASE}.png").convert("L")) > 127
    ys, xs = np.nonzero(mask)
    box = (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))
    return image, mask, box


@pytest.fixture(scope="module")
def single(backend, polyp):
    image, _, box = polyp
    return backend.segment(image, Prompt(255, boxes=[box]), cache_key=KVASIR_CASE)


@pytest.mark.slow
def test_three_candidates_and_scores(single, polyp, backend):
    image = polyp[0]
    shape = image.shape[:2]
    assert single.candidates is not None and single.candidate_scores is not None
    assert single.candidates.shape == (3, *shape) and single.candidates.dtype == bool
    assert single.candidate_scores.shape == (3,)
    assert single.mask.shape == shape and single.mask.dtype == bool
    np.testing.assert_array_equal(single.mask, single.candidates[0])
    assert single.logits is not None and single.logits.shape == shape
    np.testing.assert_array_equal(single.mask, single.logits > 0)
    assert single.score == pytest.approx(float(single.candidate_scores[0]))
    assert set(single.timings) == {"encoder", "decoder"}
    facts = backend.describe()
    assert facts["model_type"] == "vit_tiny" and facts["random_init"] is True and facts["checkpoint_sha256"] is None


@pytest.mark.slow
def test_several_boxes_are_ored_candidate_by_candidate(backend, polyp, single):
    image, _, box = polyp
    height, width = image.shape[:2]
    other = (0, 0, width // 4, height // 4)
    second = backend.segment(image, Prompt(255, boxes=[other]), cache_key=KVASIR_CASE)
    passes = backend.encoder_calls
    both = backend.segment(image, Prompt(255, boxes=[box, other]), cache_key=KVASIR_CASE)
    assert backend.encoder_calls == passes  # the embedding came from the cache: no encoder pass
    np.testing.assert_array_equal(both.candidates, single.candidates | second.candidates)
    np.testing.assert_array_equal(both.mask, single.mask | second.mask)
    np.testing.assert_allclose(both.candidate_scores, (single.candidate_scores + second.candidate_scores) / 2, rtol=1e-5)


@pytest.mark.slow
def test_points_and_point_with_box(backend, polyp, single):
    image, mask, box = polyp
    ys, xs = np.nonzero(mask)
    inside = (float(xs.mean()), float(ys.mean()))
    points = backend.segment(image, Prompt(255, points=[inside, (2, 2)], point_labels=[1, 0]), cache_key=KVASIR_CASE)
    assert points.candidates.shape == (3, *image.shape[:2])
    combined = backend.segment(image, Prompt(255, boxes=[box], points=[inside], point_labels=[1]), cache_key=KVASIR_CASE)
    assert combined.mask.shape == image.shape[:2]
    with pytest.raises(ValueError, match="one box"):
        backend.segment(image, Prompt(255, boxes=[box, box], points=[inside], point_labels=[1]), cache_key=KVASIR_CASE)
    with pytest.raises(ValueError, match="mask"):
        backend.segment(image, Prompt(255, mask=mask), cache_key=KVASIR_CASE)


def test_missing_checkpoint_names_the_option():
    with pytest.raises(MissingCheckpointError) as info:
        sam.build()
    message = str(info.value)
    assert "checkpoint" in message and "--checkpoint PATH" in message and "checkpoint=" in message
    assert isinstance(info.value, MedsamEvalError)
    with pytest.raises(MissingCheckpointError):
        build_backend("sam")


def test_checkpoint_not_found_and_corrupt(tmp_path):
    missing = tmp_path / "sam_vit_b_01ec64.pth"
    with pytest.raises(CheckpointError, match="not found") as info:
        sam.build(checkpoint=missing)
    assert str(missing) in str(info.value)
    corrupt = tmp_path / "sam_vit_b_corrupt.pth"
    corrupt.write_bytes(b"\x80\x02garbage" * 50)
    with pytest.raises(CheckpointError) as info:
        sam.build(checkpoint=corrupt, device="cpu")
    assert str(corrupt) in str(info.value)
    wrong = tmp_path / "sam_vit_b_wrong.pth"
    torch.save({"foo": torch.zeros(1)}, wrong)
    with pytest.raises(CheckpointError, match="not a SAM checkpoint"):
        sam.build(checkpoint=wrong, device="cpu")


def test_checkpoint_that_does_not_fit_names_the_file(tmp_path):
    path = tmp_path / "medsam_vit_b.pth"
    torch.save({"image_encoder.patch_embed.proj.weight": torch.zeros(768, 3, 16, 16)}, path)
    with pytest.raises(CheckpointError, match="do not fit") as info:
        sam.build(checkpoint=path, device="cpu")
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sam_vit_b_01ec64.pth", "vit_b"),
        ("sam_vit_l_0b3195.pth", "vit_l"),
        ("sam_vit_h_4b8939.pth", "vit_h"),
        ("medsam_vit_b.pth", "vit_b"),
        ("/models/SAM-ViT-H.pth", "vit_h"),
        ("sam_checkpoint.pth", None),
        ("vit_base.pth", None),
    ],
)
def test_model_type_from_name(name, expected):
    assert sam.model_type_from_name(Path(name)) == expected


def test_model_type_from_state_dict():
    assert sam.model_type_from_state_dict({"image_encoder.patch_embed.proj.weight": torch.zeros(1280, 3, 1, 1)}) == "vit_h"
    assert sam.model_type_from_state_dict({}) is None


def test_to_rgb_uint8():
    gray = np.arange(12, dtype=np.float32).reshape(3, 4)
    rgb = sam.to_rgb_uint8(gray)
    assert rgb.shape == (3, 4, 3) and rgb.dtype == np.uint8 and rgb.max() == 255
    with pytest.raises(ValueError, match="shape"):
        sam.to_rgb_uint8(np.zeros((4, 4, 4)))


def test_bad_options():
    with pytest.raises(ValueError, match="model_type"):
        sam.build(random_init=True, model_type="vit_x")
    with pytest.raises(ValueError, match="float32"):
        sam.build(random_init=True, dtype="bfloat16")
    with pytest.raises(ValueError, match="vit_tiny has no checkpoint.*random_init=True only"):
        sam.build(checkpoint="sam_vit_b_01ec64.pth", model_type="vit_tiny")
