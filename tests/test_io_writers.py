"""Writers: a mask written for a case overlays it (geometry copied) and reads back the same."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval.core.errors import GeometryMismatchError, UnknownFormatError
from napari_medsam_eval.io import read_case, read_label, write_mask
from napari_medsam_eval.io import writers


def _brats(shared_data: Path):
    root = shared_data / "brats2021_flair"
    name = "BraTS2021_01646.nii.gz"
    return read_case(root / "imagesTr" / name, root / "labelsTr" / name), root / "imagesTr" / name


@pytest.mark.parametrize("suffix", [".nii.gz", ".nii", ".nrrd", ".mha"])
def test_sitk_round_trip_keeps_geometry(shared_data: Path, tmp_path: Path, suffix: str) -> None:
    case, image_path = _brats(shared_data)
    out = write_mask(case.label, tmp_path / f"pred{suffix}", case)
    written, source = sitk.ReadImage(str(out)), sitk.ReadImage(str(image_path))
    assert written.GetSize() == source.GetSize()
    assert written.GetSpacing() == pytest.approx(source.GetSpacing())
    assert written.GetOrigin() == pytest.approx(source.GetOrigin())
    assert written.GetDirection() == pytest.approx(source.GetDirection())
    back = read_case(image_path, out)
    np.testing.assert_array_equal(back.label, case.label)


def test_hippocampus_geometry_round_trip(shared_data: Path, tmp_path: Path) -> None:
    image_path = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    case = read_case(image_path)
    mask = (case.image > np.median(case.image)).astype(np.uint8)
    out = write_mask(mask, tmp_path / "sub" / "hippocampus_001.nii.gz", case)
    back = read_case(image_path, out)
    np.testing.assert_array_equal(back.label, mask)
    assert back.metadata["origin"] == case.metadata["origin"]


def test_npz_round_trip_spacing_xyz(shared_data: Path, tmp_path: Path) -> None:
    source = shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz"
    case = read_case(source)
    out = write_mask(case.label, tmp_path / "CT_Lesion_000001_02_01_008-023.npz", case)
    with np.load(out) as data:
        assert "segs" in data.files
        np.testing.assert_array_equal(data["segs"], case.label)
        assert data["spacing"][2] == pytest.approx(5.0), "npz spacing is stored x, y, z"
        np.testing.assert_allclose(data["spacing"], np.load(source)["spacing"])
    label = read_label(out, reference=case)
    np.testing.assert_array_equal(label.array, case.label)
    assert label.geometry["spacing"][2] == pytest.approx(5.0)
    assert read_case(source, out).metadata["replaced_embedded_label"] is True


def test_npz_for_nifti_volume(shared_data: Path, tmp_path: Path) -> None:
    case, _ = _brats(shared_data)
    out = write_mask(case.label.astype(bool), tmp_path / "pred.npz", case)
    with np.load(out) as data:
        assert data["segs"].dtype == np.uint8 and data["segs"].shape == (104, 160, 160)
        assert tuple(data["spacing"]) == pytest.approx((1.5, 1.5, 1.5))
        assert tuple(data["origin"]) == pytest.approx(case.metadata["origin"])


def test_png_mask_for_2d_image(shared_data: Path, tmp_path: Path) -> None:
    image = shared_data / "ham10000_2d" / "images" / "ISIC_0024311.jpg"
    case = read_case(image, shared_data / "ham10000_2d" / "masks" / "ISIC_0024311.png")
    out = write_mask(case.label, tmp_path / "ISIC_0024311.png", case)
    back = read_case(image, out)
    np.testing.assert_array_equal(back.label, case.label)
    volume, _ = _brats(shared_data)
    with pytest.raises(Exception, match="PNG masks are for 2D images"):
        write_mask(volume.label, tmp_path / "volume.png", volume)


def test_2d_nifti_for_2d_image(shared_data: Path, tmp_path: Path) -> None:
    image = shared_data / "kvasir_seg_2d" / "images" / "cju0qoxqj9q6s0835b43399p4.jpg"
    case = read_case(image, shared_data / "kvasir_seg_2d" / "masks" / "cju0qoxqj9q6s0835b43399p4.png")
    out = write_mask(case.label, tmp_path / "pred.nii.gz", case)
    assert sitk.ReadImage(str(out)).GetDimension() == 2
    np.testing.assert_array_equal(read_case(image, out).label, case.label)


def test_writer_refuses_bad_input(shared_data: Path, tmp_path: Path) -> None:
    case, _ = _brats(shared_data)
    with pytest.raises(GeometryMismatchError, match="bad_shape.nii.gz.*shape"):
        write_mask(np.zeros((3, 3, 3), np.uint8), tmp_path / "bad_shape.nii.gz", case)
    with pytest.raises(UnknownFormatError, match="pred.jpg"):
        write_mask(case.label, tmp_path / "pred.jpg", case)
    assert not any(tmp_path.iterdir())


def test_failed_write_leaves_no_file(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case, _ = _brats(shared_data)
    target = tmp_path / "pred.nii.gz"
    target.write_bytes(b"previous result")

    def explode(image, path, useCompression=False):
        Path(path).write_bytes(b"partial")
        raise RuntimeError("disk full")

    monkeypatch.setattr(writers.sitk, "WriteImage", explode)
    with pytest.raises(Exception, match="disk full"):
        write_mask(case.label, target, case)
    assert target.read_bytes() == b"previous result"
    assert [p.name for p in tmp_path.iterdir()] == ["pred.nii.gz"], "the temporary file is cleaned up"
