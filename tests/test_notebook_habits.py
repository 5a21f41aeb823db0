"""Notebook habits (issue 68): ``convention=`` on ``score_pair``, ``cases=`` and ``overwrite=`` on ``RunConfig``,
``load_table(columns="core")``, ``case.to_sitk`` with typed ``origin`` / ``direction``, a short ``RunConfig`` repr,
and what the lesion rule saw of a lesion it counted missed.

Real data read in place (``hippocampus_mri``, ``deeplesion_ct_npz``); the model is the ``box`` baseline (no
network), so each run takes a second or two.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import SimpleITK as sitk
from scipy import ndimage

from napari_medsam_eval import api
from napari_medsam_eval.core.errors import DataError, InputError, OptionError
from napari_medsam_eval.core.reprs import REPR_LIMIT
from napari_medsam_eval.evaluation.conventions import convention_scores

HIPPO = "hippocampus_mri"
CASE = "hippocampus_001"
LESION = "CT_Lesion_000001_02_01_008-023.npz"


@pytest.fixture(scope="module")
def case(shared_data):
    root = shared_data / HIPPO
    return api.read_case(root / "imagesTr" / f"{CASE}.nii.gz", root / "labelsTr" / f"{CASE}.nii.gz")


def test_score_pair_takes_the_convention_score_takes(case):
    truth = case.label == 1
    pred = ndimage.binary_dilation(truth, iterations=1) & ~ndimage.binary_erosion(truth, iterations=3)
    ours = api.score_pair(pred, case=case, target=1)
    for convention in ("monai", "cvpr25"):
        scores = api.score_pair(pred, case=case, target=1, convention=convention)
        expected = convention_scores(pred, truth, tuple(case.spacing.values), 2.0, convention)
        assert all(math.isclose(scores[m], expected[m], rel_tol=1e-9) for m in ("dice", "iou", "nsd", "hd95"))
        assert scores.convention == convention and f"as {convention}" in repr(scores)
    assert api.score_pair(pred, case=case, target=1, convention="monai").hd95 != ours.hd95  # a real difference
    with pytest.raises(InputError, match=r"convention must be one of medsam-eval, monai, cvpr25, got 'nnunet'"):
        api.score_pair(pred, case=case, target=1, convention="nnunet")


def test_run_config_cases_take_those_cases_and_refuse_one_not_listed(shared_data, tmp_path):
    config = api.RunConfig(shared_data / HIPPO, tmp_path / "run", model="box", cases=["hippocampus_004"],
                           targets=("anterior=1",))
    table = api.run_benchmark(config)
    assert sorted(set(table["case_id"])) == ["hippocampus_004"]
    with pytest.raises(OptionError, match=r"cases: the dataset lists no case 'hippocampus_999' \(\d+ cases: "):
        api.run_benchmark(config.replace(out_dir=tmp_path / "other", cases=["hippocampus_999"]))
    assert not (tmp_path / "other").exists()
    with pytest.raises(OptionError, match="cases takes a list of case ids"):
        api.RunConfig(shared_data / HIPPO, tmp_path / "x", cases="hippocampus_004")


def test_overwrite_replaces_an_earlier_run_and_only_its_files(shared_data, tmp_path):
    out = tmp_path / "run"
    first = api.RunConfig(shared_data / HIPPO, out, model="box", limit=2, targets=("anterior=1",))
    api.run_benchmark(first)
    api.report(out)
    assert (out / "report.md").exists()
    with pytest.raises(DataError, match=r"replace the earlier run with overwrite=True"):
        api.run_benchmark(first.replace(cases=[CASE]))
    again = api.run_benchmark(first.replace(cases=[CASE], overwrite=True))
    assert list(again["case_id"]) == [CASE] and list(api.load_table(out)["case_id"]) == [CASE]
    assert not (out / "report.md").exists()  # the earlier run's report went with it
    (out / "notes.txt").write_text("mine")
    with pytest.raises(DataError, match=r"the folder also holds notes\.txt"):
        api.run_benchmark(first.replace(overwrite=True))
    assert (out / "notes.txt").read_text() == "mine" and list(api.load_table(out)["case_id"]) == [CASE]
    with pytest.raises(OptionError, match="overwrite and resume contradict"):
        api.run_benchmark(first.replace(overwrite=True, resume=True))


def test_load_table_core_columns_drop_what_no_row_fills(shared_data, tmp_path):
    out = tmp_path / "run"
    api.run_benchmark(api.RunConfig(shared_data / HIPPO, out, model="box", limit=1))
    every = api.load_table(out)
    core = api.load_table(out, columns="core")
    assert len(core.columns) < len(every.columns) - 20 and len(core) == len(every)
    assert {"case_id", "target", "label_name", "dice", "nsd", "hd95", "gt_voxels"} <= set(core.columns)
    assert "lesions" not in core.columns and "sens_dice" not in core.columns and "noc80" not in core.columns
    assert core["dice"].equals(every["dice"])
    assert list(api.load_table(out, columns=["case_id", "dice"]).columns) == ["case_id", "dice"]
    with pytest.raises(OptionError, match=r"no column 'dsc'"):
        api.load_table(out, columns=["case_id", "dsc"])
    with pytest.raises(OptionError, match=r"columns must be one of all, core"):
        api.load_table(out, columns="few")


def test_case_geometry_is_typed_and_to_sitk_keeps_it(shared_data, tmp_path):
    case = api.read_case(shared_data / "deeplesion_ct_npz" / LESION)
    assert case.direction == ((0.0, 1.0, 0.0), (1.0, 0.0, 0.0), (0.0, 0.0, -1.0))
    assert case.origin == (0.0, 0.0, 0.0) and all(isinstance(v, float) for v in case.origin)
    mask = case.label == 1
    image = case.to_sitk(mask)
    assert image.GetDirection() == tuple(v for row in case.direction for v in row)
    assert np.allclose(image.GetSpacing(), case.spacing.xyz()) and image.GetPixelID() == sitk.sitkUInt8
    assert np.array_equal(sitk.GetArrayFromImage(image), mask)
    written = sitk.ReadImage(str(api.write_mask(case, mask, tmp_path / "mask.nii.gz")))
    assert np.allclose(written.GetDirection(), image.GetDirection()) and np.allclose(written.GetOrigin(), image.GetOrigin())
    assert case.to_sitk().GetSize() == image.GetSize()  # the image itself by default
    with pytest.raises(InputError, match="does not fit the case's"):
        case.to_sitk(mask[:-1])


def test_run_config_prints_one_line_and_details_on_request(shared_data):
    config = api.RunConfig(shared_data / HIPPO, "runs/hippo", model="box", limit=2, targets=("whole=1,2",),
                           model_options={"device": "cpu"}, protocol_options={"margin": 5})
    text = repr(config)
    assert text.startswith("RunConfig(hippocampus_mri -> runs/hippo, model=box, protocol=medsam2") and "limit=2" in text
    assert "targets=[whole=1,2]" in text and "seed=" not in text and len(text) <= REPR_LIMIT
    assert "seed: 0" in config.details() and "overwrite: False" in config.details()


def test_a_lesion_counted_missed_says_what_the_rule_saw():
    from napari_medsam_eval.evaluation.scoring import lesion_overlap, missed_words

    truth = np.zeros((1, 20, 40), bool)
    truth[0, 5:15, 5:15] = True              # 100 voxels
    pred = np.zeros_like(truth)
    pred[0, 5:15, 11:28] = True              # 40 on the lesion, 170 in all: IoU 40/230, DSC 80/270
    dice, iou = lesion_overlap(truth, pred, 1)
    assert math.isclose(iou, 40 / 230) and math.isclose(dice, 80 / 270)
    assert missed_words(dice, iou) == "found at DSC 0.30 (IoU 0.17), below the IoU 0.5 match"
    assert missed_words(*lesion_overlap(truth, np.zeros_like(pred), 1)) == "missed: no predicted lesion touches it"
    assert missed_words(0.0041, 0.0021) == "found at DSC 0.0041 (IoU 0.0021), below the IoU 0.5 match"


def test_what_overwrite_removes_of_a_report_is_what_the_report_writes():
    from napari_medsam_eval.benchmark.run_replace import REPORT_FIGURES, REPORT_FILES
    from napari_medsam_eval.report.folder import REPORT_FILES as WRITTEN

    pages = [name for name in WRITTEN if "/" not in name]
    figures = [name for name in WRITTEN if "/" in name]
    assert sorted(pages) == sorted(REPORT_FILES)
    assert all(name.startswith(REPORT_FIGURES[0] + "/") and name.endswith(REPORT_FIGURES[1]) for name in figures)
