"""Slice-to-slice propagation: mechanics with stub backends, accuracy with real LiteMedSAM.

The real-data tests share one LiteMedSAM backend and compute every protocol of
a case from the same cached slice embeddings (module-scoped fixtures), so
each slice is encoded once.
"""
from __future__ import annotations

import dataclasses

from pathlib import Path

import numpy as np
import pytest

from napari_medsam_eval.models.base import SegmentationBackend
from napari_medsam_eval.models.baselines import OracleBackend
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.core.errors import Cancelled
from napari_medsam_eval.propagation import (
    propagate_official_litemedsam,
    propagate_video,
    propagate_volume,
    segment_by_kind,
)
from napari_medsam_eval.propagation import VIDEO_RULES, VOLUME_RULES, PropagationRecord, PropagationRules, resolve_rules
from napari_medsam_eval.protocols.geometry import expand_box, tight_box
from napari_medsam_eval.protocols.medsam2 import MedSAM2Protocol

from figures import REPRODUCE


def dice(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a) > 0, np.asarray(b) > 0
    total = a.sum() + b.sum()
    return 1.0 if total == 0 else float(2.0 * (a & b).sum() / total)


# ---------------------------------------------------------------------------
# mechanics, with stub backends (no weights)
# ---------------------------------------------------------------------------

class RecordingOracle(OracleBackend):
    """The oracle, recording every (slice_index, prompt, cache_key) it is asked."""

    def __init__(self, gt: np.ndarray) -> None:
        super().__init__(gt)
        self.calls: list[tuple[int, Prompt, object]] = []

    def segment(self, image, prompt, *, cache_key=None):
        self.calls.append((prompt.slice_index, prompt, cache_key))
        return super().segment(image, prompt, cache_key=cache_key)

    @property
    def visited(self) -> list[int]:
        return [z for z, _, _ in self.calls]


def blob_volume(n: int = 14, lo: int = 3, hi: int = 9, shape: tuple[int, int] = (32, 40)) -> np.ndarray:
    gt = np.zeros((n, *shape), np.uint8)
    for z in range(lo, hi + 1):
        gt[z, 8 + (z - lo) : 14 + (z - lo), 5 + z : 15 + z] = 1
    return gt


def test_tight_and_expanded_boxes():
    mask = np.zeros((10, 12), bool)
    assert tight_box(mask) is None
    mask[2:5, 3:9] = True
    assert tight_box(mask) == (3, 2, 8, 4)
    assert expand_box((3, 2, 8, 4), 3, (10, 12)) == (0, 0, 11, 7)
    assert expand_box((3, 2, 8, 4), 0, (10, 12)) == (3, 2, 8, 4)
    # one function for both rules: rounded (protocols) or fractional (propagation's margins)
    assert expand_box((3, 2, 8, 4), 1.5, (10, 12)) == (2, 1, 10, 6)  # rounded half up, clipped
    assert expand_box((3, 2, 8, 4), 1.5, (10, 12), round_to_pixels=False) == (1.5, 0.5, 9.5, 5.5)
    assert expand_box((3, 2, 8, 4), 3, (10, 12), round_to_pixels=False) == (0, 0, 11, 7)


def test_propagates_both_ways_with_previous_slice_boxes_and_stops_when_empty():
    gt = blob_volume()
    backend = RecordingOracle(gt)
    prompt = Prompt(1, slice_index=6, boxes=[tight_box(gt[6] == 1)])
    pred = propagate_volume(backend, np.zeros_like(gt), prompt, margin=2, case_id="blob")
    assert np.array_equal(pred, gt == 1)
    # up 7..9, the empty slice 10 stops it; down 5..3, the empty slice 2 stops it
    assert backend.visited == [6, 7, 8, 9, 10, 5, 4, 3, 2]
    calls = {z: (p, key) for z, p, key in backend.calls}
    assert calls[7][0].boxes == [expand_box(tight_box(gt[6] == 1), 2, gt.shape[1:])]
    assert calls[5][0].boxes == [expand_box(tight_box(gt[6] == 1), 2, gt.shape[1:])]
    assert calls[4][0].boxes == [expand_box(tight_box(gt[5] == 1), 2, gt.shape[1:])]
    assert calls[8][1] == ("blob", 8)  # cache keys are (case_id, z)


def test_stop_when_empty_false_visits_every_slice():
    gt = blob_volume()
    backend = RecordingOracle(gt)
    pred = propagate_volume(backend, np.zeros_like(gt), Prompt(1, slice_index=6, boxes=[(0, 0, 5, 5)]),
                            stop_when_empty=False)
    assert sorted(backend.visited) == list(range(gt.shape[0]))
    assert np.array_equal(pred, gt == 1)


