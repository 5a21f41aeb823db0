"""Every shared real dataset reads into Cases with the right shapes, spacing order and labels."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from napari_medsam_eval.core.case import Case
from napari_medsam_eval.datasets.layouts import (
    find_label_file,
    pair_folder,
    read_sammed2d,
    sammed2d_mask_files,
    sunseg_mask_folder,
)
from napari_medsam_eval.io import read_case


def _hippocampus_pairs(shared_data: Path) -> list[tuple[Path, Path | None]]:
    root = shared_data / "hippocampus_mri"
    return pair_folder(root / "imagesTr", root / "labelsTr")


def test_hippocampus_all_80_cases(shared_data: Path) -> None:
    pairs = _hippocampus_pairs(shared_data)
    assert len(pairs) == 80
    image_dtypes = set()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no geometry warning may fire on the real pairs
        for image_path, label_path in pairs:
            assert label_path is not None, image_path
            case = read_case(image_path, label_path)
            image_dtypes.add(case.image.dtype)
            assert case.kind == "volume" and case.image.ndim == 3
            assert case.label.shape == case.image.shape
            assert case.label.dtype == np.uint8
            assert set(np.unique(case.label)) <= {0, 1, 2}
            assert case.spacing.axes == "zyx"
            np.testing.assert_allclose(case.spacing.values, 1.0, atol=0.05)
            assert case.case_id == image_path.name[: -len(".nii.gz")]
    assert len(image_dtypes) == 2, "the dataset mixes uint8 and float32 images; both must read"


def test_hippocampus_dataset_json_enriches(shared_data: Path) -> None:
    image_path, label_path = _hippocampus_pairs(shared_data)[0]
    case = read_case(image_path, label_path)
    assert case.modality == "MR"
    assert case.label_names == {1: "anterior", 2: "posterior"}
    assert len(case.metadata["origin"]) == 3 and len(case.metadata["direction"]) == 9
    assert case.metadata["image_path"] == str(image_path)
    assert case.metadata["label_path"] == str(label_path)


def test_deeplesion_spacing_is_z_first(shared_data: Path) -> None:
    case = read_case(shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz")
    assert case.kind == "volume"
    assert case.image.shape == (16, 512, 512) and case.image.dtype == np.uint8
    assert case.spacing.axes == "zyx"
    assert case.spacing["z"] == pytest.approx(5.0)
    assert case.spacing["y"] == pytest.approx(0.3145, abs=1e-3)
    assert case.spacing["x"] == pytest.approx(0.3145, abs=1e-3)
    assert case.modality == "CT"
    assert case.label_values() == [1]
    assert case.metadata["direction"] == pytest.approx((0, 1, 0, 1, 0, 0, 0, 0, -1))


def test_deeplesion_all_files(shared_data: Path) -> None:
    files = sorted((shared_data / "deeplesion_ct_npz").glob("*.npz"))
    assert len(files) == 6
    for path in files:
        case = read_case(path)
        assert case.image.shape[1:] == (512, 512) and 13 <= case.image.shape[0] <= 16
        assert case.spacing["z"] == pytest.approx(5.0)
        assert case.spacing["x"] < 1.0
        assert case.label.shape == case.image.shape and case.label_values() == [1]


def test_brats_axis_order(shared_data: Path) -> None:
    root = shared_data / "brats2021_flair"
    name = "BraTS2021_01646.nii.gz"
    case = read_case(root / "imagesTr" / name, root / "labelsTr" / name)
    # PROVENANCE gives the NIfTI (x, y, z) size 160x160x104: the array is (z, y, x)
    assert case.image.shape == (104, 160, 160)
    assert case.image.dtype == np.float32
    assert case.spacing.values == pytest.approx((1.5, 1.5, 1.5))
    assert case.label_values() == [1]


def test_cvc_clinicdb_videos(shared_data: Path) -> None:
    frame_root = shared_data / "cvc_clinicdb_video" / "Frame"
    clips = sorted(p for p in frame_root.iterdir() if p.is_dir())
    assert len(clips) == 10
    total = 0
    for clip in clips:
        mask_folder = sunseg_mask_folder(clip)
        assert mask_folder == shared_data / "cvc_clinicdb_video" / "GT" / clip.name
        case = read_case(clip, mask_folder)
        assert case.kind == "video" and case.image.ndim == 4 and case.image.shape[-1] == 3
        assert case.image.dtype == np.uint8
        assert case.spacing.axes == "tyx" and case.spacing["t"] == 1.0
        assert case.label.shape == case.image.shape[:3]
        assert case.label_values() == [1]
        assert all(case.label[t].any() for t in range(case.n_slices())), "a polyp is in every frame"
        assert case.metadata["frame_names"] == sorted(case.metadata["frame_names"])
        assert case.case_id == clip.name
        total += case.n_slices()
    assert total == 205


@pytest.mark.parametrize("dataset, count, shape", [("kvasir_seg_2d", 50, None), ("ham10000_2d", 5, (450, 600))])
def test_2d_image_mask_folders(shared_data: Path, dataset: str, count: int, shape) -> None:
    root = shared_data / dataset
    pairs = pair_folder(root / "images", root / "masks")
    assert len(pairs) == count
    for image_path, mask_path in pairs:
        assert mask_path is not None and mask_path.suffix == ".png"
        case = read_case(image_path, mask_path)
        assert case.kind == "image" and case.image.ndim == 3 and case.image.shape[-1] == 3
        assert case.spacing.axes == "yx" and case.spacing.values == (1.0, 1.0)
        assert case.label_values() == [1]
        assert case.metadata["label_source_values"] == {1: 255}
        if shape is not None:
            assert case.image.shape[:2] == shape


def test_sammed2d_per_object_masks(shared_data: Path) -> None:
    root = shared_data / "sammed2d_ct_2d"
    images = sorted((root / "images").glob("*.png"))
    assert len(images) == 5
    with_masks = [p for p in images if sammed2d_mask_files(p)]
    assert len(with_masks) == 4  # amos_0507_31 has no mask in the demo data
    assert sum(len(sammed2d_mask_files(p)) for p in images) == 30
    for image_path in with_masks:
        case = read_sammed2d(image_path)
        masks = sammed2d_mask_files(image_path)
        assert case.kind == "image" and case.image.shape[-1] == 3
        assert set(case.label_names) == set(range(1, len(masks) + 1))
        assert set(case.label_values()) <= set(case.label_names)
    case = read_sammed2d(root / "images" / "s0619_32.png")
    names = case.label_names
    assert names[1] == "colon"
    assert "hip_left_000" in names.values() and "hip_left_001" in names.values()
    assert case.image.shape == (155, 225, 3)


def test_sammed2d_json_maps_agree(shared_data: Path) -> None:
    import json

    root = shared_data / "sammed2d_ct_2d"
    image_to_masks = json.loads((root / "image2label_train.json").read_text())
    for image_rel, mask_rels in image_to_masks.items():
        found = {p.name for p in sammed2d_mask_files(root / "images" / Path(image_rel).name)}
        assert found == {Path(m).name for m in mask_rels}


def test_find_label_file_handles_nnunet_channel_suffix(tmp_path: Path) -> None:
    (tmp_path / "labelsTr").mkdir()
    (tmp_path / "labelsTr" / "case_7.nii.gz").write_bytes(b"x")
    assert find_label_file(tmp_path / "imagesTr" / "case_7_0000.nii.gz", tmp_path / "labelsTr").name == "case_7.nii.gz"
    assert find_label_file(tmp_path / "imagesTr" / "case_8_0000.nii.gz", tmp_path / "labelsTr") is None


def test_case_type(shared_data: Path) -> None:
    case = read_case(shared_data / "ham10000_2d" / "images" / "ISIC_0024311.jpg")
    assert isinstance(case, Case) and case.label is None
