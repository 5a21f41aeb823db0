"""The steps MedSAM2's scripts take around the model, one by one.

The end-to-end equality with MedSAM2's own masks is ``test_medsam2_reference.py``; here each
step is checked where it can fail on its own: the largest component (connectivity, ties),
how protocols ask for it and for a mask seed, the errors for models that cannot follow, the
video post-processing switch and the frame arithmetic.
"""
from __future__ import annotations

import numpy as np
import pytest

from napari_medsam_eval.core.case import Case, Spacing
from napari_medsam_eval.models.base import SegmentationBackend
from napari_medsam_eval.models.baselines import BoxBackend, OracleBackend
from napari_medsam_eval.core.postprocess import LARGEST_COMPONENT, SEED, largest_component, seed_of
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.propagation import segment_by_kind
from napari_medsam_eval.protocols import build_protocol


def test_largest_component_is_26_connected_and_keeps_the_first_on_a_tie():
    mask = np.zeros((4, 6, 6), bool)
    mask[0, 0, 0] = mask[1, 1, 1] = mask[2, 2, 2] = True  # touching by corners only: one component
    mask[0, 5, 5] = mask[0, 4, 5] = True  # two voxels, apart
    kept = largest_component(mask)
    assert kept.sum() == 3 and kept[2, 2, 2] and not kept[0, 5, 5]
    tie = np.zeros((1, 5, 5), bool)
    tie[0, 4, 3:5] = True  # found second in raster order
    tie[0, 0, 0:2] = True  # found first
    assert largest_component(tie)[0, 0, 0] and not largest_component(tie)[0, 4, 4]
    empty = np.zeros((2, 3, 3), bool)
    assert not largest_component(empty).any()


def _volume_case(label: np.ndarray) -> Case:
    return Case(np.zeros(label.shape, np.uint8), label, Spacing.isotropic("zyx"), "volume", "two-parts")


def _two_part_label() -> np.ndarray:
    label = np.zeros((7, 24, 24), np.uint8)
    label[1:6, 3:12, 3:12] = 1  # the object
    label[3, 18:21, 18:21] = 1  # a separate small part (9 voxels) on the key slice
    return label


def test_protocols_carry_the_steps_in_the_prompt_and_segmenting_applies_them():
    label = _two_part_label()
    case = _volume_case(label)
    (default,) = build_protocol("medsam2").prompts(case)
    (recist,) = build_protocol("medsam2-recist").prompts(case)
    assert default.info[LARGEST_COMPONENT] is True and seed_of(default.info) == "box"
    assert recist.info[LARGEST_COMPONENT] is False and seed_of(recist.info) == "mask"
    oracle = OracleBackend(label)  # answers with the ground truth's slice, both parts
    prompt = Prompt(1, slice_index=3, boxes=[(3, 3, 20, 20)], info=dict(default.info))
    result = segment_by_kind(oracle, case.image, "volume", prompt, rules={"intensity_k": None, "min_iou": None})
    assert result.mask.sum() == (label[1:6, 3:12, 3:12] > 0).sum()  # the 9 voxels apart are gone
    assert result.record.rules[LARGEST_COMPONENT] == 9 and "9 voxels removed" in result.summary()
    kept_all = segment_by_kind(oracle, case.image, "volume", Prompt(1, slice_index=3, boxes=[(3, 3, 20, 20)],
                                                                   info=dict(recist.info)),
                               rules={"intensity_k": None, "min_iou": None})
    assert kept_all.mask.sum() == (label > 0).sum()
    assert LARGEST_COMPONENT not in (kept_all.record.rules or {})


def test_video_prompts_carry_no_largest_component_and_a_mask_prompt_on_request():
    label = np.zeros((4, 16, 16), np.uint8)
    label[:, 4:9, 5:10] = 1
    video = Case(np.zeros((4, 16, 16, 3), np.uint8), label, Spacing.isotropic("tyx"), "video", "clip")
    (boxed,) = build_protocol("medsam2").prompts(video)
    assert LARGEST_COMPONENT not in boxed.info and boxed.boxes == [(5.0, 4.0, 9.0, 8.0)]
    (masked,) = build_protocol("medsam2", video_frame="first", video_prompt="mask").prompts(video)
    assert not masked.boxes and masked.slice_index == 0 and np.array_equal(masked.mask, label[0] == 1)
    with pytest.raises(ValueError, match="box does not accept mask"):  # a box-only model says why
        segment_by_kind(BoxBackend(), video.image, "video", masked)


