"""Issue 17, "nothing silently wrong": bad input is refused (or warned about), never scored as if fine.

Every file here is derived from the real public data in ``shared/data`` and
written to ``tmp_path`` (symbolic links stand in for unchanged files).
"""
from __future__ import annotations

import json
import os
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval.cli import main
from napari_medsam_eval.cli.score import score_files
from napari_medsam_eval.datasets import get_layout
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.io import read_case, read_medsam_npz
from napari_medsam_eval.evaluation.metrics import compute_label_metrics, compute_surface_dice
from napari_medsam_eval.core.prompt import Prompt, PromptError, PromptWarning, check_prompt_in_image

CASE = "hippocampus_001"


@pytest.fixture
def hippo(shared_data: Path) -> Path:
    return shared_data / "hippocampus_mri"


def _msd_copy(tmp_path: Path, hippo: Path, cases: list[str], *, dataset_json: dict | None = None) -> Path:
    """An MSD dataset in ``tmp_path`` whose files link to the real ones."""
    root = tmp_path / "hippo_copy"
    for sub in ("imagesTr", "labelsTr"):
        (root / sub).mkdir(parents=True)
        for case in cases:
            (root / sub / f"{case}.nii.gz").symlink_to(hippo / sub / f"{case}.nii.gz")
    info = json.loads((hippo / "dataset.json").read_text())
    (root / "dataset.json").write_text(json.dumps({**info, **(dataset_json or {})}))
    return root


def _write_like(array: np.ndarray, reference: Path, path: Path) -> Path:
    image = sitk.GetImageFromArray(array)
    image.CopyInformation(sitk.ReadImage(str(reference)))
    sitk.WriteImage(image, str(path))
    return path


