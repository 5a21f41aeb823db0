"""Corrections through the session (no GUI): propagate, correct the worst slice, cancel.

Real data and the real LiteMedSAM: a 13-slice DeepLesion CT npz whose propagation from
the ``medsam2`` key-slice box misses part of the lesion, so some slice is clearly wrong.
The slices are encoded once (the backend caches them under the session's image id); the
corrections after that run the decoder only.
"""
from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from napari_medsam_eval.evaluation.metrics import compute_dice
from napari_medsam_eval.core.prompt import Prompt
from deeplesion_cases import lesion_case
from napari_medsam_eval.protocols.geometry import tight_box
from napari_medsam_eval.session.session import Session

CASE = "CT_Lesion_000010_01_01_078-090"


@pytest.fixture(scope="module")
def backend():
    return Session.build_backend("litemedsam", device="cpu")


@pytest.fixture(scope="module")
def lesion(shared_data):
    """The case, its first ``medsam2`` prompt and that target's ground truth (bool)."""
    return lesion_case(shared_data, CASE)[:3]


@pytest.fixture(scope="module")
def session(backend, lesion):
    case, _prompt, _truth = lesion
    session = Session(backend)
    session.set_image(case.image, kind=case.kind, modality=case.modality, image_id=CASE)
    return session


def worst_slice(mask: np.ndarray, truth: np.ndarray, skip: int) -> int:
    """The slice with the most false positives plus false negatives, ``skip`` left out."""
    errors = (mask != truth).reshape(len(truth), -1).sum(axis=1)
    errors[skip] = -1
    return int(np.argmax(errors))


def box_fix(truth: np.ndarray, k: int, label: int) -> Prompt:
    """What a user draws on a wrong slice: the ground truth's tight box there."""
    box = tight_box(truth[k])
    assert box is not None, f"the target is absent on slice {k}: pick a case where it is not"
    return Prompt(label, slice_index=k, boxes=[box], protocol="manual")


@pytest.mark.slow
def test_correction_fixes_the_worst_slice_and_keeps_the_anchor(session, lesion):
    case, prompt, truth = lesion
    z0 = prompt.slice_index
    assert session.anchors() == []
    first = session.propagate(prompt)
    assert not first.cancelled and session.anchors() == [prompt]
    before = first.mask.copy()
    k = worst_slice(before, truth, skip=z0)
    fix = box_fix(truth, k, prompt.target_label)

    # cancelled corrections: the mask and the anchors stay as they were
    token = threading.Event()
    token.set()
    preset = session.correct(fix, cancel=token)
    assert preset.cancelled and preset.done == 0
    np.testing.assert_array_equal(preset.mask, before)
    stopping = threading.Event()
    steps: list[tuple[int, int]] = []
    mid_run = session.correct(fix, progress=lambda done, total: (steps.append((done, total)), stopping.set()),
                              cancel=stopping)
    assert mid_run.cancelled and steps and session.anchors() == [prompt]
    np.testing.assert_array_equal(mid_run.mask, before)
    generator = session.iter_correct(fix)
    assert next(generator)[0] >= 1
    generator.close()  # the GUI aborting its worker
    assert session.cancel_requested

    # the correction (waits for the closed run's slice on the session's lock)
    result = session.correct(fix)
    assert not result.cancelled and result.mask.shape == truth.shape
    assert compute_dice(result.mask[k], truth[k]) > compute_dice(before[k], truth[k])
    np.testing.assert_array_equal(result.mask[z0], before[z0])  # the first anchor's slice is kept
    beyond = slice(z0 + 1, None) if k < z0 else slice(0, z0)  # past the first anchor, away from the fix
    np.testing.assert_array_equal(result.mask[beyond], before[beyond])
    assert session.anchors() == sorted([prompt, fix], key=lambda p: p.slice_index)

    # the same correction as a generator: (done, total) steps, then the same mask
    again = Session(session.backend)
    again.set_image(case.image, kind=case.kind, modality=case.modality, image_id=CASE)
    again.propagate(prompt)
    steps = []
    generator = again.iter_correct(fix)
    while True:
        try:
            steps.append(next(generator))
        except StopIteration as stop:
            through_generator = stop.value
            break
    assert steps and steps[-1][0] == steps[-1][1] == through_generator.done
    np.testing.assert_array_equal(through_generator.mask, result.mask)


@pytest.mark.slow
def test_anchors_are_dropped_with_the_image_the_backend_or_another_target(session, lesion, backend):
    case, prompt, _truth = lesion
    session.propagate(prompt)
    assert session.anchors() == [prompt]
    # another target label (another object): its correction starts over from it; each object keeps its anchors
    other = dataclasses.replace(prompt, target_label=prompt.target_label + 1)
    result = session.correct(other)
    assert not result.cancelled and session.anchors() == [other] == session.anchors(other.target_label)
    assert session.anchors(prompt.target_label) == [prompt]
    session.drop_anchors(other.target_label)
    assert session.anchors(other.target_label) == [] and session.anchors(prompt.target_label) == [prompt]
    session.set_backend(backend, spec="same model, set again")
    assert session.anchors() == []
    session.propagate(prompt)
    session.set_image(case.image.copy(), kind=case.kind, modality=case.modality, image_id=CASE)
    assert session.anchors() == []
    # a 2D image has no anchors: a correction is one segmentation
    session.set_image(case.image[prompt.slice_index], kind="image", modality=case.modality, image_id="slice")
    flat = session.correct(dataclasses.replace(prompt, slice_index=None))
    assert flat.mask.shape == case.image.shape[1:] and flat.mask.any() and session.anchors() == []


def test_each_image_keeps_its_anchors_and_cache_id_across_a_switch():
    """Issue 42: another image set, then the first again: its anchors and image_id come back and a correction
    goes on from its propagation; another array under its name, or another backend, starts over (box model)."""
    box = Session.build_backend("box")
    ct = np.zeros((8, 32, 32), dtype=np.uint8)
    ct[1:7, 8:20, 8:20] = 200
    mr = np.zeros((5, 24, 24), dtype=np.uint8)
    prompt = Prompt(1, slice_index=2, boxes=[(8, 8, 19, 19)])
    fix = Prompt(1, slice_index=6, boxes=[(10, 10, 16, 16)])
    unswitched = Session(box)
    unswitched.set_image(ct, kind="volume", image_id="ct")
    unswitched.propagate(prompt)
    expected = unswitched.correct(fix).mask

    session = Session(box)
    session.set_image(ct, kind="volume", image_id="ct")
    propagated = session.propagate(prompt).mask
    ct_id = session.image_id
    session.set_image(mr, kind="volume", image_id="mr")
    session.propagate(Prompt(2, slice_index=1, boxes=[(2, 2, 9, 9)]))
    assert session.anchors(1) == [] and session.anchors(1, image="ct") == [prompt]
    session.set_image(ct, kind="volume", image_id="ct")
    assert session.image_id == ct_id and session.anchors(1) == [prompt] and session.anchors(2, image="mr")
    corrected = session.correct(fix).mask
    np.testing.assert_array_equal(corrected, expected)
    np.testing.assert_array_equal(corrected[prompt.slice_index], propagated[prompt.slice_index])

    session.set_image(mr, kind="volume", image_id="mr")
    session.set_backend(box, spec="the same model, set again")  # another backend: no kept anchors either
    assert session.anchors(1, image="ct") == []
    session.set_image(ct.copy(), kind="volume", image_id="ct")  # another array named ct: a new image
    assert session.image_id != ct_id and session.anchors(1) == []
    session.forget_image("mr")
    assert session.anchors(2, image="mr") == []
