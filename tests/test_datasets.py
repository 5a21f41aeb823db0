"""Dataset layouts: detection on every shared dataset, CAMUS and SUN-SEG trees written here, errors."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval.datasets import (LAYOUTS, detect_layout, get_layout, npz_label_names, npz_target_token,
                                         task_name)
from napari_medsam_eval.core.errors import DataError

#: shared dataset -> (layout, number of cases, label names of the first case)
SHARED = {
    "hippocampus_mri": ("msd", 80, {1: "anterior", 2: "posterior"}),
    "brats2021_flair": ("msd", 1, {}),
    "deeplesion_ct_npz": ("npz", 6, {1: "lesion"}),
    "cvc_clinicdb_video": ("sunseg", 10, {1: "polyp"}),
    "kvasir_seg_2d": ("folder2d", 50, {1: "foreground"}),
    "ham10000_2d": ("folder2d", 5, {1: "foreground"}),
    "sammed2d_ct_2d": ("sammed2d", 5, {1: "aorta", 2: "inferior_vena_cava", 3: "liver"}),
}


#: shared folders that are no dataset of a layout: what they hold and the tests that read them
NOT_LAYOUTS = {
    "dicom_seg_rtstruct": "DICOM SEG and RTSTRUCT files beside their series (test_dicom_seg_read.py, test_rtstruct.py)",
}


#: shared instance-map datasets -> (layout, number of cases, instance values of the first case)
INSTANCE_DATASETS = {
    "ctc_nuclei_gowt1": ("ctc", 6, 23),
}


def test_every_shared_dataset_is_covered(shared_data: Path) -> None:
    assert {p.name for p in shared_data.iterdir() if p.is_dir()} == set(SHARED) | set(NOT_LAYOUTS) | set(
        INSTANCE_DATASETS)


@pytest.mark.parametrize("name", sorted(INSTANCE_DATASETS))
def test_instance_dataset_detected_listed_and_its_target_is_every_instance(shared_data: Path, name: str) -> None:
    """Cell Tracking Challenge nuclei: an instance map a case; the target takes its values one by one."""
    from napari_medsam_eval.evaluation.lesion_maps import instance_numbers

    layout_name, n_cases, n_instances = INSTANCE_DATASETS[name]
    root = shared_data / name
    layout = detect_layout(root)
    refs = layout.list_cases(root)
    assert layout.name == layout_name and len({r.case_id for r in refs}) == n_cases
    assert refs == layout.list_cases(root), "listing must be deterministic"
    case = layout.load(refs[0])
    assert case.kind == "image" and len(instance_numbers(case.label)) == n_instances
    (target,) = layout.targets(refs[0], case)
    assert target.instances and target.text() == "nuclei=instances"


def test_dicom_seg_rtstruct_objects_known_and_no_layout(shared_data: Path) -> None:
    """Every SEG and RTSTRUCT of the folder is taken for a ground truth, never for an image series (a folder of
    a CT slice and five SEGs is one series); the folder itself is no dataset layout, and says so."""
    from napari_medsam_eval.io.dicom import image_series_ids
    from napari_medsam_eval.io.dicom_objects import ground_truth_kind

    root = shared_data / "dicom_seg_rtstruct"
    kinds = {str(p.relative_to(root)): ground_truth_kind(p) for p in sorted(root.rglob("*")) if p.is_file()}
    assert sorted(k for k, v in kinds.items() if v == "SEG") == [
        "dcmqi/23x38x3/seg/label.seg", "dcmqi/24x38x3/seg/label.seg", "dcmqi/liver.dcm", "dcmqi/partial_overlaps.dcm",
        "dcmqi/sparse-labelmap-noppv.dcm", "dcmqi/sparse-labelmap-ppv5.dcm", "highdicom/seg_image_ct_binary.dcm",
        "highdicom/seg_image_ct_binary_fractional.dcm", "highdicom/seg_image_ct_binary_overlap.dcm",
        "highdicom/seg_image_ct_binary_single_frame.dcm", "highdicom/seg_image_ct_true_fractional.dcm"]
    assert sorted(k for k, v in kinds.items() if v == "RTSTRUCT") == [
        "dicompyler/rtss.dcm", "rt_utils/empty/dummy_rt.dcm", "rt_utils/mock_data/invalid_reference_rt.dcm",
        "rt_utils/mock_data/non_existent_reference_rt.dcm", "rt_utils/mock_data/rt.dcm"]
    assert len(image_series_ids(root / "highdicom")) == 1
    with pytest.raises(DataError, match="no known dataset layout"):
        detect_layout(root)


@pytest.mark.parametrize("name", sorted(SHARED))
def test_shared_dataset_detected_listed_loaded(shared_data: Path, name: str) -> None:
    layout_name, n_cases, names = SHARED[name]
    root = shared_data / name
    layout = detect_layout(root)
    assert layout.name == layout_name
    refs = layout.list_cases(root)
    assert len(refs) == n_cases
    assert len({r.case_id for r in refs}) == n_cases
    assert refs == layout.list_cases(root), "listing must be deterministic"
    assert all(r.dataset == name and r.layout == layout_name for r in refs)
    case = layout.load(refs[0])
    assert case.case_id == refs[0].case_id and case.label is not None
    assert case.label_names == names
    named = set(names) if layout_name == "msd" else set()  # MSD names come from dataset.json: always targets
    assert [t.key for t in layout.targets(refs[0], case)] == sorted(set(case.label_values()) | named)


def test_msd_attributes_and_tasks(shared_data: Path) -> None:
    layout = get_layout("nnunet")
    root = shared_data / "hippocampus_mri"
    ref = layout.list_cases(root)[0]
    assert ref.attributes == {"split": "train"} and ref.kind == "volume"
    assert layout.label_names(root) == {1: "anterior", 2: "posterior"}
    assert task_name(ref.dataset, "anterior") == "hippocampus_mri/anterior"


def _write_nifti(path: Path, array: np.ndarray, spacing=(0.3, 0.3, 1.0)) -> None:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(spacing)
    sitk.WriteImage(image, str(path))


def write_camus(root: Path, patients=("patient0001", "patient0002"), frames: int = 3) -> None:
    """Tiny CAMUS-layout sequences: (T, Y, X) uint8 with labels 1..3 drawn as bands."""
    rng = np.random.default_rng(0)
    for patient in patients:
        folder = root / patient
        folder.mkdir(parents=True)
        for view in ("2CH", "4CH"):
            image = rng.integers(0, 255, (frames, 24, 20), dtype=np.uint8)
            label = np.zeros((frames, 24, 20), np.uint8)
            label[:, 4:10, 5:15], label[:, 10:14, 5:15], label[:, 15:20, 6:14] = 1, 2, 3
            _write_nifti(folder / f"{patient}_{view}_half_sequence.nii.gz", image)
            _write_nifti(folder / f"{patient}_{view}_half_sequence_gt.nii.gz", label)
            _write_nifti(folder / f"{patient}_{view}_ED.nii.gz", image[0])  # single frames: not cases
            quality = "Good" if view == "2CH" else "Poor"
            (folder / f"Info_{view}.cfg").write_text(f"ED: 1\nES: {frames}\nImageQuality: {quality}\n")


def test_camus_layout(tmp_path: Path) -> None:
    write_camus(tmp_path / "camus")
    layout = detect_layout(tmp_path / "camus")
    assert layout.name == "camus"
    refs = layout.list_cases(tmp_path / "camus")
    assert [r.case_id for r in refs] == ["patient0001_2CH", "patient0001_4CH", "patient0002_2CH", "patient0002_4CH"]
    assert refs[0].attributes == {"patient": "patient0001", "view": "2CH", "image_quality": "Good"}
    assert refs[1].attributes["image_quality"] == "Poor"
    case = layout.load(refs[0])
    assert case.kind == "video" and case.image.shape == (3, 24, 20)
    assert case.label_names == {1: "lv_endocardium", 2: "myocardium", 3: "left_atrium"}
    assert [t.key for t in layout.targets(refs[0], case)] == [1, 2, 3]
    np.testing.assert_allclose(case.spacing.values[1:], (0.3, 0.3))


def test_camus_nested_release_with_splits(tmp_path: Path) -> None:
    root = tmp_path / "CAMUS_public"
    write_camus(root / "database_nifti")
    (root / "database_split").mkdir()
    (root / "database_split" / "subgroup_training.txt").write_text("patient0001\n")
    (root / "database_split" / "subgroup_testing.txt").write_text("patient0002\n")
    refs = detect_layout(root).list_cases(root)
    assert {r.case_id: r.attributes["split"] for r in refs} == {
        "patient0001_2CH": "train", "patient0001_4CH": "train", "patient0002_2CH": "test", "patient0002_4CH": "test"}


def write_sunseg_clip(frame_dir: Path, gt_dir: Path, frames: int = 2, shape=(16, 20)) -> None:
    frame_dir.mkdir(parents=True)
    gt_dir.mkdir(parents=True)
    for t in range(frames):
        iio.imwrite(frame_dir / f"image{t + 1:04d}.jpg", np.full(shape + (3,), 60 + 40 * t, np.uint8))
        mask = np.zeros(shape, np.uint8)
        mask[4:10, 5 + t:12 + t] = 255
        iio.imwrite(gt_dir / f"image{t + 1:04d}.png", mask)


def write_sunseg_tree(root: Path) -> None:
    for group, clip in (("TestEasyDataset/Seen", "case1_1"), ("TestEasyDataset/Unseen", "case2_3"),
                        ("TestHardDataset/Seen", "case3_1"), ("TestHardDataset/Unseen", "case4_2"),
                        ("TestHardDataset/Unseen", "case1_1")):
        write_sunseg_clip(root / group / "Frame" / clip, root / group / "GT" / clip)


def test_sunseg_splits_are_attributes(tmp_path: Path) -> None:
    root = tmp_path / "SUN-SEG"
    write_sunseg_tree(root)
    layout = detect_layout(root)
    assert layout.name == "sunseg"
    refs = {r.case_id: r for r in layout.list_cases(root)}
    # case1_1 occurs in two groups: both get their group as a prefix
    assert sorted(refs) == ["TestEasyDataset/Seen/case1_1", "TestHardDataset/Unseen/case1_1", "case2_3",
                            "case3_1", "case4_2"]
    assert refs["case2_3"].attributes == {"difficulty": "easy", "split": "unseen", "group": "TestEasyDataset/Unseen"}
    assert refs["case3_1"].attributes == {"difficulty": "hard", "split": "seen", "group": "TestHardDataset/Seen"}
    assert refs["TestHardDataset/Unseen/case1_1"].attributes["difficulty"] == "hard"
    case = layout.load(refs["case4_2"])
    assert case.kind == "video" and case.image.shape == (2, 16, 20, 3)
    assert case.label_values() == [1] and case.label_names == {1: "polyp"}


def test_sunseg_flat_layout(shared_data: Path) -> None:
    refs = get_layout("sun-seg").list_cases(shared_data / "cvc_clinicdb_video")
    assert refs[0].case_id == "seq01" and refs[0].attributes == {}
    assert refs[0].paths["label"].endswith("GT/seq01")


def test_msd_channels_hidden_files_and_missing_label(tmp_path: Path, shared_data: Path) -> None:
    source = shared_data / "hippocampus_mri"
    root = tmp_path / "nnunet"
    (root / "imagesTr").mkdir(parents=True)
    (root / "labelsTr").mkdir()
    shutil.copy(source / "dataset.json", root)
    for case in ("hippocampus_001", "hippocampus_004"):
        shutil.copy(source / "imagesTr" / f"{case}.nii.gz", root / "imagesTr" / f"{case}_0000.nii.gz")
        shutil.copy(source / "imagesTr" / f"{case}.nii.gz", root / "imagesTr" / f"{case}_0001.nii.gz")
    shutil.copy(source / "labelsTr" / "hippocampus_001.nii.gz", root / "labelsTr")
    (root / "imagesTr" / "._hippocampus_001_0000.nii.gz").write_bytes(b"macOS junk")
    layout = detect_layout(root)
    refs = layout.list_cases(root)
    assert [r.case_id for r in refs] == ["hippocampus_001", "hippocampus_004"]
    assert layout.load(refs[0]).label_names == {1: "anterior", 2: "posterior"}
    with pytest.raises(DataError, match="no label file"):
        layout.load(refs[1])


def test_folder2d_isic_mask_names(tmp_path: Path) -> None:
    root = tmp_path / "isic"
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    iio.imwrite(root / "images" / "ISIC_0000001.jpg", np.full((12, 14, 3), 100, np.uint8))
    mask = np.zeros((12, 14), np.uint8)
    mask[3:8, 4:9] = 255
    iio.imwrite(root / "masks" / "ISIC_0000001_segmentation.png", mask)
    layout = detect_layout(root)
    assert layout.name == "folder2d"
    (ref,) = layout.list_cases(root)
    assert ref.paths["label"].endswith("ISIC_0000001_segmentation.png")
    assert layout.load(ref).label_values() == [1]


def test_detect_errors_name_the_candidates(tmp_path: Path, shared_data: Path) -> None:
    with pytest.raises(DataError, match="no known dataset layout.*msd: imagesTr"):
        detect_layout(tmp_path)
    with pytest.raises(DataError, match="not found"):
        detect_layout(tmp_path / "missing")
    # images/ + same-stem masks/ (folder2d) plus a SAM-Med2D json: ambiguous
    root = tmp_path / "both"
    shutil.copytree(shared_data / "ham10000_2d", root)
    (root / "image2label_train.json").write_text(json.dumps({}))
    with pytest.raises(DataError, match="several dataset layouts: folder2d.*sammed2d.*--layout"):
        detect_layout(root)
    assert get_layout("folder2d").detect(root)
    with pytest.raises(ValueError, match="unknown dataset layout 'nope'; known: npz, msd"):
        get_layout("nope")
    assert set(LAYOUTS) == {"npz", "msd", "camus", "sunseg", "folder2d", "sammed2d", "dicom", "ctc"}


def test_npz_label_names_from_file_names() -> None:
    assert npz_target_token("CT_Lesion_000001_02_01_008-023.npz") == "lesion"
    assert npz_target_token("3DBox_MR_LiverTumor_0001.npz") == "livertumor"
    assert npz_target_token("case_0001.npz") is None
    assert npz_target_token("CT_0566.npz") is None
    assert npz_label_names("CT_AbdomenCT1K_Case_00001.npz", [1, 2]) == {1: "abdomenct1k", 2: "abdomenct1k_2"}
    assert npz_label_names("case_0001.npz", [1]) == {}
