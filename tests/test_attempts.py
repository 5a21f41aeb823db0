"""The attempt history behind Undo and Changes (core, no Qt), on a real hippocampus label map."""
from __future__ import annotations

import numpy as np

from napari_medsam_eval.session.attempts import ADDED, REMOVED, Attempt, AttemptHistory, mask_changes
from napari_medsam_eval.io import read_label


def test_undo_goes_back_one_attempt_of_any_object(shared_data):
    label = read_label(shared_data / "hippocampus_mri" / "labelsTr" / "hippocampus_015.nii.gz").array
    one, two = label == 1, label == 2
    grown = one.copy()
    grown[:, 1:, :] |= one[:, :-1, :]  # a second, larger attempt of object 1
    history = AttemptHistory()
    history.record(Attempt.of("hippo", 1, one, action="propagate", model="litemedsam"))
    history.record(Attempt.of("hippo", 2, two, action="segment slice"))
    history.record(Attempt.of("hippo", 1, grown, action="correct"))
    np.testing.assert_array_equal(history.attempts[-1].mask, grown)  # bit-packed, unpacked alike
    changes = history.changes("hippo", 1)
    assert (changes == ADDED).sum() == (grown & ~one).sum() > 0 and not (changes == REMOVED).any()
    attempt, before = history.undo()
    assert attempt.action == "correct" and attempt.target_label == 1
    np.testing.assert_array_equal(before, one)  # object 1's previous attempt, not object 2's
    attempt, before = history.undo()
    assert attempt.target_label == 2 and not before.any()  # object 2 had no earlier attempt
    attempt, before = history.undo()
    assert attempt.target_label == 1 and not before.any()
    assert history.undo() is None and history.changes("hippo", 1) is None


def test_history_keeps_the_latest_attempts_and_changes_check_shapes():
    history = AttemptHistory(limit=3)
    masks = [np.eye(4, dtype=bool) * (i % 2 == 0) for i in range(5)]
    for i, mask in enumerate(masks):
        history.record(Attempt.of("img", 1, mask, action=f"attempt {i}"))
    assert [a.action for a in history.attempts] == ["attempt 2", "attempt 3", "attempt 4"]
    assert "label 1" in history.attempts[0].describe() and "4 pixels" in history.attempts[0].describe()
    try:
        mask_changes(np.zeros((2, 2)), np.zeros((3, 3)))
    except ValueError as exc:
        assert "different shapes" in str(exc)
    else:
        raise AssertionError("shapes were not checked")


def test_two_identical_attempts_are_two_attempts():
    """The same box segmented twice gives two attempts with equal masks: Undo and Changes tell them
    apart by identity (a generated ``__eq__`` compared the packed masks by array truth and raised)."""
    mask = np.zeros((3, 8, 8), dtype=bool)
    mask[1, 2:6, 2:6] = True
    history = AttemptHistory()
    first = history.record(Attempt.of("img", 1, mask, action="segment slice", prompt={"boxes": [[2, 2, 5, 5]]}))
    second = history.record(Attempt.of("img", 1, mask, action="segment slice", prompt={"boxes": [[2, 2, 5, 5]]}))
    assert first != second and first.when <= second.when
    assert not history.changes("img", 1).any()  # the second changed nothing
    attempt, before = history.undo()
    assert attempt is second
    np.testing.assert_array_equal(before, mask)  # back to the first attempt's mask
    attempt, before = history.undo()
    assert attempt is first and not before.any()


def test_each_image_has_its_own_undo():
    """Issue 42: Undo on one image goes back one attempt of that image; another image's stay."""
    mask = np.zeros((3, 8, 8), dtype=bool)
    mask[1, 2:6, 2:6] = True
    history = AttemptHistory()
    ct = history.record(Attempt.of("ct", 1, mask, action="propagate"))
    mr = history.record(Attempt.of("mr", 2, mask, action="propagate"))
    attempt, before = history.undo("ct")
    assert attempt is ct and not before.any() and history.attempts == [mr]
    assert history.undo("ct") is None and history.attempts == [mr]
    assert history.undo()[0] is mr  # no image named: the last attempt of any
