"""MedSAM/CVPR npz: spacing order, 2D vs 3D, boxes, modality from the file name."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.io import guess_modality, read_case


def test_spacing_xyz_is_reversed(tmp_path: Path) -> None:
    path = tmp_path / "MR_Brain_001.npz"
    np.savez(path, imgs=np.zeros((4, 6, 8), np.uint8), gts=np.zeros((4, 6, 8), np.uint8),
             spacing=np.array([0.5, 0.7, 3.0]), boxes=np.array([[1, 2, 3, 4, 5, 6]]))
    case = read_case(path)
    assert case.kind == "volume"
    assert case.spacing.axes == "zyx" and case.spacing.values == pytest.approx((3.0, 0.7, 0.5))
    assert case.spacing.xyz() == pytest.approx((0.5, 0.7, 3.0))
    assert case.modality == "MR"
    np.testing.assert_array_equal(case.metadata["boxes"], [[1, 2, 3, 4, 5, 6]])
    assert case.label_values() == []


def test_2d_rgb_npz_is_an_image(tmp_path: Path) -> None:
    path = tmp_path / "Dermoscopy_ISIC_0001.npz"
    gts = np.zeros((6, 8), np.uint8)
    gts[1:3, 2:5] = 1
    np.savez(path, imgs=np.zeros((6, 8, 3), np.uint8), gts=gts)
    case = read_case(path)
    assert case.kind == "image" and case.image.shape == (6, 8, 3)
    assert case.spacing.axes == "yx" and case.spacing.values == (1.0, 1.0)
    assert case.modality == "Dermoscopy" and case.label_values() == [1]


def test_volume_with_three_columns_is_not_mistaken_for_rgb(tmp_path: Path) -> None:
    path = tmp_path / "CT_thin.npz"
    np.savez(path, imgs=np.zeros((5, 6, 3), np.int16), gts=np.zeros((5, 6, 3), np.uint8),
             spacing=np.array([1.0, 1.0, 2.0]))
    assert read_case(path).kind == "volume"
    no_gts = tmp_path / "CT_thin_no_gts.npz"
    np.savez(no_gts, imgs=np.zeros((5, 6, 3), np.int16))
    assert read_case(no_gts).kind == "image", "without gts the (H, W, 3) reading wins"
    assert read_case(no_gts, kind="volume").kind == "volume"


def test_4d_npz_only_as_video(tmp_path: Path) -> None:
    path = tmp_path / "US_clip.npz"
    np.savez(path, imgs=np.zeros((4, 6, 8, 3), np.uint8), gts=np.zeros((4, 6, 8), np.uint8))
    with pytest.raises(DataError, match="US_clip.npz.*4D imgs"):
        read_case(path)
    case = read_case(path, kind="video")
    assert case.kind == "video" and case.spatial_shape == (4, 6, 8) and case.spacing.axes == "tyx"


def test_bad_spacing_length(tmp_path: Path) -> None:
    path = tmp_path / "CT_bad_spacing.npz"
    np.savez(path, imgs=np.zeros((4, 6, 8), np.uint8), spacing=np.array([1.0, 1.0]))
    with pytest.raises(DataError, match="CT_bad_spacing.npz.*spacing"):
        read_case(path)


@pytest.mark.parametrize("name, modality", [
    ("CT_Lesion_000001.npz", "CT"), ("MR_x.npz", "MR"), ("PET_y.npz", "PET"), ("US_z.npz", "US"),
    ("XRay_chest.npz", "XRay"), ("hippocampus_001.nii.gz", None), ("case.png", None),
])
def test_guess_modality(name: str, modality: str | None) -> None:
    assert guess_modality(name) == modality
