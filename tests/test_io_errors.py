"""Bad input gives a DataError (or subclass) whose message names the file and the problem."""
from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval.core.errors import DataError, GeometryMismatchError, UnknownFormatError
from napari_medsam_eval.io import GeometryWarning, read_case, read_label, to_label_array

HIPPO = "hippocampus_mri"


def _hippo(shared_data: Path, number: str) -> tuple[Path, Path]:
    name = f"hippocampus_{number}.nii.gz"
    return shared_data / HIPPO / "imagesTr" / name, shared_data / HIPPO / "labelsTr" / name


def _write(array: np.ndarray, path: Path, spacing=(1.0, 1.0, 1.0), origin=None) -> Path:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(spacing[: image.GetDimension()])
    if origin is not None:
        image.SetOrigin(origin)
    sitk.WriteImage(image, str(path))
    return path


def test_truncated_nii_gz(shared_data: Path, tmp_path: Path) -> None:
    source, _ = _hippo(shared_data, "001")
    data = source.read_bytes()
    broken = tmp_path / "half.nii.gz"
    broken.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="half.nii.gz.*truncated") as info:
        read_case(broken)
    assert info.value.path == broken
    assert len(str(info.value)) < 300


def test_truncated_plain_nii(shared_data: Path, tmp_path: Path) -> None:
    source, _ = _hippo(shared_data, "001")
    plain = tmp_path / "plain.nii"
    sitk.WriteImage(sitk.ReadImage(str(source)), str(plain))
    data = plain.read_bytes()
    plain.write_bytes(data[: len(data) - 100])
    with pytest.raises(DataError, match="plain.nii.*truncated"):
        read_case(plain)


def test_text_file_named_nii_gz(tmp_path: Path) -> None:
    fake = tmp_path / "notes.nii.gz"
    fake.write_text("this is not an image\n")
    with pytest.raises(DataError, match="notes.nii.gz.*text file"):
        read_case(fake)


def test_garbage_nii_gz_gets_short_message(tmp_path: Path) -> None:
    fake = tmp_path / "garbage.nii.gz"
    fake.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 4)
    with pytest.raises(DataError, match="garbage.nii.gz") as info:
        read_case(fake)
    assert "sitk::ERROR" not in str(info.value) and "\n" not in str(info.value)


def test_missing_file_and_empty_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nowhere.nii.gz: file not found"):
        read_case(tmp_path / "nowhere.nii.gz")
    empty = tmp_path / "empty.nii.gz"
    empty.write_bytes(b"")
    with pytest.raises(DataError, match="empty.nii.gz.*empty"):
        read_case(empty)


def test_unknown_format(tmp_path: Path) -> None:
    odd = tmp_path / "scan.xyz"
    odd.write_text("1 2 3")
    with pytest.raises(UnknownFormatError, match="scan.xyz.*unknown format"):
        read_case(odd)
    empty_dir = tmp_path / "nothing_here"
    empty_dir.mkdir()
    with pytest.raises(UnknownFormatError, match="nothing_here"):
        read_case(empty_dir)


def test_mismatched_pair_shape(shared_data: Path) -> None:
    image, _ = _hippo(shared_data, "001")
    _, other_label = _hippo(shared_data, "004")
    assert sitk.ReadImage(str(image)).GetSize() != sitk.ReadImage(str(other_label)).GetSize()
    with pytest.raises(GeometryMismatchError, match="hippocampus_004.nii.gz.*shape.*hippocampus_001.nii.gz"):
        read_case(image, other_label)


@pytest.mark.parametrize("name", ["nan_image.nii.gz", "nan_image.nii", "nan_image.mha"])
def test_nan_image(tmp_path: Path, name: str) -> None:
    """NIfTI needs its own check: ITK < 6 silently turns stored NaNs into 0 when reading."""
    volume = np.ones((4, 5, 6), np.float32)
    volume[1, 2, 3] = np.nan
    volume[0, 0, 0] = np.inf
    path = _write(volume, tmp_path / name)
    with pytest.raises(DataError, match=f"{name}: .* 2 non-finite voxel.*1 NaN"):
        read_case(path)


def test_nan_in_npz(tmp_path: Path) -> None:
    imgs = np.zeros((3, 8, 8), np.float32)
    imgs[0, 0, 0] = np.nan
    path = tmp_path / "MR_nan.npz"
    np.savez(path, imgs=imgs)
    with pytest.raises(DataError, match="MR_nan.npz.*1 NaN"):
        read_case(path)


def test_float_nifti_with_zeros_but_no_nan_reads(tmp_path: Path) -> None:
    path = _write(np.zeros((4, 5, 6), np.float64), tmp_path / "zeros.nii.gz")
    assert read_case(path).image.dtype == np.float64


def test_fractional_label(tmp_path: Path) -> None:
    image = _write(np.zeros((4, 5, 6), np.float32), tmp_path / "img.nii.gz")
    label = np.zeros((4, 5, 6), np.float32)
    label[0, 0, 0] = 0.5
    label_path = _write(label, tmp_path / "frac_label.nii.gz")
    with pytest.raises(DataError, match="frac_label.nii.gz.*non-integer.*0.5"):
        read_case(image, label_path)


