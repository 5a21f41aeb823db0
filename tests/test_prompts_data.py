"""Box protocols on the real shared data: DeepLesion CT npz volumes and a polyp video."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from napari_medsam_eval.core.case import Case, Spacing
from napari_medsam_eval.core.prompt import prompts_from_json, prompts_to_json
from napari_medsam_eval.protocols import BoxJitterProtocol, build_protocol, tight_box


def _deeplesion(shared_data):
    files = sorted((shared_data / "deeplesion_ct_npz").glob("*.npz"))
    assert len(files) == 6
    return files


def test_medsam2_on_deeplesion_key_slice_and_tight_box(shared_data):
    middle, largest, lite = build_protocol("medsam2"), build_protocol("medsam2", key_slice="largest"), build_protocol("litemedsam-3dbox")
    for path in _deeplesion(shared_data):
        with np.load(path) as data:
            gts = np.asarray(data["gts"])  # (Z, H, W)
        zs = np.flatnonzero(gts.any(axis=(1, 2)))
        (p,) = middle.prompts(gts, kind="volume")
        assert p.target_label == 1 and p.protocol == "medsam2"
        assert zs[0] <= p.slice_index <= zs[-1]
        assert p.slice_index == zs[0] + (zs[-1] - zs[0]) // 2, path.name
        assert gts[p.slice_index].any()
        assert [tuple(int(v) for v in b) for b in p.boxes] == [tight_box(gts[p.slice_index] == 1)]
        (q,) = largest.prompts(gts, kind="volume")
        areas = (gts == 1).sum(axis=(1, 2))
        assert areas[q.slice_index] == areas.max()
        (r,) = lite.prompts(gts, kind="volume")
        x0, y0, z0, x1, y1, z1 = r.info["box_3d"]
        assert (z0, z1) == (zs[0], zs[-1]) and r.slice_index == int((z1 - z0) / 2 + z0) == p.slice_index
        ys, xs = np.nonzero((gts == 1).any(axis=0))
        assert (x0, y0, x1, y1) == (xs.min(), ys.min(), xs.max(), ys.max())
        assert prompts_from_json(prompts_to_json([p, q, r]))[2].info["box_3d"] == r.info["box_3d"]


def _video_label(shared_data, clip="seq01"):
    masks = sorted((shared_data / "cvc_clinicdb_video" / "GT" / clip).glob("*.png"))
    assert masks, clip
    return np.stack([(cv2.imread(str(m), 0) > 127).astype(np.uint8) for m in masks])  # (T, Y, X)


def test_medsam2_on_a_video_prompts_the_first_frame(shared_data):
    label = _video_label(shared_data)
    case = Case(np.zeros(label.shape, np.uint8), label, Spacing.isotropic("tyx"), "video", "seq01")
    (p,) = build_protocol("medsam2").prompts(case)
    assert p.slice_index == 0  # a polyp is in every frame of these clips
    assert [tuple(int(v) for v in b) for b in p.boxes] == [tight_box(label[0])]
    # the clip starting on two empty frames: first-present moves on, "first" stays on frame 0 with no box
    late = np.concatenate([np.zeros((2,) + label.shape[1:], label.dtype), label])
    (q,) = build_protocol("medsam2").prompts(late, kind="video")
    assert q.slice_index == 2 and q.boxes == p.boxes
    (r,) = build_protocol("medsam2", video_frame="first").prompts(late, kind="video")
    assert r.slice_index == 0 and r.is_empty and r.info["empty_key_frame"]
    (j,) = BoxJitterProtocol(seed=5).prompts(case)
    assert j.slice_index == 0 and j.info["base_box"] == [int(v) for v in p.boxes[0]]


def test_mazurowski_on_a_video_frame_is_deterministic(shared_data):
    label = _video_label(shared_data, "seq02")
    protocol = build_protocol("mazurowski", slices="key")
    a = protocol.prompts(label, kind="video")
    assert [p.info["mode"] for p in a] == [1, 2, 3, 4, 5] and {p.slice_index for p in a} == {0}
    assert prompts_to_json(a) == prompts_to_json(build_protocol("mazurowski", slices="key").prompts(label, kind="video"))
    frame = label[0] > 0
    x, y = (int(v) for v in a[0].points[0])
    assert frame[y, x]


@pytest.mark.parametrize("name", ["medsam2", "litemedsam-3dbox", "mazurowski", "iterative-points", "box-jitter"])
def test_every_protocol_runs_on_a_hippocampus_volume(shared_data, name):
    import SimpleITK as sitk

    path = sorted((shared_data / "hippocampus_mri" / "labelsTr").glob("*.nii.gz"))[0]
    label = sitk.GetArrayFromImage(sitk.ReadImage(str(path))).astype(np.uint8)  # (z, y, x), labels 1 and 2
    prompts = build_protocol(name, **({"slices": "key"} if name in ("mazurowski", "iterative-points") else {})).prompts(
        label, kind="volume"
    )
    assert {p.target_label for p in prompts} == {1, 2}
    for p in prompts:
        assert not p.info.get("empty")
        assert 0 <= p.slice_index < label.shape[0]
        for x0, y0, x1, y1 in p.boxes:
            assert 0 <= x0 <= x1 < label.shape[2] and 0 <= y0 <= y1 < label.shape[1]
        for x, y in p.points:
            assert label[p.slice_index, int(y), int(x)] == p.target_label
