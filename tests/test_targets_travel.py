"""A target travels (issue 68): a prompt, a result, a row and a score know their ``Target``, and the API's
documented path scores a region by its labels, never by the key its prompts carry.

Real data read in place (``hippocampus_mri``: labels 1 anterior, 2 posterior); the model is the ``box`` baseline
(no network), so each test takes a second or less.
"""
from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest

from napari_medsam_eval import api
from napari_medsam_eval.core.errors import InputTypeError
from napari_medsam_eval.core.targets import Target

HIPPO = "hippocampus_mri"
CASE = "hippocampus_001"


@pytest.fixture(scope="module")
def case(shared_data):
    root = shared_data / HIPPO
    return api.read_case(root / "imagesTr" / f"{CASE}.nii.gz", root / "labelsTr" / f"{CASE}.nii.gz")


def _empty_truth_warning() -> type[Warning]:
    from napari_medsam_eval.evaluation.pair_scores import EmptyTruthWarning

    return EmptyTruthWarning


def _dice(a: np.ndarray, b: np.ndarray) -> float:
    return 2.0 * np.count_nonzero(a & b) / (np.count_nonzero(a) + np.count_nonzero(b))


def test_a_region_prompt_carries_its_target_and_the_documented_path_scores_its_labels(case):
    [prompt] = api.protocol_prompts(case, "medsam2", targets=["whole=1,2"])
    assert prompt.target == Target("whole", (1, 2)) and prompt.target.labels == (1, 2)
    assert prompt.target_label not in case.label_values()  # the key: no label of the case
    assert "whole" in repr(prompt) and "target_label" not in repr(prompt)  # the key is not shown
    result = api.open_session(case, "box").propagate(prompt)
    assert result.prompt.target == prompt.target  # the result knows its target
    truth = np.isin(case.label, (1, 2))
    expected = _dice(np.asarray(result.mask, bool), truth)
    assert 0.0 < expected < 1.0  # the box baseline: a rough mask, so DSC says something
    with warnings.catch_warnings():
        warnings.simplefilter("error", _empty_truth_warning())
        from_result = api.score_pair(result, case=case)  # the result's prompt's target, the case's kind and spacing
        named = api.score_pair(result.mask, case=case, target="whole=1,2")
    assert math.isclose(from_result.dice, expected) and math.isclose(named.dice, expected)
    assert from_result.target == prompt.target and named.target.labels == (1, 2)
    assert from_result["gt_voxels"] == int(truth.sum())
    assert repr(from_result).startswith("PairScores(target=whole (labels 1, 2), dice=")


def test_the_old_path_with_the_key_warns_naming_what_to_do(case):
    [prompt] = api.protocol_prompts(case, "medsam2", targets=["whole=1,2"])
    mask = prompt.target.mask(case.label)
    with pytest.warns(_empty_truth_warning(), match=r"truth mask is empty while the prediction has \d+ voxels.*"
                                               r"target=prompt\.target"):
        old = api.score_pair(mask, case.label == prompt.target_label, case.kind, case.spacing)
    assert old.dice == 0.0 and old.target is None
    # a target the case does not hold, through the new path: the warning names it and the labels held
    with pytest.warns(_empty_truth_warning(), match=r"target tail \(label 7\) is empty.*holds labels 1, 2"):
        api.score_pair(mask, case=case, target="tail=7")


def test_a_plain_label_and_a_label_map_with_a_target_score_as_before(case):
    mask = case.label == 2
    old = api.score_pair(mask, case.label == 2, case.kind, case.spacing)
    by_value = api.score_pair(mask, case=case, target=2)
    by_map = api.score_pair(mask, case.label, case.kind, case.spacing, target=2)
    assert old.dice == by_value.dice == by_map.dice == 1.0
    assert by_value.target == Target("label_2", (2,)) or by_value.target.labels == (2,)
    assert old.to_dict() == by_value.to_dict()  # the same row; the target beside it
    restored = pickle.loads(pickle.dumps(by_value))
    assert restored.target == by_value.target and restored.dice == by_value.dice and set(restored) == set(by_value)


def test_swapped_kind_and_spacing_and_a_missing_truth_say_what_to_give(case):
    mask = case.label == 1
    with pytest.raises(InputTypeError, match=r"takes kind then spacing"):
        api.score_pair(mask, mask, case.spacing, case.kind)
    with pytest.raises(InputTypeError, match=r"case=case, target=prompt\.target"):
        api.score_pair(mask, case=case)
    with pytest.raises(InputTypeError, match=r"kind and spacing"):
        api.score_pair(mask, mask)


def test_every_protocol_prompt_carries_its_target_lesions_and_labels_named(case):
    by_label = api.protocol_prompts(case, "medsam2")
    assert [p.target.labels for p in by_label] == [(1,), (2,)]
    assert all(p.target.value == p.target_label for p in by_label)
    lesions = api.protocol_prompts(case, "medsam2", targets=["anterior=1:lesions"])
    assert lesions and all(p.target.lesions and p.target.name == "anterior" for p in lesions)
    hand = api.Prompt(Target("whole", (1, 2)), slice_index=17, boxes=[(9, 31, 27, 44)])
    assert hand.target.labels == (1, 2) and hand.target_label == 3  # a key above every label it names
    again = api.Prompt.from_dict(hand.to_dict(target=True))
    assert again.target == hand.target and "target" not in hand.to_dict()  # a row's prompt JSON is unchanged


def test_rows_carry_their_target(shared_data, tmp_path):
    table = api.run_benchmark(api.RunConfig(shared_data / HIPPO, tmp_path / "run", model="box", limit=1,
                                            targets=("whole=1,2", "tail=2:lesions")))
    targets = {t.name: t for t in table["target"]}
    assert targets["whole"] == Target("whole", (1, 2)) and targets["tail"].lesions