class _NativeWithoutMasks(SegmentationBackend):
    name = "native-boxes"
    accepts = frozenset({"box"})
    propagates_natively = True

    def segment(self, image, prompt, *, cache_key=None):  # pragma: no cover - never called
        raise AssertionError

    def propagate(self, frames, prompt, *, reverse=True, progress=None):  # pragma: no cover - refused first
        raise AssertionError


def test_a_mask_seed_needs_a_model_that_takes_masks():
    prompt = Prompt(1, slice_index=1, boxes=[(0, 0, 2, 2)], info={SEED: "mask"})
    with pytest.raises(ValueError, match="seeded with the key slice's mask.*native-boxes takes box"):
        segment_by_kind(_NativeWithoutMasks(), np.zeros((3, 4, 4), np.uint8), "volume", prompt)
    with pytest.raises(ValueError, match="must be one of"):
        seed_of({SEED: "points"})
    for bad in ({"largest_component": "yes"}, {"native_seed": "points"}, {"video_prompt": "points"}):
        with pytest.raises(ValueError):
            build_protocol("medsam2", **bad)


def test_frames_are_normalised_as_the_scripts_do():
    from napari_medsam_eval.models.sam2_frames import prepare_frames

    frames = np.random.default_rng(0).integers(0, 256, (3, 20, 30), dtype=np.uint8)
    as_volume, height, width = prepare_frames(frames, 32, float64=True)
    as_video, _, _ = prepare_frames(frames, 32, float64=False)
    assert (height, width) == (20, 30) and as_volume.dtype == as_video.dtype
    # the two differ in the last bit only, and the float64 one is the correctly rounded value
    assert 0 < float((as_volume - as_video).abs().max()) < 1e-6
    from PIL import Image
    rgb = np.asarray(Image.fromarray(frames[1]).convert("RGB").resize((32, 32))).transpose(2, 0, 1) / 255.0
    mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
    exact = ((rgb - mean[:, None, None].astype(np.float64)) / std[:, None, None].astype(np.float64)).astype(np.float32)
    assert np.array_equal(as_volume[1].numpy(), exact)


def test_post_processing_switch_restores_the_model_and_options_are_checked():
    pytest.importorskip("sam2")
    from napari_medsam_eval.core.errors import OptionError
    from napari_medsam_eval.models.checkpoint_files import ModelOptionError
    from napari_medsam_eval.models.sam2_backend import build_medsam2
    from napari_medsam_eval.models.sam2_build import check_postprocessing, postprocessing_off

    backend = build_medsam2(random_init=True, device="cpu")
    model = backend.model
    before = (model.sam_mask_decoder.dynamic_multimask_via_stability, model.binarize_mask_from_pts_for_mem_enc,
              model.fill_hole_area, model.cpu_fill_hole_area)
    assert before[0] is True and before[1] is True and max(before[2], before[3]) == 8
    with postprocessing_off(model):
        assert not model.sam_mask_decoder.dynamic_multimask_via_stability and model.fill_hole_area == 0
        assert model.cpu_fill_hole_area == 0 and not model.binarize_mask_from_pts_for_mem_enc
    assert (model.sam_mask_decoder.dynamic_multimask_via_stability, model.binarize_mask_from_pts_for_mem_enc,
            model.fill_hole_area, model.cpu_fill_hole_area) == before
    assert backend.describe()["postprocessing"] == "auto" and check_postprocessing(False) == "off"
    with pytest.raises(ModelOptionError, match="postprocessing must be one of auto, on, off"):
        check_postprocessing("sometimes")
    with pytest.raises(OptionError, match="model medsam2: options: fill_holes must be true or false, got 'no'"):
        build_medsam2(random_init=True, device="cpu", fill_holes="no")  # checked before any work, as build_backend does
    no_fill = build_medsam2(random_init=True, device="cpu", fill_holes=False)
    assert no_fill.model.fill_hole_area == 0 and no_fill.model.cpu_fill_hole_area == 0
    assert no_fill.describe()["hole_filling"] == "off"
