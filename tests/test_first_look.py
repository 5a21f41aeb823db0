"""A quick first look through the session (no GUI): LiteMedSAM at a cheaper precision first, fp32 once
encoded ahead.

Real data and the real LiteMedSAM: the 13-slice DeepLesion CT npz. The cheaper precision is bf16 where
this CPU computes bf16, else int8 (:mod:`cheaper_precision`). Encoding ahead with a first look embeds
every slice at the cheaper precision, then at fp32; a propagation in between is the first look's (the
mask of a plain session at that precision, and it says so), one after both passes is fp32's (the mask
of a plain fp32 session). On this case the precisions' masks differ (bf16 by about a hundred voxels),
so the equalities below tell which backend made each mask.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from cheaper_precision import cheaper_precision
from deeplesion_cases import lesion_case
from napari_medsam_eval.models.base import made_by
from napari_medsam_eval.session.encode_ahead import iter_encode_ahead, nearest_first
from napari_medsam_eval.session.first_look import FirstLook, choose_backend
from napari_medsam_eval.session.session import Session

pytestmark = pytest.mark.slow

CASE = "CT_Lesion_000002_03_01_035-047"


@pytest.fixture(scope="module")
def fp32():
    return Session.build_backend("litemedsam", device="cpu")


@pytest.fixture(scope="module")
def cheap(shared_data):
    """The first look's backend: LiteMedSAM at bf16 where this CPU computes bf16, else at int8 (a CPU
    without bf16 refuses bf16), calibrated on the 5 SAM-Med2D CT slices (quick; not the evaluated data)."""
    return Session.build_backend("litemedsam", device="cpu", **cheaper_precision(shared_data))


@pytest.fixture(scope="module")
def lesion(shared_data):
    case, prompt, _truth, _ref = lesion_case(shared_data, CASE)
    return case, prompt


def _session(backend, case, image_id=CASE) -> Session:
    session = Session(backend)
    session.set_image(case.image, kind=case.kind, modality=case.modality, image_id=image_id)
    return session


def test_the_choice_of_backend():
    main, first = object(), object()
    assert choose_backend(main, None, False, False) == (main, False)  # no first look
    assert choose_backend(main, None, True, True) == (main, False)
    assert choose_backend(main, first, False, False) == (main, False)  # the first look is not ready
    assert choose_backend(main, first, False, True) == (first, True)  # the quick first look
    assert choose_backend(main, first, True, True) == (main, False)  # the reference has caught up
    assert choose_backend(main, first, True, False) == (main, False)


def test_encoded_slices_are_kept_per_image_and_backend():
    main, first = object(), object()
    look = FirstLook()
    look.set(first)
    for z in range(3):
        look.mark("a", first, z)
    look.mark("a", main, 0)
    assert look.encoded("a", first) == {0, 1, 2} and look.encoded("b", first) == set()
    assert look.complete("a", first, 3) and not look.complete("a", first, 4) and not look.complete("a", main, 3)
    assert look.choose(main, "a", 3)[0] is first and look.choose(main, "a", 4)[0] is main
    look.set(object())  # another first look: what the old one encoded is forgotten, the model's is kept
    assert look.encoded("a", first) == set() and look.encoded("a", main) == {0}
    look.drop()
    assert look.backend is None and look.encoded("a", main) == set()


def test_a_first_look_then_the_reference(fp32, cheap, lesion):
    case, prompt = lesion
    session = _session(fp32, case)
    session.set_first_look(cheap)
    n = session.n_slices
    assert session.propagate(prompt).made_by == "litemedsam fp32"  # nothing encoded ahead yet: the model's own

    cancel = threading.Event()
    steps = []
    for step in iter_encode_ahead(session, prompt.slice_index, cancel=cancel):
        steps.append(step)
        if step[0] == n + 3:  # three slices into the fp32 pass
            cancel.set()
    assert steps == [(done, 2 * n) for done in range(1, n + 4)]  # both passes counted; stopped after the slice
    assert session.first_look.encoded(session.image_id, cheap) == set(range(n))
    fp32_done = session.first_look.encoded(session.image_id, fp32)
    assert fp32_done == set(nearest_first(n, prompt.slice_index)[:3])
    assert all(cheap.is_cached(session.cache_key(z)) for z in range(n))

    first = session.propagate(prompt)
    assert first.made_by == f"litemedsam {cheap.precision} (first look)" and not first.cancelled
    assert session.segment_slice(prompt).made_by == f"litemedsam {cheap.precision} (first look)"
    assert session.anchors() == [prompt]  # the first look's anchors are the session's
    plain_cheap = _session(cheap, case, "plain").propagate(prompt)
    assert plain_cheap.made_by == f"litemedsam {cheap.precision}"
    np.testing.assert_array_equal(first.mask, plain_cheap.mask)

    for _step in iter_encode_ahead(session, prompt.slice_index):  # both passes to the end (the first look's: cache hits)
        pass
    assert session.first_look.encoded(session.image_id, fp32) == set(range(n))
    reference = session.propagate(prompt)
    assert reference.made_by == "litemedsam fp32" == made_by(fp32)
    plain_fp32 = _session(fp32, case, "plain").propagate(prompt)
    np.testing.assert_array_equal(reference.mask, plain_fp32.mask)
    assert (reference.mask != first.mask).any()  # the two precisions disagree here: the equalities above tell
    assert session.segment_slice(prompt).made_by == "litemedsam fp32"


def test_the_first_look_goes_with_the_image_or_the_model(fp32, cheap, lesion):
    case, _prompt = lesion
    session = _session(fp32, case)
    session.set_first_look(cheap)
    for z in range(session.n_slices):
        session.first_look.mark(session.image_id, cheap, z)
    assert session.segmenter() == (cheap, f"litemedsam {cheap.precision} (first look)")

    session.set_image(case.image[:5].copy(), kind=case.kind, modality=case.modality, image_id="other")
    assert session.first_look.backend is None and session.segmenter() == (fp32, "litemedsam fp32")

    session.set_first_look(cheap)
    session.set_backend(fp32)  # the model set again (a GUI's Load model): the first look goes too
    assert session.first_look.backend is None

    session.use_image(case.image[:3].copy(), kind=case.kind, modality=case.modality, image_id="third")
    session.set_first_look(cheap)  # prepares the named image first: the first look is for it
    assert session.image_name == "third" and session.first_look.backend is cheap
    for _step in iter_encode_ahead(session, 0):
        pass
    assert session.segmenter()[0] is fp32  # both passes ended
    session.set_first_look(None)
    assert session.first_look.backend is None and session.segmenter() == (fp32, "litemedsam fp32")
