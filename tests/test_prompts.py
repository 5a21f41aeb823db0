"""Prompt protocols on hand-made masks whose answers are known."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from napari_medsam_eval.core.case import Case, Spacing
from napari_medsam_eval.core.prompt import Prompt, prompts_from_json, prompts_to_json
from napari_medsam_eval.protocols import (
    PROTOCOLS,
    BoxJitterProtocol,
    IterativePointsProtocol,
    LiteMedSAM3DBoxProtocol,
    MazurowskiProtocol,
    MedSAM2Protocol,
    build_protocol,
    clip_box,
    connected_parts,
    distance_transform,
    interior_candidates,
    interior_point,
    iterate,
    jitter_box,
    mazurowski_label_map,
    mazurowski_prompt_set,
    next_point,
    protocol_options,
    tight_box,
    tight_box_3d,
)


def rect(shape, y0, x0, y1, x1, value=1, into=None):
    """Mask with an inclusive rectangle rows y0..y1, cols x0..x1 set."""
    out = np.zeros(shape, np.uint8) if into is None else into
    out[y0 : y1 + 1, x0 : x1 + 1] = value
    return out


def by_mode(prompts):
    return {p.info["mode"]: p for p in prompts}


def pts(p: Prompt):
    return [(int(x), int(y)) for x, y in p.points]


def bxs(p: Prompt):
    return [tuple(int(v) for v in b) for b in p.boxes]


# --------------------------------------------------------------------------- geometry


def test_tight_box_is_inclusive_and_none_when_empty():
    m = rect((10, 12), 2, 3, 6, 8)
    assert tight_box(m) == (3, 2, 8, 6)
    assert tight_box(np.zeros((4, 4))) is None
    one = np.zeros((5, 5), bool)
    one[4, 0] = True
    assert tight_box(one) == (0, 4, 0, 4)


def test_tight_box_3d_order_is_the_cvpr_one():
    m = np.zeros((6, 10, 12), np.uint8)
    m[1, 2:4, 3:5] = 1
    m[4, 6, 9] = 1
    assert tight_box_3d(m) == (3, 2, 1, 9, 6, 4)
    assert tight_box_3d(np.zeros((2, 3, 3))) is None


def test_clip_box_rounds_half_up_and_clips():
    assert clip_box((-3.2, 2.5, 20.0, 7.49), (10, 12)) == (0, 3, 11, 7)
    assert clip_box((15, 15, 18, 18), (10, 12)) == (11, 9, 11, 9)  # collapses onto the corner


def test_connected_parts_largest_first_ties_to_the_higher_label_id():
    m = np.zeros((12, 12), np.uint8)
    rect(m.shape, 0, 0, 1, 1, into=m)  # id 1, 4 px
    rect(m.shape, 0, 5, 1, 6, into=m)  # id 2, 4 px
    rect(m.shape, 5, 0, 7, 2, into=m)  # id 3, 9 px
    m[11, 11] = 1  # id 4, 1 px
    m[9, 4] = 1  # id ... diagonal pair with (10, 5) -> one 8-connected part of 2 px
    m[10, 5] = 1
    labels, ids, sizes = connected_parts(m)
    assert sizes == [9, 4, 4, 2, 1]
    assert labels[5, 0] == ids[0]
    assert labels[0, 5] == ids[1] and labels[0, 0] == ids[2]  # equal sizes: later in raster order first
    assert labels[9, 4] == labels[10, 5] == ids[3]  # 8-connected (connectivity 2)
    _, ids4, _ = connected_parts(m, connectivity=1)
    assert len(ids4) == 6


def test_distance_pads_the_image_border_as_background():
    m = rect((10, 10), 0, 0, 2, 2)  # 3x3 block in the corner
    d = distance_transform(m)
    assert d[1, 1] == pytest.approx(2.0) and d[0, 0] == pytest.approx(1.0)
    assert interior_point(m)[:2] == (1, 1)  # OpenCV alone (no pad) would put it at (2, 2)
    m2 = rect((10, 10), 4, 7, 6, 9)  # touching the right border
    assert interior_point(m2) == (8, 5, 1)


def test_interior_point_of_a_square_with_a_hole_avoids_the_hole():
    m = rect((11, 11), 1, 1, 9, 9)  # 9x9 square
    m[5, 5] = 0  # one-pixel hole at its centre
    xs, ys = interior_candidates(m)
    # chamfer: corners of the ring around the hole are 2 diagonal steps (2.8) from it and 3 from the edge
    assert list(zip(xs.tolist(), ys.tolist())) == [(3, 3), (7, 3), (3, 7), (7, 7)]  # row-major
    x, y, n = interior_point(m, np.random.RandomState(1))
    assert n == 4 and (x, y) == [(3, 3), (7, 3), (3, 7), (7, 7)][np.random.RandomState(1).randint(0, 4)]
    assert m[y, x]


def test_crop_equals_full_image_distance_bit_for_bit():
    rng = np.random.default_rng(0)
    for _ in range(30):
        noise = rng.random((64, 80)) > 0.55
        blobs = cv2.morphologyEx(noise.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
        blobs[rng.integers(0, 64), rng.integers(0, 80)] = 1
        a = distance_transform(blobs, "opencv-c", crop=True)
        b = distance_transform(blobs, "opencv-c", crop=False)
        assert np.array_equal(a, b)
        for part in range(1, 4):
            labels, ids, _ = connected_parts(blobs)
            if len(ids) >= part:
                one = labels == ids[part - 1]
                assert np.array_equal(distance_transform(one, crop=True), distance_transform(one, crop=False))


def test_dt_backend_restores_the_ipp_setting():
    before = cv2.ipp.useIPP()
    m = rect((20, 20), 3, 3, 12, 15)
    distance_transform(m, "opencv-c")
    assert cv2.ipp.useIPP() == before
    distance_transform(m, "opencv-ipp")
    assert cv2.ipp.useIPP() == before
    with pytest.raises(ValueError, match="dt backend"):
        distance_transform(m, "scipy")


def test_legacy_randint_of_one_makes_no_draw():
    """Why interior points skip the draw when n == 1: the legacy RNG does not move either."""
    a = np.random.RandomState(1)
    assert a.randint(0, 1) == 0
    assert a.randint(0, 10) == np.random.RandomState(1).randint(0, 10)


# --------------------------------------------------------------------------- mazurowski


def test_mazurowski_single_rectangle_all_modes_agree():
    m = rect((10, 12), 2, 3, 6, 7)  # 5x5, centre (x=5, y=4)
    modes = by_mode(MazurowskiProtocol().prompts(m))
    assert list(modes) == [1, 2, 3, 4, 5]
    assert pts(modes[1]) == pts(modes[2]) == [(5, 4)]
    assert modes[1].point_labels == [1]
    assert bxs(modes[3]) == bxs(modes[4]) == bxs(modes[5]) == [(3, 2, 7, 6)]
    assert modes[1].info["tie_candidates"] == [1] and modes[1].info["n_parts"] == 1
    assert modes[3].points == [] and modes[1].boxes == []


def multi_part_mask():
    m = np.zeros((30, 30), np.uint8)
    rect(m.shape, 2, 2, 6, 6, into=m)  # 5x5 = 25 px, centre (4, 4)
    rect(m.shape, 10, 20, 12, 22, into=m)  # 3x3 = 9 px, centre (21, 11)
    rect(m.shape, 20, 5, 21, 6, into=m)  # 2x2 = 4 px: 4 tied pixels
    m[29, 29] = 1  # 1 px, only in mode 5
    return m


def test_mazurowski_multiple_parts_three_largest_and_whole_mask_box():
    modes = by_mode(MazurowskiProtocol().prompts(multi_part_mask()))
    assert pts(modes[1]) == [(4, 4)]
    two_by_two = [(5, 20), (6, 20), (5, 21), (6, 21)]  # (x, y), row-major
    stream = np.random.RandomState(1)  # only the 2x2 part ties: one draw, made at mode 2's third point
    assert pts(modes[2]) == [(4, 4), (21, 11), two_by_two[stream.randint(0, 4)]]
    assert modes[2].point_labels == [1, 1, 1]
    assert modes[2].info["tie_candidates"] == [1, 1, 4]
    assert bxs(modes[3]) == [(2, 2, 6, 6)]
    assert bxs(modes[4]) == [(2, 2, 6, 6), (20, 10, 22, 12), (5, 20, 6, 21)]
    assert bxs(modes[5]) == [(2, 2, 29, 29)]  # the 1-pixel part counts
    assert modes[5].info["n_parts"] == 4


def test_mazurowski_draw_order_mode1_then_each_mode2_point():
    m = rect((8, 8), 3, 3, 4, 4)  # one 2x2 part: 4 ties, so two draws
    cands = [(3, 3), (4, 3), (3, 4), (4, 4)]
    stream = np.random.RandomState(1)
    expected1, expected2 = cands[stream.randint(0, 4)], cands[stream.randint(0, 4)]
    pset = mazurowski_prompt_set(m, np.random.RandomState(1))
    assert pset.mode1_points == [expected1] and pset.mode2_points == [expected2]
    assert pset.tie_candidates == {"mode1": [4], "mode2": [4]}
    # no RNG: row-major first
    assert mazurowski_prompt_set(m, None).mode1_points == [(3, 3)]


def test_mazurowski_equal_sizes_take_the_later_part_first():
    m = np.zeros((12, 12), np.uint8)
    rect(m.shape, 1, 1, 3, 3, into=m)  # first in raster order
    rect(m.shape, 7, 6, 9, 8, into=m)  # same size, later
    modes = by_mode(MazurowskiProtocol().prompts(m))
    assert bxs(modes[3]) == [(6, 7, 8, 9)]
    assert pts(modes[1]) == [(7, 8)]
    assert bxs(modes[4]) == [(6, 7, 8, 9), (1, 1, 3, 3)]


def test_mazurowski_single_pixel_and_empty_mask():
    m = np.zeros((6, 6), np.uint8)
    m[0, 0] = 1
    modes = by_mode(MazurowskiProtocol().prompts(m))
    assert pts(modes[1]) == [(0, 0)] and bxs(modes[5]) == [(0, 0, 0, 0)]
    empty = MazurowskiProtocol().prompts(np.zeros((6, 6), np.uint8), target_labels=[1])
    assert len(empty) == 5 and all(p.is_empty and p.info["empty"] for p in empty)
    assert [p.info["mode"] for p in empty] == [1, 2, 3, 4, 5]
    assert MazurowskiProtocol().prompts(np.zeros((6, 6), np.uint8)) == []  # no labels present, nothing asked
    assert mazurowski_prompt_set(np.zeros((3, 3)), np.random.RandomState(1)).empty


def test_mazurowski_same_seed_same_prompts_and_seed_only_moves_ties():
    m = multi_part_mask()
    rect(m.shape, 24, 14, 25, 15, into=m)  # another tie-prone 2x2 part (not in the 3 largest)
    a = MazurowskiProtocol(seed=1).prompts(m)
    assert prompts_to_json(a) == prompts_to_json(MazurowskiProtocol(seed=1).prompts(m))
    for seed in range(2, 12):
        b = by_mode(MazurowskiProtocol(seed=seed).prompts(m))
        for p in a:
            q = b[p.info["mode"]]
            assert p.boxes == q.boxes
            for point_a, point_b, n in zip(p.points, q.points, p.info.get("tie_candidates", [])):
                if n == 1:
                    assert point_a == point_b


def test_mazurowski_modes_option_and_multi_label_order():
    lab = np.zeros((20, 20), np.uint8)
    rect(lab.shape, 1, 1, 4, 4, value=2, into=lab)
    rect(lab.shape, 10, 10, 14, 14, value=1, into=lab)
    prompts = MazurowskiProtocol(modes=(3, 1)).prompts(lab)
    assert [(p.target_label, p.info["mode"]) for p in prompts] == [(1, 3), (1, 1), (2, 3), (2, 1)]
    # asking for fewer modes does not change a mode's point
    full = by_mode(MazurowskiProtocol().prompts(lab, target_labels=[1]))
    assert prompts[1].points == full[1].points


def test_mazurowski_shared_stream_advances_only_on_ties():
    tie = rect((8, 8), 3, 3, 4, 4)
    shared = MazurowskiProtocol(seeding="shared", modes=(1,))
    first = shared.prompts(tie)[0].points
    second = shared.prompts(tie)[0].points
    stream = np.random.RandomState(1)
    cands = [(3.0, 3.0), (4.0, 3.0), (3.0, 4.0), (4.0, 4.0)]
    assert first == [cands[stream.randint(0, 4)]]
    stream.randint(0, 4)  # the mode-2 draw of the first call
    assert second == [cands[stream.randint(0, 4)]]
    shared.reset()
    assert shared.prompts(tie)[0].points == first


def test_mazurowski_on_a_volume_studies_slices():
    vol = np.zeros((6, 10, 10), np.uint8)
    rect((10, 10), 2, 2, 6, 6, value=1, into=vol[1])
    rect((10, 10), 2, 2, 6, 6, value=1, into=vol[4])
    rect((10, 10), 0, 0, 1, 1, value=2, into=vol[1])
    prompts = MazurowskiProtocol(modes=(5,)).prompts(vol, kind="volume", target_labels=[1, 2, 3])
    assert [(p.slice_index, p.target_label) for p in prompts] == [(1, 1), (1, 2), (4, 1), (None, 3)]
    assert prompts[-1].info["empty"]
    key = MazurowskiProtocol(modes=(5,), slices="key").prompts(vol, kind="volume")
    # label 1: middle of 1..4 is slice 2, empty -> the nearest slice holding it, 1
    assert [(p.slice_index, p.target_label) for p in key] == [(1, 1), (1, 2)]


def test_mazurowski_label_map_reading_rule():
    gray = np.array([[0, 255, 254], [128, 255, 0]], np.uint8)
    assert mazurowski_label_map(gray).tolist() == [[0, 1, 0], [0, 1, 0]]  # only exact 255 survives
    multi = np.array([[0, 1, 2]], np.uint8)
    assert mazurowski_label_map(multi).tolist() == [[0, 1, 2]]


# --------------------------------------------------------------------------- iterative


def test_next_point_false_negative_false_positive_and_done():
    gt = rect((30, 30), 5, 5, 11, 11)  # 7x7, centre (8, 8)
    assert next_point(gt, np.zeros_like(gt)) == (8, 8, 1, 1)
    pred = gt.copy()
    rect(pred.shape, 20, 18, 24, 22, into=pred)  # a 5x5 false positive, centre (20, 22)
    assert next_point(gt, pred) == (20, 22, 0, 1)
    assert next_point(gt, gt) is None


def test_iterate_refeeds_all_points_and_stops_on_an_empty_error_region():
    gt = np.zeros((30, 30), np.uint8)
    rect(gt.shape, 2, 2, 8, 8, into=gt)  # 7x7 part, centre (5, 5)
    rect(gt.shape, 20, 20, 24, 24, into=gt)  # 5x5 part, centre (22, 22)
    seen = []

    def backend(points, labels):
        seen.append((points.copy(), labels.copy()))
        return gt if len(seen) >= 2 else rect(gt.shape, 2, 2, 8, 8)  # first: only the big part

    run = iterate(backend, gt, n_steps=5, seed=1)
    assert run.stopped == "empty error region" and len(run) == 2
    assert seen[0][0].tolist() == [[5.0, 5.0]]
    assert seen[1][0].tolist() == [[5.0, 5.0], [22.0, 22.0]] and seen[1][1].tolist() == [1, 1]
    assert run[1].prompt.info["step"] == 1 and run[1].prompt.protocol == "iterative-points"
    assert np.array_equal(run[-1].prediction, gt.astype(bool))
    # first point: interior point of the whole mask (all parts), not of the largest part only
    two = rect((9, 30), 2, 2, 6, 6)
    rect(two.shape, 1, 20, 7, 26, into=two)  # the larger part is on the right
    assert iterate(lambda p, lab: two, two, 1)[0].prompt.points == [(23.0, 4.0)]


def test_iterate_n_steps_and_empty_ground_truth():
    gt = rect((10, 10), 2, 2, 6, 6)
    calls = []
    run = iterate(lambda p, lab: calls.append(1) or np.zeros_like(gt), gt, n_steps=3)
    assert len(calls) == 3 and len(run) == 3 and run.stopped == "n_points reached"
    assert run[2].prompt.point_labels == [1, 1, 1]
    empty = iterate(lambda p, lab: np.zeros((4, 4)), np.zeros((4, 4)), 3)
    assert len(empty) == 0 and empty.stopped == "empty ground truth"
    with pytest.raises(ValueError, match="shape"):
        iterate(lambda p, lab: np.zeros((3, 3)), gt, 2)


def test_iterative_protocol_first_prompts_and_same_seed():
    gt = rect((12, 12), 3, 3, 4, 6)  # 2x4: ties
    protocol = IterativePointsProtocol(n_points=2)
    a = protocol.prompts(gt)
    assert a[0].point_labels == [1] and a[0].info["tie_candidates"][0] > 1
    assert prompts_to_json(a) == prompts_to_json(IterativePointsProtocol(n_points=2).prompts(gt))
    run = protocol.iterate(lambda p, lab: np.zeros_like(gt), gt)
    assert run[0].prompt.points == a[0].points and len(run) == 2
    assert protocol.prompts(np.zeros((5, 5), np.uint8), target_labels=[1])[0].info["empty"]


# --------------------------------------------------------------------------- medsam2 / litemedsam


def test_medsam2_middle_largest_margin_and_gaps():
    vol = np.zeros((9, 20, 20), np.uint8)
    for z, (a, b) in {2: (5, 6), 3: (4, 8), 4: (5, 7), 5: (3, 12), 6: (6, 7)}.items():
        rect((20, 20), a, a, b, b, into=vol[z])
    p = MedSAM2Protocol().prompts(vol, kind="volume")[0]
    assert p.slice_index == 2 + (6 - 2) // 2 == 4
    assert bxs(p) == [(5, 5, 7, 7)] and p.info["z_range"] == [2, 6]
    assert MedSAM2Protocol(key_slice="largest").prompts(vol, kind="volume")[0].slice_index == 5
    assert bxs(MedSAM2Protocol(margin=4).prompts(vol, kind="volume")[0]) == [(1, 1, 11, 11)]
    wide = MedSAM2Protocol(margin=5, key_slice="largest").prompts(vol, kind="volume")[0]
    assert bxs(wide) == [(0, 0, 17, 17)]  # clipped at the image edge
    gap = np.zeros((7, 8, 8), np.uint8)
    gap[1, 2, 2] = gap[5, 3, 3] = 1
    g = MedSAM2Protocol().prompts(gap, kind="volume")[0]
    assert g.slice_index == 1 and g.info["key_slice_fallback"] and g.info["key_slice_middle"] == 3


def test_medsam2_video_first_frame_rules_and_image():
    video = np.zeros((5, 10, 10), np.uint8)
    rect((10, 10), 2, 3, 4, 6, into=video[2])
    rect((10, 10), 1, 1, 8, 8, into=video[3])
    p = MedSAM2Protocol().prompts(video, kind="video")[0]
    assert p.slice_index == 2 and bxs(p) == [(3, 2, 6, 4)]
    frame0 = MedSAM2Protocol(video_frame="first").prompts(video, kind="video")[0]
    assert frame0.slice_index == 0 and frame0.is_empty and frame0.info["empty_key_frame"]
    image = MedSAM2Protocol().prompts(video[3])[0]
    assert image.slice_index is None and bxs(image) == [(1, 1, 8, 8)]
    absent = MedSAM2Protocol().prompts(video, kind="video", target_labels=[1, 4])
    assert [q.target_label for q in absent] == [1, 4] and absent[1].info["empty"]


def test_litemedsam_3d_box_uses_the_xy_extent_on_the_middle_slice():
    vol = np.zeros((10, 20, 20), np.uint8)
    rect((20, 20), 2, 2, 5, 5, into=vol[1])
    rect((20, 20), 8, 9, 12, 14, into=vol[4])
    rect((20, 20), 3, 4, 4, 6, into=vol[6])
    p = LiteMedSAM3DBoxProtocol().prompts(vol, kind="volume")[0]
    assert p.info["box_3d"] == [2, 2, 1, 14, 12, 6]
    assert p.slice_index == int((6 - 1) / 2 + 1) == 3
    assert bxs(p) == [(2, 2, 14, 12)] and p.info["key_slice_empty"]  # slice 3 holds nothing
    single = np.zeros((4, 8, 8), np.uint8)
    single[2, 1:3, 1:4] = 1
    s = LiteMedSAM3DBoxProtocol().prompts(single, kind="volume")[0]
    assert s.slice_index == 2 and s.info["single_slice"] and s.info["box_3d"] == [1, 1, 2, 3, 2, 2]
    assert bxs(LiteMedSAM3DBoxProtocol().prompts(single[2])[0]) == [(1, 1, 3, 2)]
    with pytest.raises(ValueError, match="not for a video"):
        LiteMedSAM3DBoxProtocol().prompts(vol, kind="video")


# --------------------------------------------------------------------------- box jitter


def test_box_jitter_zero_is_the_medsam2_box_and_seeds_repeat():
    vol = np.zeros((5, 40, 40), np.uint8)
    rect((40, 40), 10, 12, 20, 30, into=vol[2])
    base = MedSAM2Protocol().prompts(vol, kind="volume")
    assert BoxJitterProtocol(shift_frac=0, scale_frac=0).prompts(vol, kind="volume")[0].boxes == base[0].boxes
    a = BoxJitterProtocol(seed=3, shift_frac=0.2, scale_frac=0.2).prompts(vol, kind="volume")
    b = BoxJitterProtocol(seed=3, shift_frac=0.2, scale_frac=0.2).prompts(vol, kind="volume")
    assert prompts_to_json(a) == prompts_to_json(b)
    others = {BoxJitterProtocol(seed=s, shift_frac=0.2, scale_frac=0.2).prompts(vol, kind="volume")[0].boxes[0] for s in range(8)}
    assert len(others) > 1
    assert a[0].slice_index == base[0].slice_index and a[0].info["base_box"] == [12, 10, 30, 20]
    # a sweep keeps the draws: only the magnitude changes
    small = BoxJitterProtocol(seed=3, shift_frac=0.05, scale_frac=0.05).prompts(vol, kind="volume")
    assert small[0].info["u"] == a[0].info["u"]


def test_jitter_box_fixed_magnitude_and_clipping():
    rng = np.random.default_rng(0)
    box, u = jitter_box((10, 10, 19, 29), (100, 100), rng, shift_frac=0.5, scale_frac=0.0, distribution="fixed")
    w, h = 10, 20
    assert set(np.abs(u)) == {1.0}
    assert box == (10 + int(u[0] * 0.5 * w), 10 + int(u[1] * 0.5 * h), 19 + int(u[0] * 0.5 * w), 29 + int(u[1] * 0.5 * h))
    edge, _ = jitter_box((0, 0, 9, 9), (10, 10), np.random.default_rng(1), 2.0, 0.5)
    assert all(0 <= v <= 9 for v in edge) and edge[0] <= edge[2] and edge[1] <= edge[3]


def test_box_jitter_depends_on_case_not_on_order():
    lab = rect((50, 50), 10, 10, 30, 30)
    p = BoxJitterProtocol(shift_frac=0.3)
    c1 = Case(np.zeros((50, 50), np.uint8), lab, Spacing.isotropic("yx"), "image", "case-1")
    c2 = Case(np.zeros((50, 50), np.uint8), lab, Spacing.isotropic("yx"), "image", "case-2")
    first = p.prompts(c1)[0].info["u"]
    assert p.prompts(c2)[0].info["u"] != first
    assert p.prompts(c1)[0].info["u"] == first


# --------------------------------------------------------------------------- registry, API, JSON


def test_registry_names_options_and_errors():
    assert set(PROTOCOLS) == {"medsam2", "medsam2-recist", "corrections", "litemedsam-3dbox", "mazurowski", "iterative-points",
                              "box-jitter", "replay", "cvpr25-interactive"}
    for name, cls in PROTOCOLS.items():
        protocol = build_protocol(name)
        assert isinstance(protocol, cls) and protocol.name == name
        assert "seed" in protocol.options() and cls.__doc__ and "Source" in cls.__doc__
        again = build_protocol(protocol.describe()["name"], **protocol.describe()["options"])
        assert again.describe() == protocol.describe()
    assert protocol_options("mazurowski")["seed"] == 1
    with pytest.raises(ValueError, match="unknown prompt protocol"):
        build_protocol("medsam3")
    with pytest.raises(TypeError, match="key_slcie"):
        build_protocol("medsam2", key_slcie="middle")
    with pytest.raises(ValueError, match="key_slice"):
        build_protocol("medsam2", key_slice="top")
    with pytest.raises(ValueError, match="modes"):
        build_protocol("mazurowski", modes=(0,))
    with pytest.raises(ValueError, match="seed"):
        build_protocol("box-jitter", seed=-1)


def test_sources_case_or_label_map():
    lab = np.zeros((4, 10, 10), np.uint8)
    rect((10, 10), 2, 2, 5, 5, into=lab[1])
    case = Case(np.zeros((4, 10, 10), np.uint8), lab, Spacing.isotropic("zyx"), "volume", "v")
    assert MedSAM2Protocol().prompts(case) == MedSAM2Protocol().prompts(lab, kind="volume")
    with pytest.raises(ValueError, match="kind"):
        MedSAM2Protocol().prompts(lab)  # 3D without a kind is ambiguous
    with pytest.raises(ValueError, match="kind="):
        MedSAM2Protocol().prompts(case, kind="video")
    with pytest.raises(ValueError, match="no label"):
        MedSAM2Protocol().prompts(Case(np.zeros((4, 4)), None, Spacing.isotropic("yx"), "image", "x"))
    with pytest.raises(TypeError, match="integer"):
        MedSAM2Protocol().prompts(np.zeros((4, 4), np.float32))
    assert MedSAM2Protocol().prompts(lab.astype(bool), kind="volume")[0].target_label == 1


def test_every_protocol_json_round_trip():
    vol = np.zeros((5, 30, 30), np.uint8)
    rect((30, 30), 3, 3, 10, 12, value=1, into=vol[2])
    rect((30, 30), 20, 20, 21, 22, value=2, into=vol[3])
    for name in PROTOCOLS:
        prompts = build_protocol(name).prompts(vol, kind="volume", target_labels=[1, 2, 7])
        assert prompts and any(p.info.get("empty") for p in prompts)
        text = prompts_to_json(prompts)
        back = prompts_from_json(text)
        assert [p.to_dict() for p in back] == [p.to_dict() for p in prompts]
        assert prompts_to_json(back) == text