def test_integral_float_label_is_cast(tmp_path: Path) -> None:
    image = _write(np.zeros((4, 5, 6), np.float32), tmp_path / "img.nii.gz")
    label_path = _write(np.full((4, 5, 6), 2.0, np.float32), tmp_path / "float_label.nii.gz")
    case = read_case(image, label_path)
    assert case.label.dtype == np.uint8 and case.label_values() == [2]


def test_label_dtype_rules() -> None:
    assert to_label_array(np.array([0, 255], np.int64), None).dtype == np.uint8
    assert to_label_array(np.array([0, 256]), None).dtype == np.uint16
    assert to_label_array(np.array([0, 70000]), None).dtype == np.int32
    assert to_label_array(np.array([True, False]), None).dtype == np.uint8
    with pytest.raises(DataError, match="negative"):
        to_label_array(np.array([-1, 0]), "neg.png")
    with pytest.raises(DataError, match="NaN"):
        to_label_array(np.array([np.nan, 0]), "nan.png")


def test_4d_nifti_where_3d_expected(shared_data: Path, tmp_path: Path) -> None:
    source, _ = _hippo(shared_data, "001")
    volume = sitk.ReadImage(str(source))
    path = tmp_path / "four_d.nii.gz"
    sitk.WriteImage(sitk.JoinSeries([volume, volume]), str(path))
    with pytest.raises(DataError, match="four_d.nii.gz.*4D image.*3D image was expected"):
        read_case(path)
    with pytest.raises(DataError, match="four_d.nii.gz.*4D"):
        read_label(path)


def test_geometry_mismatch_spacing_and_origin(tmp_path: Path) -> None:
    image = _write(np.zeros((4, 5, 6), np.uint8), tmp_path / "img.nii.gz", spacing=(1.0, 1.0, 2.0))
    wrong_spacing = _write(np.zeros((4, 5, 6), np.uint8), tmp_path / "sp_label.nii.gz", spacing=(1.0, 1.0, 2.5))
    with pytest.raises(GeometryMismatchError, match="sp_label.nii.gz.*spacing"):
        read_case(image, wrong_spacing)
    shifted = _write(np.zeros((4, 5, 6), np.uint8), tmp_path / "or_label.nii.gz", spacing=(1.0, 1.0, 2.0),
                     origin=(0.0, 0.0, 1.5))
    with pytest.raises(GeometryMismatchError, match="or_label.nii.gz.*origin"):
        read_case(image, shifted)


def test_small_geometry_difference_warns_but_reads(tmp_path: Path) -> None:
    image = _write(np.zeros((4, 5, 6), np.uint8), tmp_path / "img.nii.gz")
    nudged = _write(np.zeros((4, 5, 6), np.uint8), tmp_path / "nudged.nii.gz", origin=(0.0, 0.01, 0.0))
    with pytest.warns(GeometryWarning, match="nudged.nii.gz"):
        case = read_case(image, nudged)
    assert case.label is not None
    same = _write(np.zeros((4, 5, 6), np.uint8), tmp_path / "same.nii.gz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_case(image, same)


def test_corrupt_npz_and_npz_without_imgs(tmp_path: Path) -> None:
    good = tmp_path / "good.npz"
    np.savez_compressed(good, imgs=np.zeros((3, 8, 8), np.uint8))
    data = good.read_bytes()
    broken = tmp_path / "broken.npz"
    broken.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="broken.npz.*npz"):
        read_case(broken)
    other = tmp_path / "other.npz"
    np.savez(other, pixels=np.zeros((3, 3)))
    with pytest.raises(DataError, match="other.npz.*no 'imgs' key.*pixels"):
        read_case(other)


def test_npz_gts_shape_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "CT_bad.npz"
    np.savez(path, imgs=np.zeros((3, 8, 8), np.uint8), gts=np.zeros((3, 8, 7), np.uint8))
    with pytest.raises(GeometryMismatchError, match="CT_bad.npz.*gts shape"):
        read_case(path)


def test_corrupt_png(tmp_path: Path, shared_data: Path) -> None:
    source = shared_data / "ham10000_2d" / "masks" / "ISIC_0024311.png"
    broken = tmp_path / "broken_mask.png"
    broken.write_bytes(source.read_bytes()[:40])
    image = shared_data / "ham10000_2d" / "images" / "ISIC_0024311.jpg"
    with pytest.raises(DataError, match="broken_mask.png"):
        read_case(image, broken)


def test_wrong_kind_request(shared_data: Path) -> None:
    image, _ = _hippo(shared_data, "001")
    with pytest.raises(DataError, match="hippocampus_001.nii.gz.*kind='image'"):
        read_case(image, kind="image")
    with pytest.raises(ValueError, match="kind must be"):
        read_case(image, kind="movie")  # type: ignore[arg-type]


def test_copying_a_dataset_file_keeps_reading(shared_data: Path, tmp_path: Path) -> None:
    """Sanity for the error tests above: an intact copy in tmp_path reads fine."""
    source, label = _hippo(shared_data, "001")
    copy = tmp_path / source.name
    shutil.copy(source, copy)
    assert read_case(copy, label).label is not None
