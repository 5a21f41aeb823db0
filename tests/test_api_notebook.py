"""The public API as a notebook user meets it (issue 61): typed tables, short reprs, the exported types, clear
errors for the common mistakes, progress bars, masks written with their geometry, a report.

The real data are read in place (``hippocampus_mri``); the model is the ``box`` baseline (no network), so each
test takes a second or less.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import SimpleITK as sitk

from napari_medsam_eval import api
from napari_medsam_eval.core.errors import DataError, InputError, InputTypeError, MedsamEvalError
from napari_medsam_eval.core.reprs import REPR_LIMIT, one_line

HIPPO = "hippocampus_mri"
CASE = "hippocampus_001"


@pytest.fixture(scope="module")
def case(shared_data):
    root = shared_data / HIPPO
    return api.read_case(root / "imagesTr" / f"{CASE}.nii.gz", root / "labelsTr" / f"{CASE}.nii.gz")


@pytest.fixture(scope="module")
def run_table(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("api_notebook") / "run"
    table = api.run_benchmark(api.RunConfig(shared_data / HIPPO, out, model="box", limit=2))
    return out, table


# -- 1. short reprs -----------------------------------------------------------------------------------------------

def test_a_case_prints_in_one_short_line_whatever_its_size(case):
    text = repr(case)
    assert text.startswith(f"Case('{CASE}', volume 35x51x35 uint8") and "labels=[1, 2]" in text
    assert "spacing=(z=1, y=1, x=1)" in text and "modality=MR" in text and len(text) < 200
    big = api.Case(np.zeros((400, 512, 512), np.int16), (np.arange(400 * 512 * 512) % 200).astype(np.int32)
                   .reshape(400, 512, 512), api.Spacing.from_xyz((0.7, 0.7, 2.5)), "volume", "x" * 500, "CT" * 200)
    big_text = repr(big)
    assert len(big_text) <= REPR_LIMIT and "+191 more" in big_text and "400x512x512" in big_text
    assert "<table>" in case._repr_html_() and "array(" not in case._repr_html_()
    video = api.Case(np.zeros((5, 8, 9, 3), np.uint8), None, api.Spacing.isotropic("tyx"), "video", "clip")
    assert repr(video) == "Case('clip', video 5x8x9 (3 channels) uint8, spacing=(t=1, y=1, x=1), labels=none)"


def test_results_and_models_print_their_facts_not_their_arrays(case):
    session = api.open_session(case, "box")
    prompt = api.protocol_prompts(case, "medsam2", target_labels=[1])[0]
    result = session.propagate(prompt)
    text = repr(result)
    assert text.startswith("PropagationResult(35x51x35, ") and "voxels" in text and "stops=[up: " in text
    assert "made_by='box'" in text and len(text) < 200 and "array" not in text
    assert "stops" in result._repr_html_()
    one = session.segment_slice(prompt)
    assert repr(one).startswith("SegmentResult(51x35, ") and "pixels" in repr(one) and len(repr(one)) < 200
    assert repr(api.build_model("box")) == "BoxBackend(box)"
    per_slice = result.slice_dice(case.label == 1)
    assert per_slice.shape == (35,) and 0 <= np.nanmin(per_slice) <= np.nanmax(per_slice) <= 1
    assert np.isnan(api.PropagationResult(np.zeros((3, 4, 4), bool), prompt).slice_dice(np.zeros((3, 4, 4)))).all()


def test_the_litemedsam_repr_says_engine_precision_and_device_without_describe(monkeypatch):
    model = api.build_model("litemedsam", device="cpu")
    monkeypatch.setattr(type(model), "describe", lambda self: pytest.fail("repr must not call describe()"))
    text = repr(model)
    assert text.startswith("LiteMedSAMBackend(litemedsam, engine=") and "precision=fp32" in text
    assert "device=cpu" in text and len(text) < 200


def test_one_line_shortens_the_longest_part_first():
    line = one_line("Thing", ["a" * 300, "short"], {"key": "b" * 50})
    assert len(line) <= REPR_LIMIT and "short" in line and "key=" + "b" * 50 in line


# -- 2. the exported types ----------------------------------------------------------------------------------------

def test_the_return_types_are_exported_and_dir_lists_public_names_only(case):
    for name in ("Case", "Spacing", "PropagationResult", "SegmentResult", "SegmentationBackend", "PairScores"):
        assert name in api.__all__ and getattr(api, name).__name__ == name
    assert isinstance(case, api.Case) and isinstance(case.spacing, api.Spacing)
    assert isinstance(api.build_model("box"), api.SegmentationBackend)
    assert dir(api) == sorted(api.__all__)
    assert not {"Any", "Callable", "Path", "TYPE_CHECKING", "import_module"} & set(dir(api))


# -- 3. clear errors for the common mistakes ----------------------------------------------------------------------

def test_target_labels_as_one_int_says_it_takes_a_list(case):
    with pytest.raises(InputTypeError, match=r"target_labels takes a list of label values, e\.g\. "
                                             r"target_labels=\[1\]; got 1"):
        api.protocol_prompts(case, target_labels=1)
    with pytest.raises(InputTypeError, match="whole numbers"):
        api.protocol_prompts(case, target_labels=[1.5])


def test_one_box_or_point_not_in_a_list_says_what_it_takes():
    with pytest.raises(InputTypeError, match=r"boxes takes a list of \(x0, y0, x1, y1\) boxes, e\.g\. "
                                             r"boxes=\[\(9, 31, 27, 44\)\]; got \(9, 31, 27, 44\) "
                                             r"\(one box not in a list\?\)"):
        api.Prompt(target_label=1, slice_index=10, boxes=(9, 31, 27, 44))
    with pytest.raises(InputTypeError, match=r"points takes a list of \(x, y\) points.*one point not in a list"):
        api.Prompt(target_label=1, slice_index=10, points=(4, 5), point_labels=[1])
    with pytest.raises(InputTypeError, match=r"point_labels takes a list of labels.*point_labels=\[1\]; got 1"):
        api.Prompt(target_label=1, slice_index=10, points=[(4, 5)], point_labels=1)
    assert api.Prompt(target_label=1, slice_index=10, boxes=np.array([[9, 31, 27, 44]])).boxes == [(9, 31, 27, 44)]


def test_a_list_of_prompts_to_propagate_says_to_call_it_once_each(case):
    session = api.open_session(case, "box")
    prompts = api.protocol_prompts(case, target_labels=[1, 2])
    with pytest.raises(InputTypeError, match=r"Session\.propagate takes one Prompt, got a list of 2 prompts: "
                                             "call it once for each prompt"):
        session.propagate(prompts)
    with pytest.raises(InputTypeError, match=r"Session\.correct takes one Prompt"):
        session.correct(prompts)


def test_a_label_the_case_does_not_hold_names_the_labels_it_holds(case):
    with pytest.raises(InputError, match=fr"case {CASE} holds no label 7: it holds 1 \(anterior\), 2 \(posterior\)"):
        api.protocol_prompts(case, target_labels=[1, 7])
    from napari_medsam_eval.protocols import build_protocol  # a protocol itself gives an empty prompt (a run's rows)

    [empty] = build_protocol("medsam2").prompts(np.where(case.label == 2, 0, case.label), kind="volume",
                                                target_labels=[2])
    with pytest.raises(InputError, match="the prompt for label 2 is empty: its protocol found nothing") as caught:
        api.open_session(case, "box").propagate(empty)
    assert "slice_index" not in str(caught.value) and isinstance(caught.value, MedsamEvalError)


# -- 4. typed tables and scores -----------------------------------------------------------------------------------

def test_load_table_gives_python_objects_and_the_store_keeps_text(run_table):
    out, returned = run_table
    table = api.load_table(out)
    row = table.iloc[0]
    assert isinstance(row["slice_dice"], np.ndarray) and row["slice_dice"].dtype == float
    assert len(row["slice_dice"]) == row["n_slices"]
    assert isinstance(row["prompt"], list) and api.Prompt.from_dict(row["prompt"][0]).target_label == row["target_label"]
    assert isinstance(row["stops"], list) and {"direction", "reason"} <= set(row["stops"][0])
    assert isinstance(row["error_slices"], dict) and isinstance(row["attributes"], dict)
    assert isinstance(row["notes"], list) and isinstance(row["lesions"], list)
    assert isinstance(row["slice_scores"], np.ndarray) and isinstance(row["dice_after"], np.ndarray)
    assert str(table["gt_voxels"].dtype) == "Int64" and isinstance(row["gt_voxels"], (int, np.integer))
    assert table["dice"].dtype == float
    assert isinstance(returned.iloc[0]["slice_dice"], np.ndarray)  # run_benchmark's table is the same
    text = api.load_table(out, parsed=False)
    assert isinstance(text.iloc[0]["slice_dice"], str) and json.loads(text.iloc[0]["stops"]) == row["stops"]
    from napari_medsam_eval.benchmark.store import load_table as internal

    assert isinstance(internal(out).iloc[0]["prompt"], str)  # the package's own readers are unchanged
    assert len(api.lesion_table(out)) == 0  # reads the text table it needs


def test_json_cells_become_objects_null_as_nan_and_text_that_is_not_json_stays():
    from napari_medsam_eval.benchmark.parsed_table import parsed_table

    table = pd.DataFrame({"slice_dice": ["[null, 0.5]", "", "oops"], "notes": ['["constant image"]', "", "[]"],
                          "attributes": ['{"split": "train"}', "", "{}"], "dice": [0.5, np.nan, 1.0]})
    parsed = parsed_table(table)
    assert np.isnan(parsed.loc[0, "slice_dice"][0]) and parsed.loc[0, "slice_dice"][1] == 0.5
    assert parsed.loc[1, "slice_dice"].size == 0 and parsed.loc[2, "slice_dice"] == "oops"
    assert parsed.loc[0, "notes"] == ["constant image"] and parsed.loc[1, "notes"] == []
    assert parsed.loc[0, "attributes"] == {"split": "train"} and parsed.loc[1, "attributes"] == {}
    assert parsed["dice"].equals(table["dice"]) and table.loc[0, "notes"] == '["constant image"]'  # a copy


def test_score_pair_gives_fields_a_dict_and_one_line(case):
    truth = case.label == 1
    scores = api.score_pair(np.roll(truth, 1, axis=0), truth, case.kind, case.spacing, prompt_slice=17)
    assert isinstance(scores, api.PairScores) and scores.dice == scores["dice"] and 0 < scores.dice < 1
    assert isinstance(scores.gt_voxels, int) and scores.gt_voxels == int(truth.sum())
    assert isinstance(scores.error_slices, dict) and scores.error_slices
    assert math.isclose(sum(v for k, v in scores.items() if k.startswith("error_") and k != "error_slices"),
                        1 - scores.dice)
    text = repr(scores)
    assert text.startswith("PairScores(dice=") and "\n" not in text and len(text) < 200
    plain = scores.to_dict()
    assert type(plain) is dict and json.loads(json.dumps(plain))["gt_voxels"] == scores.gt_voxels
    table = pd.DataFrame({"a": scores, "b": scores}).T  # one column per pair, as the notebook builds it
    assert table.loc["a", "dice"] == scores.dice
    with pytest.raises(AttributeError, match="no field 'dsc'"):
        scores.dsc  # noqa: B018


# -- 5. progress, masks out, report -------------------------------------------------------------------------------

def test_progress_true_draws_a_bar(case, shared_data, tmp_path, capsys):
    session = api.open_session(case, "box")
    session.propagate(api.protocol_prompts(case, target_labels=[1])[0], progress=True)
    err = capsys.readouterr().err
    assert "propagating" in err and "35/35" in err
    api.run_benchmark(api.RunConfig(shared_data / HIPPO, tmp_path / "run", model="box", limit=1), progress=True)
    err = capsys.readouterr().err
    assert "cases" in err and "1/1" in err


@pytest.mark.parametrize("suffix", [".nii.gz", ".nrrd", ".mha", ".npz"])
def test_write_mask_keeps_the_geometry(case, shared_data, tmp_path, suffix):
    path = api.write_mask(case, case.label == 1, tmp_path / f"mask{suffix}", label_value=3)
    source = sitk.ReadImage(str(shared_data / HIPPO / "imagesTr" / f"{CASE}.nii.gz"))
    if suffix == ".npz":
        data = np.load(path)
        written, spacing, origin, direction = data["segs"], data["spacing"], data["origin"], data["direction"]
    else:
        image = sitk.ReadImage(str(path))
        written, spacing, origin, direction = (sitk.GetArrayFromImage(image), image.GetSpacing(), image.GetOrigin(),
                                               image.GetDirection())
    assert np.array_equal(written, (case.label == 1) * 3)
    assert np.allclose(spacing, source.GetSpacing()) and np.allclose(origin, source.GetOrigin())
    assert np.allclose(direction, source.GetDirection())
    back = api.read_case(shared_data / HIPPO / "imagesTr" / f"{CASE}.nii.gz", path)  # a label of its image
    assert back.label_values() == [3] and back.spacing == case.spacing
    assert api.write_mask(case, case.label == 2, path) == path  # ours: replaced without overwrite


def test_write_mask_never_replaces_a_file_it_did_not_write(case, tmp_path):
    foreign = tmp_path / "theirs.nii.gz"
    foreign.write_bytes(b"not ours")
    with pytest.raises(DataError, match="did not write.*give overwrite=True"):
        api.write_mask(case, case.label == 1, foreign)
    assert foreign.read_bytes() == b"not ours"
    api.write_mask(case, case.label == 1, foreign, overwrite=True)
    assert sitk.ReadImage(str(foreign)).GetSize() == (35, 51, 35)


def test_report_writes_the_run_report(run_table):
    out, _table = run_table
    path = api.report(out)
    assert path == out / "report.md" and (out / "report.html").is_file() and "hippocampus" in path.read_text()
