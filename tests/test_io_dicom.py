"""DICOM series folders: written here with SimpleITK from a hippocampus volume, read back."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from dicom_series import write_series

from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.io import detect_format, read_case, read_dicom_case

SPACING = (0.9, 0.8, 1.5)
ORIGIN = (10.0, -20.0, 30.0)


def _source_volume(shared_data: Path) -> sitk.Image:
    path = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    volume = sitk.Cast(sitk.ReadImage(str(path)), sitk.sitkInt16)
    volume.SetSpacing(SPACING)
    volume.SetOrigin(ORIGIN)
    return volume


def test_dicom_series_round_trip(shared_data: Path, tmp_path: Path) -> None:
    volume = _source_volume(shared_data)
    write_series(volume, tmp_path / "series", "1.2.826.0.1.3680043.2.1125.1")
    assert detect_format(tmp_path / "series") == "dicom_folder"
    case = read_case(tmp_path / "series")
    assert case.kind == "volume" and case.case_id == "series"
    np.testing.assert_array_equal(case.image, sitk.GetArrayFromImage(volume))
    assert case.spacing.axes == "zyx"
    assert case.spacing.values == pytest.approx(SPACING[::-1])
    assert case.metadata["origin"] == pytest.approx(ORIGIN)
    assert case.metadata["direction"] == pytest.approx(volume.GetDirection())
    assert case.modality == "MR"
    assert case.metadata["dicom_series_id"] == "1.2.826.0.1.3680043.2.1125.1"


def test_dicom_with_nifti_label(shared_data: Path, tmp_path: Path) -> None:
    volume = _source_volume(shared_data)
    write_series(volume, tmp_path / "series", "1.2.826.0.1.3680043.2.1125.1")
    label = sitk.ReadImage(str(shared_data / "hippocampus_mri" / "labelsTr" / "hippocampus_001.nii.gz"))
    label.CopyInformation(volume)
    sitk.WriteImage(label, str(tmp_path / "label.nii.gz"))
    case = read_case(tmp_path / "series", tmp_path / "label.nii.gz")
    assert case.label_values() == [1, 2]


def test_files_without_suffix_are_found_by_marker(shared_data: Path, tmp_path: Path) -> None:
    files = write_series(_source_volume(shared_data)[:, :, :4], tmp_path / "plain", "1.2.826.0.1.3680043.2.1125.1")
    for path in files:
        path.rename(path.with_suffix(""))
    assert detect_format(tmp_path / "plain") == "dicom_folder"
    assert read_case(tmp_path / "plain").image.shape[0] == 4


def test_missing_slice_is_an_error(shared_data: Path, tmp_path: Path) -> None:
    files = write_series(_source_volume(shared_data), tmp_path / "gappy", "1.2.826.0.1.3680043.2.1125.1")
    files[10].unlink()
    with pytest.raises(DataError, match=r"gappy: missing or unevenly spaced DICOM slices.*slice009.dcm.*slice011.dcm"):
        read_case(tmp_path / "gappy")


def test_several_series_need_a_choice(shared_data: Path, tmp_path: Path) -> None:
    volume = _source_volume(shared_data)
    folder = tmp_path / "two"
    write_series(volume[:, :, :5], folder, "1.2.826.0.1.3680043.2.1125.1", prefix="a")
    write_series(volume[:, :, :7], folder, "1.2.826.0.1.3680043.2.1125.2", prefix="b")
    listing = r"two: folder holds 2 DICOM series.*1125\.1 \(5 slices\).*1125\.2 \(7 slices\)"
    with pytest.raises(DataError, match=listing):
        read_case(folder)
    case = read_dicom_case(folder, series_id="1.2.826.0.1.3680043.2.1125.2")
    assert case.image.shape[0] == 7
    with pytest.raises(DataError, match="not in folder"):
        read_case(folder, series_id="9.9")


def test_folder_without_series(tmp_path: Path) -> None:
    folder = tmp_path / "not_dicom"
    folder.mkdir()
    (folder / "junk.dcm").write_bytes(b"\x00" * 200)
    with pytest.raises(DataError, match="not_dicom: no DICOM series found"):
        read_case(folder)


def test_two_in_plane_pixel_spacings_refused(shared_data: Path, tmp_path: Path) -> None:
    """Issue 67: five slices at 0.8 mm and five at 1.2 mm were read with the first slice's spacing."""
    import pydicom

    volume = _source_volume(shared_data)[:, :, :10]
    files = write_series(volume, tmp_path / "series", "1.2.826.0.1.3680043.2.1125.67")
    for path in files[5:]:
        ds = pydicom.dcmread(str(path))
        ds.PixelSpacing = [1.2, 1.2]
        ds.save_as(str(path))
    with pytest.raises(DataError, match=r"2 different in-plane pixel spacings: 0\.8 x 0\.9 mm on 5 slices "
                                        r"\(e\.g\. slice000\.dcm\); 1\.2 x 1\.2 mm on 5 slices"):
        read_case(tmp_path / "series")
