"""MedSAM2/SAM2 backend: config, checkpoints, in-memory state, bidirectional propagation.

No weights are downloaded: the model is MedSAM2's 512 config with seeded random
weights (its masks mean nothing), run on CPU on real data. What is checked is the
machinery: shapes, both passes, progress/cancel, union merging, errors.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sam2")
pytest.importorskip("hydra")

from omegaconf import OmegaConf  # noqa: E402

from napari_medsam_eval.core.errors import MedsamEvalError  # noqa: E402
from napari_medsam_eval.models import build_backend  # noqa: E402
from napari_medsam_eval.models import sam2_backend as sb  # noqa: E402
from napari_medsam_eval.core.prompt import Prompt  # noqa: E402
from napari_medsam_eval.core.errors import Cancelled  # noqa: E402

DEEPLESION_CASE = "deeplesion_ct_npz/CT_Lesion_000002_03_01_035-047.npz"  # 13 slices of 512x512, uint8
HIPPOCAMPUS_CASE = "hippocampus_mri/imagesTr/hippocampus_004.nii.gz"  # float32 MRI, 38 slices


@pytest.fixture(scope="module")
def medsam2():
    return sb.build_medsam2(random_init=True, device="cpu")


@pytest.fixture(scope="module")
def lesion(shared_data):
    """(volume, labels, key slice, box): key = middle of the lesion's z-extent (MedSAM2's
    protocol), box = its tight box there. The volume is the 7 slices around the key
    slice (a CPU frame costs seconds); both directions still have 3 slices to walk."""
    data = np.load(shared_data / DEEPLESION_CASE)
    imgs, gts = data["imgs"], data["gts"]
    z = np.flatnonzero(gts.any(axis=(1, 2)))
    key = int(z.min() + (z.max() - z.min()) // 2)
    ys, xs = np.nonzero(gts[key])
    box = (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))
    low, high = max(0, key - 3), min(imgs.shape[0], key + 4)
    return imgs[low:high], gts[low:high], key - low, box


@pytest.fixture(scope="module")
def bidirectional(medsam2, lesion):
    imgs, _, key, box = lesion
    calls: list[tuple[int, int]] = []
    seg = medsam2.propagate(imgs, Prompt(1, slice_index=key, boxes=[box]), progress=lambda d, t: calls.append((d, t)))
    return seg, calls, dict(medsam2.last_run)


# ----------------------------------------------------------------------------- config


def _flatten(node, prefix=""):
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: node}


def test_medsam2_config_differs_from_stock_in_exactly_three_values():
    stock_path = Path(sb._sam2_package_dir()) / "configs" / "sam2.1" / "sam2.1_hiera_t.yaml"
    stock = _flatten(OmegaConf.to_container(OmegaConf.load(stock_path)))
    ours = _flatten(OmegaConf.to_container(OmegaConf.load(sb.MEDSAM2_CONFIG)))
    assert stock.keys() == ours.keys()
    diff = {key: (stock[key], ours[key]) for key in stock if stock[key] != ours[key]}
    assert diff == {
        "model.image_size": (1024, 512),
        "model.memory_attention.layer.self_attention.feat_sizes": ([64, 64], [32, 32]),
        "model.memory_attention.layer.cross_attention.feat_sizes": ([64, 64], [32, 32]),
    }


def test_resolve_config_names_and_checkpoint_inference(tmp_path):
    assert sb.resolve_config("sam2.1_hiera_t512") == sb.MEDSAM2_CONFIG
    assert sb.resolve_config(None, "some/dir/sam2.1_hiera_large.pt").name == "sam2.1_hiera_l.yaml"
    assert sb.resolve_config("configs/sam2.1/sam2.1_hiera_s.yaml").name == "sam2.1_hiera_s.yaml"
    assert sb.resolve_config("sam2_hiera_b+").parent.name == "sam2"
    with pytest.raises(sb.ModelConfigError, match="config"):
        sb.resolve_config(None, tmp_path / "my_finetune.pt")
    with pytest.raises(sb.ModelConfigError, match="not found"):
        sb.resolve_config("no_such_config")


def test_build_leaves_hydra_global_state_alone():
    from hydra.core.global_hydra import GlobalHydra

    before = GlobalHydra.instance().is_initialized()
    sb.load_model_config(sb.MEDSAM2_CONFIG, sb.VIDEO_POSTPROCESSING)
    assert GlobalHydra.instance().is_initialized() == before


def test_postprocessing_overrides_applied(medsam2):
    model = medsam2.model
    assert model.image_size == 512
    assert model.binarize_mask_from_pts_for_mem_enc is True
    assert model.sam_mask_decoder.dynamic_multimask_via_stability is True
    # sam2's CUDA extension is not there on CPU: the same hole filling runs with scipy
    assert model.fill_hole_area + model.cpu_fill_hole_area == 8


# ----------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("builder", [sb.build_medsam2, sb.build_sam2])
def test_missing_checkpoint_names_the_option(builder):
    with pytest.raises(sb.MissingCheckpointError) as info:
        builder()
    message = str(info.value)
    assert "checkpoint" in message and "--checkpoint PATH" in message and "checkpoint=" in message
    assert isinstance(info.value, MedsamEvalError)


def test_missing_checkpoint_through_registry():
    with pytest.raises(sb.MissingCheckpointError, match="MedSAM2_latest.pt"):
        build_backend("medsam2")


def test_checkpoint_not_found_names_the_file(tmp_path):
    path = tmp_path / "MedSAM2_latest.pt"
    with pytest.raises(sb.CheckpointError, match="not found") as info:
        sb.build_medsam2(checkpoint=path, device="cpu")
    assert str(path) in str(info.value)


def test_corrupt_checkpoint_names_the_file(tmp_path):
    path = tmp_path / "MedSAM2_latest.pt"
    path.write_bytes(b"PK\x03\x04 this is not a checkpoint" * 100)
    with pytest.raises(sb.CheckpointError) as info:
        sb.build_medsam2(checkpoint=path, device="cpu")
    assert str(path) in str(info.value)
    assert "checkpoint" in str(info.value)


def test_checkpoint_without_model_entry(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save({"state_dict": {"a": torch.zeros(1)}}, path)
    with pytest.raises(sb.CheckpointError, match="no 'model' entry"):
        sb.build_medsam2(checkpoint=path, device="cpu")


def test_checkpoint_loads_strictly_and_is_hashed(medsam2, tmp_path):
    state = {k: v.clone() for k, v in medsam2.model.state_dict().items()}
    path = tmp_path / "MedSAM2_test.pt"
    torch.save({"model": state}, path)
    backend = sb.build_medsam2(checkpoint=path, device="cpu")
    facts = backend.describe()
    assert facts["checkpoint"] == str(path.resolve())
    assert facts["checkpoint_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert facts["random_init"] is False and facts["image_size"] == 512
    loaded = backend.model.state_dict()
    assert all(torch.equal(loaded[k], state[k]) for k in ("no_mem_embed", "sam_mask_decoder.iou_token.weight"))

    # weights of another architecture fail strictly, naming the file
    bad = tmp_path / "other.pt"
    torch.save({"model": {"no_mem_embed": state["no_mem_embed"], "extra.weight": torch.zeros(2)}}, bad)
    with pytest.raises(sb.CheckpointError, match="do not fit") as info:
        sb.build_medsam2(checkpoint=bad, device="cpu")
    assert str(bad) in str(info.value)


def test_random_init_and_checkpoint_are_exclusive(tmp_path):
    with pytest.raises(ValueError):
        sb.build_medsam2(checkpoint=tmp_path / "x.pt", random_init=True)


def test_build_sam2_random_stock_config():
    backend = sb.build_sam2(random_init=True, device="cpu")
    assert backend.name == "sam2" and backend.image_size == 1024
    assert backend.describe()["config"].endswith("sam2.1_hiera_t.yaml")


def test_registry_builds_medsam2_backend():
    backend = build_backend("medsam2", random_init=True, device="cpu")
    assert isinstance(backend, sb.SAM2Backend)
    assert backend.propagates_natively and {"box", "points"} <= backend.accepts


# ----------------------------------------------------------------------------- frames / state


def test_prepare_frames_normalises_like_medsam2():
    frames = np.zeros((2, 40, 60), dtype=np.uint8)
    frames[1] = 255
    images, height, width = sb.prepare_frames(frames, 512)
    assert images.shape == (2, 3, 512, 512) and images.dtype == torch.float32
    assert (height, width) == (40, 60)
    mean, std = np.array(sb.IMAGENET_MEAN), np.array(sb.IMAGENET_STD)
    np.testing.assert_allclose(images[0, :, 0, 0].numpy(), -mean / std, rtol=1e-6)
    np.testing.assert_allclose(images[1, :, 5, 7].numpy(), (1 - mean) / std, rtol=1e-6)


def test_to_uint8_scales_non_uint8_over_the_volume():
    values = np.array([[[-1.0, 0.0]], [[1.0, 3.0]]], dtype=np.float32)
    out = sb.to_uint8(values)
    assert out.dtype == np.uint8
    assert out.min() == 0 and out.max() == 255
    assert sb.to_uint8(np.full((2, 3, 3), 7.0)).max() == 0
    with pytest.raises(ValueError, match="NaN"):
        sb.to_uint8(np.array([[np.nan]]))


def test_in_memory_state_matches_stock_init_state(medsam2, lesion, tmp_path):
    """Same fields, same types and the same image tensor as SAM2VideoPredictor.init_state
    reading the frames from a JPEG folder."""
    from PIL import Image

    imgs = lesion[0][:3, :400, :300]  # non-square frames
    for index, frame in enumerate(imgs):
        Image.fromarray(frame).convert("RGB").save(tmp_path / f"{index:05d}.jpg", quality=95)
    decoded = np.stack([np.asarray(Image.open(tmp_path / f"{i:05d}.jpg").convert("RGB")) for i in range(3)])
    with torch.inference_mode():
        stock = medsam2.model.init_state(str(tmp_path))
        images, height, width = sb.prepare_frames(decoded, medsam2.image_size)
        ours = sb.init_state_from_frames(medsam2.model, images, height, width, warm_up=False)
    assert list(ours) == list(stock)
    for key in stock:
        assert type(ours[key]) is type(stock[key]), key
        if key not in ("images", "cached_features"):
            assert ours[key] == stock[key], key
    assert (ours["video_height"], ours["video_width"]) == (400, 300)
    torch.testing.assert_close(ours["images"], stock["images"], atol=1e-5, rtol=0)
    assert list(stock["cached_features"]) == [0] and ours["cached_features"] == {}  # warm_up=False


def test_fill_holes_cpu_matches_sam2_rule():
    scores = torch.full((1, 1, 32, 32), -5.0)
    scores[0, 0, 4:20, 4:20] = 5.0
    scores[0, 0, 8:10, 8:10] = -5.0  # a 4-pixel hole: filled
    scores[0, 0, 30:32, 30:32] = 5.0
    filled = sb.fill_holes_cpu(scores, 8)
    assert torch.all(filled[0, 0, 8:10, 8:10] == 0.1)
    assert torch.all(filled[0, 0, 0:4, :] == -5.0)  # the big background stays
    untouched = torch.full((1, 1, 8, 8), 3.0)
    assert sb.fill_holes_cpu(untouched, 8) is untouched


# ----------------------------------------------------------------------------- 3D propagation


@pytest.mark.slow
def test_bidirectional_propagation_runs_both_passes(bidirectional, lesion):
    imgs, _, key, _ = lesion
    seg, calls, run = bidirectional
    count = imgs.shape[0]
    assert seg.shape == imgs.shape and seg.dtype == bool
    assert 0 < key < count - 1
    assert run["forward_frames"] == list(range(key, count))
    assert run["reverse_frames"] == list(range(key, -1, -1))
    # every slice reported once (the key frame, yielded by both passes, counts once)
    assert calls == [(done, count) for done in range(1, count + 1)]


@pytest.mark.slow
def test_key_slice_of_propagation_equals_segment(medsam2, bidirectional, lesion):
    imgs, _, key, box = lesion
    seg, _, _ = bidirectional
    result = medsam2.segment(imgs[key], Prompt(1, boxes=[box]), cache_key=("lesion", key))
    assert result.mask.shape == imgs.shape[1:] and result.mask.dtype == bool
    assert result.logits is not None and result.logits.shape == imgs.shape[1:]
    np.testing.assert_array_equal(result.mask, result.logits > 0)
    np.testing.assert_array_equal(result.mask, seg[key])


@pytest.mark.slow
def test_segment_cache_union_points_and_mask(medsam2, lesion):
    imgs, gts, key, box = lesion
    cache_key = ("lesion", key)
    first = medsam2.segment(imgs[key], Prompt(1, boxes=[box]), cache_key=cache_key)
    x0, y0, x1, y1 = box
    other = (max(0, x0 - 60), max(0, y0 - 60), x0 - 20, y0 - 20)
    second = medsam2.segment(imgs[key], Prompt(1, boxes=[other]), cache_key=cache_key)
    passes: list[int] = []
    encode = medsam2.model.forward_image
    medsam2.model.forward_image = lambda *args, **kwargs: (passes.append(1), encode(*args, **kwargs))[1]
    try:
        both = medsam2.segment(imgs[key], Prompt(1, boxes=[box, other]), cache_key=cache_key)
    finally:
        del medsam2.model.forward_image
    assert passes == []  # features came from the cache: no encoder pass
    np.testing.assert_array_equal(both.mask, first.mask | second.mask)

    points = medsam2.segment(
        imgs[key], Prompt(1, points=[((x0 + x1) / 2, (y0 + y1) / 2), (5, 5)], point_labels=[1, 0]), cache_key=cache_key
    )
    assert points.mask.shape == imgs.shape[1:]

    mask_prompt = medsam2.segment(imgs[key], Prompt(1, mask=gts[key] > 0), cache_key=cache_key)
    inter = np.logical_and(mask_prompt.mask, gts[key] > 0).sum()
    dice = 2 * inter / (mask_prompt.mask.sum() + (gts[key] > 0).sum())
    assert dice > 0.8  # SAM2 passes a mask prompt through as the output

    with pytest.raises(ValueError, match="one box"):
        medsam2.segment(imgs[key], Prompt(1, boxes=[box, other], points=[(1, 1)], point_labels=[1]))
    medsam2.clear_cache()
    assert not medsam2._cache


@pytest.mark.slow
def test_cancel_stops_propagation(medsam2, lesion):
    imgs, _, key, box = lesion
    seen = []

    def progress(done, total):
        seen.append(done)
        return done < 2

    with pytest.raises(Cancelled) as info:
        medsam2.propagate(imgs, Prompt(1, slice_index=key, boxes=[box]), progress=progress)
    assert seen == [1, 2]
    assert (info.value.done, info.value.total) == (2, imgs.shape[0])
    assert info.value.partial.shape == imgs.shape and info.value.partial.dtype == bool
    assert not info.value.partial[:key].any()  # the reverse pass never started


@pytest.mark.slow
def test_forward_only_on_float_mri(medsam2, shared_data):
    import SimpleITK as sitk

    volume = sitk.GetArrayFromImage(sitk.ReadImage(str(shared_data / HIPPOCAMPUS_CASE)))
    assert volume.dtype != np.uint8  # exercises the uint8 scaling
    count, height, width = volume.shape
    key = count - 2
    seg = medsam2.propagate(volume, Prompt(1, slice_index=key, boxes=[(10, 10, 25, 30)]), reverse=False)
    assert seg.shape == (count, height, width) and seg.dtype == bool
    assert medsam2.last_run["forward_frames"] == [key, key + 1]
    assert medsam2.last_run["reverse_frames"] == []
    assert not seg[:key].any()  # frames before the prompt are never segmented forward-only


def test_propagate_rejects_bad_input(medsam2):
    frames = np.zeros((4, 16, 16), dtype=np.uint8)
    with pytest.raises(ValueError, match="outside"):
        medsam2.propagate(frames, Prompt(1, slice_index=4, boxes=[(1, 1, 5, 5)]))
    with pytest.raises(ValueError, match="slice_index"):
        medsam2.propagate(frames, Prompt(1, boxes=[(1, 1, 5, 5)]))
    with pytest.raises(ValueError, match="shape"):
        medsam2.propagate(np.zeros((4, 16, 16, 4)), Prompt(1, slice_index=0, boxes=[(1, 1, 5, 5)]))
    with pytest.raises(ValueError, match="empty"):
        medsam2.propagate(frames, Prompt(1, slice_index=0))