def _score(capsys, *args) -> tuple[int, str]:
    code = main(["score", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.err


# ------------------------------------------------------------ 1. undeclared label values
def test_undeclared_label_value_is_refused_not_a_new_task(tmp_path, hippo):
    root = _msd_copy(tmp_path, hippo, [CASE, "hippocampus_007"])
    label_file = root / "labelsTr" / f"{CASE}.nii.gz"
    label = sitk.GetArrayFromImage(sitk.ReadImage(str(hippo / "labelsTr" / f"{CASE}.nii.gz")))
    label[label == 2] = 7
    label_file.unlink()
    _write_like(label.astype(np.uint8), hippo / "labelsTr" / f"{CASE}.nii.gz", label_file)
    layout = get_layout("msd")
    refs = {ref.case_id: ref for ref in layout.list_cases(root)}
    good = refs["hippocampus_007"]
    assert [t.key for t in layout.targets(good, layout.load(good))] == [1, 2]
    bad = refs[CASE]
    case = layout.load(bad)
    with pytest.raises(DataError) as info:
        layout.targets(bad, case)
    message = str(info.value)
    assert message.startswith(str(label_file))
    assert ("holds values [7] that dataset.json does not declare "
            "(0 background, 1 anterior, 2 posterior)") in message


def test_score_refuses_prediction_value_the_dataset_does_not_declare(tmp_path, hippo, capsys):
    gt = hippo / "labelsTr" / f"{CASE}.nii.gz"
    pred = sitk.GetArrayFromImage(sitk.ReadImage(str(gt))).astype(np.uint8)
    pred[pred == 2] = 5
    pred_file = _write_like(pred, gt, tmp_path / "pred.nii.gz")
    code, err = _score(capsys, pred_file, gt)
    assert code == 2
    assert err.startswith(f"error: {pred_file}: prediction holds label values [5] that ")
    assert "dataset.json does not declare (0 background, 1 anterior, 2 posterior)" in err
    # a declared value absent from this ground truth is a legitimate false positive
    only_one = sitk.GetArrayFromImage(sitk.ReadImage(str(gt))).astype(np.uint8)
    only_one[only_one == 2] = 1
    gt_copy = _msd_copy(tmp_path, hippo, [])
    gt_file = _write_like(only_one, gt, gt_copy / "labelsTr" / "one.nii.gz")
    rows = {row["label"]: row for row in score_files(gt, gt_file)}
    assert set(rows) == {1, 2} and rows[2]["dice"] == 0.0 and rows[2]["name"] == "posterior"


def test_score_refuses_an_image_given_as_prediction(tmp_path, hippo, capsys):
    image, gt = hippo / "imagesTr" / f"{CASE}.nii.gz", hippo / "labelsTr" / f"{CASE}.nii.gz"
    code, err = _score(capsys, image, gt)
    assert code == 2
    n_values = np.unique(sitk.GetArrayFromImage(sitk.ReadImage(str(image)))).size
    assert err.strip() == (f"error: {image}: prediction looks like an image, not a label map: "
                           f"{n_values} distinct values (the ground truth has 3)")
    # a float image (non-integer values) is named as such, too
    scaled = sitk.GetArrayFromImage(sitk.ReadImage(str(image))).astype(np.float32) / 7.0
    float_file = _write_like(scaled, image, tmp_path / "float_pred.nii.gz")
    code, err = _score(capsys, float_file, gt)
    assert code == 2 and "prediction looks like an image, not a label map" in err and "float_pred" in err


# ------------------------------------------------------------ 2. npz spacing
def _lesion_npz(shared_data: Path, path: Path, spacing: list[float]) -> Path:
    with np.load(shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz") as data:
        imgs, gts = data["imgs"][:, 200:300, 200:300], data["gts"][:, 200:300, 200:300]
    np.savez(path, imgs=imgs, gts=gts, spacing=np.array(spacing))
    return path


@pytest.mark.parametrize("spacing", [[0.7, 0.7], [0.7, 0.7, 5.0, 1.0]])
def test_npz_spacing_of_the_wrong_length_is_refused_everywhere(tmp_path, shared_data, capsys, spacing):
    bad = _lesion_npz(shared_data, tmp_path / "CT_bad.npz", spacing)
    good = _lesion_npz(shared_data, tmp_path / "CT_good.npz", [0.7, 0.7, 5.0])
    expected = f"spacing has {len(spacing)} values"
    with pytest.raises(DataError, match=rf"CT_bad.npz: {expected} .* for a 3D image; expected 3 \(x, y, z\)"):
        read_medsam_npz(bad)
    for pred, gt in ((bad, good), (good, bad)):
        code, err = _score(capsys, pred, gt)
        assert code == 2 and f"{bad}: {expected}" in err and "expected 3 (x, y, z)" in err
    assert read_case(good).spacing.values == pytest.approx((5.0, 0.7, 0.7))


# ------------------------------------------------------------ 3. boxes outside the image
def test_inverted_or_non_finite_box_is_a_data_error():
    with pytest.raises(DataError, match=r"^box \(x0=30, y0=5, x1=10, y1=20\): x0 > x1$"):
        Prompt(1, boxes=[(np.float64(30), 5, 10, 20)])
    with pytest.raises(PromptError, match=r"y0 > y1"):
        Prompt(1, boxes=[(1, 9, 4, 2)])
    with pytest.raises(PromptError, match=r"x0=nan.*finite"):
        Prompt(1, boxes=[(float("nan"), 5, 10, 20)])
    with pytest.raises(ValueError):  # callers that catch ValueError for drawn prompts still do
        Prompt(1, boxes=[(1, 2, 0, 3)])


def test_box_wholly_outside_is_refused_partly_outside_clipped_with_warning(shared_data):
    shape_hw = (51, 35)  # hippocampus_001: 35 slices of 51 rows x 35 columns
    with pytest.raises(DataError, match=r"box \(x0=40, y0=5, x1=50, y1=20\) lies wholly outside "
                                        r"the 35 x 51 image \(x 0..34, y 0..50\)"):
        check_prompt_in_image(Prompt(1, boxes=[(40, 5, 50, 20)]), shape_hw)
    with pytest.raises(DataError, match="point .* outside"):
        check_prompt_in_image(Prompt(1, points=[(3, 60)], point_labels=[1]), shape_hw)
    with pytest.raises(DataError, match="slice 40 is outside the stack of 35"):
        check_prompt_in_image(Prompt(1, slice_index=40, boxes=[(1, 1, 5, 5)]), shape_hw, n_slices=35)
    inside = Prompt(1, boxes=[(2, 3, 20, 30)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_prompt_in_image(inside, shape_hw) is inside
    with pytest.warns(PromptWarning, match=r"box \(x0=-4, y0=3, x1=20, y1=70\) lies partly outside.*"
                                           r"clipped to \(x0=0, y0=3, x1=20, y1=50\)"):
        clipped = check_prompt_in_image(Prompt(1, boxes=[(-4, 3, 20, 70)]), shape_hw)
    assert clipped.boxes == [(0.0, 3.0, 20.0, 50.0)] and clipped.info["clipped_boxes"] == [[-4, 3, 20, 70]]


# ------------------------------------------------------------ 4. broken symbolic links
def test_broken_symlink_case_is_listed_and_fails_clearly(tmp_path, hippo):
    root = _msd_copy(tmp_path, hippo, [CASE, "hippocampus_007"])
    (root / "imagesTr" / "hippocampus_999.nii.gz").symlink_to(tmp_path / "gone" / "hippocampus_999.nii.gz")
    (root / "labelsTr" / "hippocampus_999.nii.gz").symlink_to(tmp_path / "gone" / "label_999.nii.gz")
    layout = get_layout("msd")
    refs = layout.list_cases(root)
    assert [r.case_id for r in refs] == [CASE, "hippocampus_007", "hippocampus_999"]
    with pytest.raises(DataError, match=r"hippocampus_999.nii.gz: .*broken symbolic link: its target .*gone"):
        layout.load(refs[2])
    # a broken label link beside a good image is named as the label's problem, not "no label file"
    (root / "labelsTr" / "hippocampus_007.nii.gz").unlink()
    (root / "labelsTr" / "hippocampus_007.nii.gz").symlink_to(tmp_path / "gone" / "label_007.nii.gz")
    with pytest.raises(DataError, match=r"labelsTr/hippocampus_007.nii.gz: label of case .*broken symbolic link"):
        layout.load(layout.list_cases(root)[1])


def test_broken_symlinks_are_listed_by_every_layout(tmp_path, shared_data):
    npz_root = tmp_path / "npz"
    npz_root.mkdir()
    real = sorted((shared_data / "deeplesion_ct_npz").glob("*.npz"))[:2]
    for path in real:
        (npz_root / path.name).symlink_to(path)
    (npz_root / "CT_Lesion_gone.npz").symlink_to(tmp_path / "nowhere.npz")
    assert len(get_layout("npz").list_cases(npz_root)) == 3
    folder = tmp_path / "kvasir"
    for sub in ("images", "masks"):
        (folder / sub).mkdir(parents=True)
    for image in sorted((shared_data / "kvasir_seg_2d" / "images").iterdir())[:2]:
        (folder / "images" / image.name).symlink_to(image)
        mask = next((shared_data / "kvasir_seg_2d" / "masks").glob(image.stem + ".*"))
        (folder / "masks" / mask.name).symlink_to(mask)
    (folder / "images" / "gone.jpg").symlink_to(tmp_path / "gone.jpg")
    refs = get_layout("folder2d").list_cases(folder)
    assert len(refs) == 3
    gone = next(r for r in refs if r.case_id == "gone")
    with pytest.raises(DataError, match="gone.jpg: .*broken symbolic link"):
        get_layout("folder2d").load(gone)
    video = tmp_path / "video"
    (video / "Frame").mkdir(parents=True)
    (video / "GT").mkdir()
    clip = sorted((shared_data / "cvc_clinicdb_video" / "Frame").iterdir())[0]
    (video / "Frame" / clip.name).symlink_to(clip)
    (video / "GT" / clip.name).symlink_to(shared_data / "cvc_clinicdb_video" / "GT" / clip.name)
    (video / "Frame" / "lost_clip").symlink_to(tmp_path / "lost_clip")
    refs = get_layout("sunseg").list_cases(video)
    assert [r.case_id for r in refs] == sorted([clip.name, "lost_clip"])
    with pytest.raises(DataError, match="lost_clip: broken symbolic link"):
        get_layout("sunseg").load(next(r for r in refs if r.case_id == "lost_clip"))


# ------------------------------------------------------------ 5. NSD tolerance
@pytest.mark.parametrize("tolerance", [-1.0, 0.0, float("nan"), float("inf")])
def test_non_positive_or_non_finite_tolerance_is_refused(hippo, capsys, tolerance):
    gt = hippo / "labelsTr" / f"{CASE}.nii.gz"
    label = sitk.GetArrayFromImage(sitk.ReadImage(str(gt))) == 1
    if tolerance != 0:  # the metric accepts 0 (only coinciding surfels count), as surface_distance does
        with pytest.raises(ValueError, match="NSD tolerance must be a finite, non-negative number of mm"):
            compute_surface_dice(label, label, (1.0, 1.0, 1.0), tolerance)
        with pytest.raises(ValueError, match="NSD tolerance"):
            compute_label_metrics(label.astype(np.uint8), label.astype(np.uint8), (1.0, 1.0, 1.0),
                                  tolerance_mm=tolerance)
    code, err = _score(capsys, gt, gt, "--tolerance-mm", str(tolerance))
    assert code == 2 and err.startswith("error: --tolerance-mm must be a positive number of mm")


# ------------------------------------------------------------ 6. messages
def test_geometry_mismatch_names_prediction_and_ground_truth_plainly(tmp_path, hippo, capsys):
    gt = hippo / "labelsTr" / f"{CASE}.nii.gz"
    label = sitk.ReadImage(str(gt))
    label.SetSpacing((1.0, 1.0, 2.5))
    pred = tmp_path / "pred_spacing.nii.gz"
    sitk.WriteImage(label, str(pred))
    code, err = _score(capsys, pred, gt)
    assert code == 2
    assert err.strip() == (f"error: {pred}: geometry mismatch: prediction spacing 1, 1, 2.5 mm vs ground truth "
                           f"spacing 1, 1, 1 mm (x, y, z) (ground truth {gt.name})")
    other = hippo / "labelsTr" / "hippocampus_007.nii.gz"
    code, err = _score(capsys, other, gt)
    assert code == 2 and f"{other}: prediction shape " in err and f"of ground truth {gt.name}" in err
    assert "np.float64" not in err and "label shape" not in err and "of image" not in err


# ------------------------------------------------------------ 7a. MSD training list
def test_msd_training_list_is_used_and_missing_entries_fail(tmp_path, hippo):
    cases = [CASE, "hippocampus_007", "hippocampus_004"]
    listed = [f"hippocampus_{n}" for n in ("004", "001", "777")]  # 007 is in the folder, not in the list
    training = [{"image": f"./imagesTr/{c}.nii.gz", "label": f"./labelsTr/{c}.nii.gz"} for c in listed]
    root = _msd_copy(tmp_path, hippo, cases, dataset_json={"training": training})
    layout = get_layout("msd")
    refs = layout.list_cases(root)
    assert [r.case_id for r in refs] == ["hippocampus_001", "hippocampus_004", "hippocampus_777"]
    assert refs[0].paths["image"] == os.fspath(root / "imagesTr" / f"{CASE}.nii.gz")
    assert layout.load(refs[1]).label is not None
    with pytest.raises(DataError, match=r"imagesTr/hippocampus_777.nii.gz: image of case hippocampus_777: "
                                        r"file not found"):
        layout.load(refs[2])


def test_msd_training_list_keeps_the_80_cases_and_their_order(tmp_path, hippo):
    layout = get_layout("msd")
    today = layout.list_cases(hippo)
    stems = sorted(p.name[: -len(".nii.gz")] for p in (hippo / "imagesTr").iterdir() if not p.name.startswith("."))
    assert [r.case_id for r in today] == stems and len(stems) == 80
    root = tmp_path / "listed"
    root.mkdir()
    for sub in ("imagesTr", "labelsTr"):
        (root / sub).symlink_to(hippo / sub)
    training = [{"image": f"./imagesTr/{s}.nii.gz", "label": f"./labelsTr/{s}.nii.gz"} for s in stems]
    random.Random(0).shuffle(training)
    info = json.loads((hippo / "dataset.json").read_text())
    (root / "dataset.json").write_text(json.dumps({**info, "training": training}))
    listed = layout.list_cases(root)
    assert [r.case_id for r in listed] == [r.case_id for r in today]
    assert [Path(r.paths["label"]).name for r in listed] == [Path(r.paths["label"]).name for r in today]