def test_z_limits_are_honoured():
    gt = blob_volume(lo=1, hi=12)
    backend = RecordingOracle(gt)
    pred = propagate_volume(backend, np.zeros_like(gt), Prompt(1, slice_index=6, boxes=[(0, 0, 5, 5)]),
                            z_limits=(4, 8))
    assert sorted(backend.visited) == [4, 5, 6, 7, 8]
    assert not pred[:4].any() and not pred[9:].any()
    assert np.array_equal(pred[4:9], gt[4:9] == 1)
    with pytest.raises(ValueError, match="z_limits"):
        propagate_volume(backend, np.zeros_like(gt), Prompt(1, slice_index=2, boxes=[(0, 0, 5, 5)]), z_limits=(4, 8))


def test_progress_reaches_total_even_when_stopping_early():
    gt = blob_volume()
    seen: list[tuple[int, int]] = []
    propagate_volume(RecordingOracle(gt), np.zeros_like(gt), Prompt(1, slice_index=6, boxes=[(0, 0, 5, 5)]),
                     progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (gt.shape[0], gt.shape[0])
    assert all(t == gt.shape[0] for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_cancel_through_the_callback_stops_between_slices():
    gt = blob_volume()
    backend = RecordingOracle(gt)
    with pytest.raises(Cancelled) as info:
        propagate_volume(backend, np.zeros_like(gt), Prompt(1, slice_index=6, boxes=[(0, 0, 5, 5)]),
                         progress=lambda done, total: done < 3)
    assert len(backend.calls) == 3
    assert info.value.done == 3 and info.value.total == gt.shape[0]
    partial = info.value.partial
    assert partial.shape == gt.shape and partial.dtype == bool
    assert sorted(np.flatnonzero(partial.any(axis=(1, 2)))) == [6, 7, 8]


def test_min_iou_stops_where_the_prediction_jumps():
    gt = blob_volume(lo=2, hi=11)
    gt[9:, :, :] = 0
    gt[9:12, 20:30, 25:38] = 1  # the object jumps: no overlap with slice 8
    backend = RecordingOracle(gt)
    prompt = Prompt(1, slice_index=5, boxes=[(0, 0, 5, 5)])
    pred = propagate_volume(backend, np.zeros_like(gt), prompt, margin=40, min_iou=0.1)
    assert 9 in backend.visited and 10 not in backend.visited
    assert not pred[9:].any() and np.array_equal(pred[:9], gt[:9] == 1)
    with pytest.raises(ValueError, match="min_iou"):
        propagate_volume(backend, np.zeros_like(gt), prompt, min_iou=1.5)
    with pytest.raises(ValueError, match="margin"):
        propagate_volume(backend, np.zeros_like(gt), prompt, margin=-1)


def test_empty_prompted_slice_returns_empty():
    gt = blob_volume()
    backend = RecordingOracle(gt)
    pred = propagate_volume(backend, np.zeros_like(gt), Prompt(1, slice_index=0, boxes=[(0, 0, 5, 5)]))
    assert not pred.any() and backend.visited == [0]


def test_video_goes_forward_only():
    gt = blob_volume()
    backend = RecordingOracle(gt)
    frames = np.zeros((*gt.shape, 3), np.uint8)
    # the legacy rule stops at the first empty frame
    pred = propagate_video(backend, frames, Prompt(1, slice_index=5, boxes=[(0, 0, 5, 5)]), rules="legacy")
    assert backend.visited == [5, 6, 7, 8, 9, 10]
    assert not pred[:5].any()
    assert np.array_equal(pred[5:], gt[5:] == 1)
    backend.calls.clear()
    pred = propagate_video(backend, frames, Prompt(1, slice_index=4, boxes=[(0, 0, 5, 5)]), end_frame=6)
    assert backend.visited == [4, 5, 6]
    # the video default keeps the last good box through lost frames, to the end of the clip
    backend.calls.clear()
    record = PropagationRecord()
    pred = propagate_video(backend, frames, Prompt(1, slice_index=5, boxes=[(0, 0, 5, 5)]), record=record)
    assert backend.visited == list(range(5, gt.shape[0])) and np.array_equal(pred[5:], gt[5:] == 1)
    assert [(s.direction, s.last, s.at, s.reason) for s in record.stops] == [("forward", 9, None, "end")]
    # hold=1: one lost frame is tolerated, the second one in a row stops it
    backend.calls.clear()
    propagate_video(backend, frames, Prompt(1, slice_index=5, boxes=[(0, 0, 5, 5)]), rules={"hold": 1},
                    record=(record := PropagationRecord()))
    assert backend.visited == [5, 6, 7, 8, 9, 10, 11]
    assert [(s.last, s.at, s.reason) for s in record.stops] == [(9, 11, "empty")]


def test_intensity_rule_stops_where_the_region_changes_and_the_record_says_why():
    gt = blob_volume()
    gt[10:12] = gt[9]  # the "object" goes on in the label the oracle answers from ...
    volume = np.full(gt.shape, 200, np.uint8)
    volume[10:] = 60  # ... but the image says it is another tissue from slice 10
    volume += np.random.default_rng(0).integers(0, 10, gt.shape, dtype=np.uint8)
    backend = RecordingOracle(gt)
    prompt = Prompt(1, slice_index=6, boxes=[tight_box(gt[6] == 1)])
    record = PropagationRecord()
    pred = propagate_volume(backend, volume, prompt, record=record)
    assert pred[:10].tolist() == (gt[:10] == 1).tolist() and not pred[10:].any()
    stops = {s.direction: s for s in record.stops}
    assert (stops["up"].last, stops["up"].at, stops["up"].reason) == (9, 10, "intensity")
    assert (stops["down"].last, stops["down"].at, stops["down"].reason) == (3, 2, "empty")
    # without the rule the leak goes on to the end
    leaky = propagate_volume(backend, volume, prompt, rules={"intensity_k": None})
    assert leaky[10:12].any()
    result = segment_by_kind(backend, volume, "volume", prompt)
    up = next(s for s in result.record.stops if s.direction == "up")
    assert up.measured > up.limit > 0  # the brightness moved more than the rule allows, in grey levels
    assert (f"up: kept to slice 9, stopped at slice 10: the mask's mean brightness moved too far from the prompted "
            f"slice's ({up.measured:.0f} grey levels, more than {up.limit:.0f} allowed)") in result.summary()
    assert result.record.to_dict()["stops"][0]["reason"] in ("intensity", "empty")


def test_rules_are_checked_and_resolved():
    assert resolve_rules("volume") == VOLUME_RULES and resolve_rules("video") == VIDEO_RULES
    assert resolve_rules("volume", "legacy", margin=3).margin == 3
    assert resolve_rules("video", {"hold": 2}).hold == 2 and resolve_rules("video", {"hold": 2}).intensity_k is None
    with pytest.raises(ValueError, match="propagation: unknown rules 'tight'"):
        resolve_rules("volume", "tight")
    with pytest.raises(ValueError, match=r"propagation: unknown option\(s\) \['stop_on_moon'\]; the options are"):
        resolve_rules("volume", {"stop_on_moon": True})
    with pytest.raises(ValueError, match="propagation: margin must be a finite number, got True"):
        resolve_rules("volume", {"margin": True})  # a boolean is not a number
    with pytest.raises(ValueError, match="min_iou must be between 0 and 1"):
        PropagationRules(min_iou=1.5)
    with pytest.raises(ValueError, match="hold must be"):
        PropagationRules(hold=-1)


class NativeStub(SegmentationBackend):
    name = "native-stub"
    accepts = frozenset({"box"})
    propagates_natively = True

    def __init__(self) -> None:
        self.reverse = None

    def segment(self, image, prompt, *, cache_key=None):  # pragma: no cover - never called
        raise AssertionError("per-slice segment must not be used")

    def propagate(self, frames, prompt, *, reverse=True, progress=None):
        self.reverse = reverse
        return np.ones(frames.shape[:3], bool)


def test_native_backends_get_the_whole_stack():
    stub = NativeStub()
    out = propagate_volume(stub, np.zeros((6, 4, 4), np.uint8), Prompt(1, slice_index=2, boxes=[(0, 0, 1, 1)]),
                           z_limits=(1, 3))
    assert stub.reverse is True and out[1:4].all() and not out[0].any() and not out[4:].any()
    out = propagate_video(stub, np.zeros((6, 4, 4), np.uint8), Prompt(1, slice_index=2, boxes=[(0, 0, 1, 1)]))
    assert stub.reverse is False and out[2:].all() and not out[:2].any()


def medsam2_prompt(label_map: np.ndarray, value: int) -> Prompt:
    """The MedSAM2 protocol's prompt of one label of a volume: the box on the middle slice of its z-extent."""
    return MedSAM2Protocol().prompt_for_mask(label_map == value, "volume", value)


def test_the_medsam2_prompt_is_on_the_key_slice():
    gt = blob_volume(lo=3, hi=10)
    prompt = medsam2_prompt(gt, 1)
    assert prompt.slice_index == 3 + (10 - 3) // 2
    assert prompt.boxes == [tight_box(gt[prompt.slice_index] == 1)]
    gt[6] = 0  # a gap on the middle slice: the nearest non-empty slice, lower first
    assert medsam2_prompt(gt, 1).slice_index == 5


def test_official_protocol_needs_litemedsam():
    with pytest.raises(TypeError, match="litemedsam"):
        propagate_official_litemedsam(OracleBackend(np.zeros((3, 4, 4))), np.zeros((3, 4, 4), np.uint8),
                                      [(0, 0, 0, 2, 2, 2)])


# ---------------------------------------------------------------------------
# real LiteMedSAM on real data
# ---------------------------------------------------------------------------

#: DSC of CVPR24_LiteMedSAM_infer.py run unchanged, tight 3D box of gts > 0
DEEPLESION_OFFICIAL_DSC = {
    "000001_02_01_008-023": 0.922,
    "000002_03_01_035-047": 0.813,
    "000009_03_01_036-048": 0.935,
    "000010_01_01_078-090": 0.655,
    "000015_01_01_081-093": 0.775,
    "000015_01_01_103-115": 0.771,
}


@pytest.fixture(scope="module")
def litemedsam():
    from napari_medsam_eval.models.litemedsam import build

    return build(device="cpu", cache_size=64)


@pytest.fixture(scope="module")
def deeplesion_result(shared_data: Path, litemedsam):
    """Per case (computed when first asked for): DSC of the official 3D-box script and of our middle-slice
    protocol, the encoder passes both made and the case's slices."""
    results: dict[str, dict[str, float]] = {}

    def result(case: str) -> dict[str, float]:
        if case not in results:
            with np.load(shared_data / "deeplesion_ct_npz" / f"CT_Lesion_{case}.npz") as npz:
                imgs, gts = npz["imgs"], npz["gts"]
            z, y, x = np.nonzero(gts > 0)
            box3d = [x.min(), y.min(), z.min(), x.max(), y.max(), z.max()]
            calls_before = litemedsam.encoder_calls
            official = propagate_official_litemedsam(litemedsam, imgs, [box3d], case_id=case)
            ours = propagate_volume(litemedsam, imgs, medsam2_prompt(gts, 1), case_id=case)
            results[case] = {"official": dice(official, gts), "ours": dice(ours, gts),
                             "encodes": litemedsam.encoder_calls - calls_before, "slices": imgs.shape[0]}
            print(f"\nDeepLesion {case} DSC: official {results[case]['official']:.3f}, ours {results[case]['ours']:.3f}")
        return results[case]

    return result


#: make test checks the official loop on the first 2 cases, make reproduce on all 6
OFFICIAL_CASES = [case if i < 2 else pytest.param(case, marks=REPRODUCE)
                  for i, case in enumerate(sorted(DEEPLESION_OFFICIAL_DSC))]


@pytest.mark.slow
@pytest.mark.parametrize("case", OFFICIAL_CASES)
def test_official_litemedsam_3d_reproduces_reference_dsc(deeplesion_result, case):
    result = deeplesion_result(case)
    assert result["official"] == pytest.approx(DEEPLESION_OFFICIAL_DSC[case], abs=0.01)
    assert result["encodes"] <= result["slices"]  # both protocols of a case share the slice embeddings


@REPRODUCE
def test_our_protocol_on_deeplesion(deeplesion_result):
    scores = [deeplesion_result(case)["ours"] for case in sorted(DEEPLESION_OFFICIAL_DSC)]
    assert len(scores) == 6
    assert np.median(scores) >= 0.70, scores


@pytest.mark.slow
def test_official_protocol_progress_cancel_and_errors(shared_data: Path, litemedsam):
    with np.load(shared_data / "deeplesion_ct_npz" / "CT_Lesion_000002_03_01_035-047.npz") as npz:
        imgs, gts = npz["imgs"], npz["gts"]
    z, y, x = np.nonzero(gts > 0)
    box3d = [x.min(), y.min(), z.min(), x.max(), y.max(), z.max()]
    seen: list[tuple[int, int]] = []
    with pytest.raises(Cancelled) as info:
        propagate_official_litemedsam(litemedsam, imgs, [box3d], case_id="CT_Lesion_000002_03_01_035-047",
                                      progress=lambda d, t: seen.append((d, t)) or d < 2)
    n_slices = z.max() - z.min() + 1
    assert seen[-1] == (2, n_slices)
    partial = info.value.partial
    assert partial.dtype == np.uint8 and set(np.unique(partial)) <= {0, 1}
    z_middle = int((z.max() - z.min()) / 2 + z.min())
    assert np.flatnonzero(partial.any(axis=(1, 2))).tolist() == [z_middle, z_middle + 1]
    with pytest.raises(ValueError, match="z_min"):
        propagate_official_litemedsam(litemedsam, imgs, [[10, 10, 4, 20, 20, 4]])


@pytest.mark.slow
def test_video_propagation_on_a_colonoscopy_clip(shared_data: Path, litemedsam):
    import cv2

    folder = shared_data / "cvc_clinicdb_video"
    names = sorted(p.name for p in (folder / "Frame" / "seq01").glob("*.jpg"))[:5]
    frames = np.stack([cv2.cvtColor(cv2.imread(str(folder / "Frame" / "seq01" / n)), cv2.COLOR_BGR2RGB) for n in names])
    gts = np.stack([cv2.imread(str(folder / "GT" / "seq01" / n.replace(".jpg", ".png")), cv2.IMREAD_GRAYSCALE) > 127
                    for n in names])
    prompt = Prompt(1, slice_index=0, boxes=[tight_box(gts[0])])
    seen: list[tuple[int, int]] = []
    pred = propagate_video(litemedsam, frames, prompt, case_id="seq01", progress=lambda d, t: seen.append((d, t)))
    assert pred.shape == gts.shape and seen[-1] == (5, 5)
    scores = [dice(p, g) for p, g in zip(pred, gts)]
    print("\nCVC seq01 per-frame DSC:", np.round(scores, 3))
    assert scores[0] > 0.7 and np.median(scores) > 0.6


def test_segment_by_kind_dispatches_every_kind_and_reports_what_happened():
    """The one core entry the CLI, the benchmark and the session share: image -> one call,
    volume -> propagation (or the prompted slice alone), cancel -> a partial result."""
    gt = np.zeros((9, 20, 20), np.uint8)
    gt[2:7, 5:12, 6:14] = 1
    oracle = OracleBackend()
    oracle.set_ground_truth(gt)
    prompt = Prompt(target_label=1, slice_index=4, boxes=[tight_box(gt[4] == 1)])
    image = np.zeros(gt.shape, np.uint8)
    full = segment_by_kind(oracle, image, "volume", prompt, case_id="c")
    assert not full.cancelled and full.total == 9 and dice(full.mask, gt) == 1.0
    one = segment_by_kind(oracle, image, "volume", prompt, how="slice", case_id="c")
    assert one.mask.sum() == (gt[4] == 1).sum() and one.mask[4].any() and not one.mask[5].any()
    stopped = segment_by_kind(oracle, image, "volume", prompt, case_id="c", progress=lambda done, total: done < 2)
    assert stopped.cancelled and stopped.done == 2 and stopped.mask.sum() == 2 * (gt[4] == 1).sum()
    oracle.set_ground_truth(gt[4])
    flat = segment_by_kind(oracle, image[4], "image", dataclasses.replace(prompt, slice_index=None))
    assert flat.mask.shape == (20, 20) and dice(flat.mask, gt[4]) == 1.0
    with pytest.raises(ValueError, match="kind must be one of"):
        segment_by_kind(oracle, image, "stack", prompt)


def test_a_direction_ended_by_its_range_says_so_not_the_end_of_the_volume():
    """Issue 58: a correction propagates up to the next anchor (``z_limits``): its stop is ``limit``, said as the
    end of the slices it was to fill; only the stack's own ends are "the end of the volume"."""
    gt = blob_volume()
    record = PropagationRecord()
    propagate_volume(RecordingOracle(gt), np.zeros_like(gt), Prompt(1, slice_index=5, boxes=[(0, 0, 5, 5)]),
                     rules="legacy", z_limits=(4, 7), record=record)
    assert {(s.direction, s.last, s.reason) for s in record.stops} == {("up", 7, "limit"), ("down", 4, "limit")}
    text = record.summary()
    assert "the end of the slices it was to fill" in text and "the end of the volume" not in text
    record = PropagationRecord()
    propagate_volume(RecordingOracle(gt), np.zeros_like(gt), Prompt(1, slice_index=5, boxes=[(0, 0, 5, 5)]),
                     rules={"stop_when_empty": False, "intensity_k": None, "min_iou": None}, record=record)
    assert {s.reason for s in record.stops} == {"end"} and "the end of the volume" in record.summary()
