"""The ``dicom`` dataset layout: ``<case>/image/`` DICOM series + ``<case>/label.nii.gz``.

The series are written here with SimpleITK from hippocampus_mri volumes (with
a changed spacing and origin, so geometry is really carried through), each
with the volume's real label beside it.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from dicom_series import write_series

from napari_medsam_eval.datasets import detect_layout, get_layout
from napari_medsam_eval.core.errors import DataError

SPACING = (0.9, 0.8, 1.5)
ORIGIN = (10.0, -20.0, 30.0)
CASES = ("hippocampus_001", "hippocampus_004")


@pytest.fixture
def dicom_dataset(shared_data: Path, tmp_path: Path) -> tuple[Path, dict[str, tuple[sitk.Image, sitk.Image]]]:
    """``tmp_path/dicom_ds`` with two cases (one written without the .dcm suffix) and dataset.json."""
    hippo = shared_data / "hippocampus_mri"
    root = tmp_path / "dicom_ds"
    sources = {}
    for number, case in enumerate(CASES, start=1):
        volume = sitk.Cast(sitk.ReadImage(str(hippo / "imagesTr" / f"{case}.nii.gz")), sitk.sitkInt16)
        volume.SetSpacing(SPACING)
        volume.SetOrigin(ORIGIN)
        label = sitk.Cast(sitk.ReadImage(str(hippo / "labelsTr" / f"{case}.nii.gz")), sitk.sitkUInt8)
        label.CopyInformation(volume)
        write_series(volume, root / case / "image", f"1.2.826.0.1.3680043.2.1125.{number}", prefix="IM",
                      suffix=".dcm" if number == 1 else "")
        sitk.WriteImage(label, str(root / case / "label.nii.gz"))
        sources[case] = (volume, label)
    shutil.copy(hippo / "dataset.json", root / "dataset.json")
    return root, sources


def test_dicom_series_dataset_is_detected_listed_and_loaded(dicom_dataset):
    root, sources = dicom_dataset
    layout = detect_layout(root)
    assert layout.name == "dicom" and get_layout("dicom-series") is layout
    refs = layout.list_cases(root)
    assert [r.case_id for r in refs] == list(CASES)
    assert all(r.kind == "volume" and r.layout == "dicom" for r in refs)
    for ref in refs:
        volume, label = sources[ref.case_id]
        case = layout.load(ref)
        np.testing.assert_array_equal(case.image, sitk.GetArrayFromImage(volume))
        np.testing.assert_array_equal(case.label, sitk.GetArrayFromImage(label))
        assert case.kind == "volume" and case.spacing.axes == "zyx"
        assert case.spacing.values == pytest.approx(SPACING[::-1])
        assert case.metadata["origin"] == pytest.approx(ORIGIN)
        assert case.metadata["direction"] == pytest.approx(volume.GetDirection())
        assert case.modality == "MR"
        assert case.label_names == {1: "anterior", 2: "posterior"}
        assert [t.key for t in layout.targets(ref, case)] == [1, 2]


def test_dicom_case_without_label_or_series_is_listed_and_fails(dicom_dataset, tmp_path):
    root, _ = dicom_dataset
    layout = get_layout("dicom")
    (root / "zz_no_label" / "image").mkdir(parents=True)
    shutil.copytree(root / CASES[0] / "image", root / "zz_no_label" / "image", dirs_exist_ok=True)
    (root / "zz_no_series").mkdir()
    shutil.copy(root / CASES[0] / "label.nii.gz", root / "zz_no_series" / "label.nii.gz")
    (root / "zz_gone").symlink_to(tmp_path / "gone")
    refs = {r.case_id: r for r in layout.list_cases(root)}
    assert sorted(refs) == sorted([*CASES, "zz_gone", "zz_no_label", "zz_no_series"])
    with pytest.raises(DataError, match="zz_no_label: case zz_no_label: no label file"):
        layout.load(refs["zz_no_label"])
    with pytest.raises(DataError, match="zz_no_series: case zz_no_series has no image/ folder"):
        layout.load(refs["zz_no_series"])
    with pytest.raises(DataError, match="zz_gone: case zz_gone: broken symbolic link"):
        layout.load(refs["zz_gone"])
    # a label that does not fit its series is refused by the pairing checks
    moved = sitk.ReadImage(str(root / CASES[1] / "label.nii.gz"))
    moved.SetOrigin((50.0, 0.0, 0.0))
    sitk.WriteImage(moved, str(root / CASES[1] / "label.nii.gz"))
    with pytest.raises(DataError, match="label.nii.gz: geometry mismatch: label origin"):
        layout.load(refs[CASES[1]])


def test_dicom_layout_is_detected_only_when_unambiguous(dicom_dataset, shared_data, tmp_path):
    root, _ = dicom_dataset
    layout = get_layout("dicom")
    assert not layout.detect(shared_data / "hippocampus_mri")
    assert detect_layout(shared_data / "hippocampus_mri").name == "msd"
    series_only = tmp_path / "series_only"
    shutil.copytree(root / CASES[0] / "image", series_only / "a" / "image")
    assert not layout.detect(series_only), "DICOM series without labels are not this layout"
    not_dicom = tmp_path / "not_dicom"
    (not_dicom / "a" / "image").mkdir(parents=True)
    (not_dicom / "a" / "image" / "notes.txt").write_text("no DICOM here")
    (not_dicom / "a" / "label.nii.gz").write_bytes((root / CASES[0] / "label.nii.gz").read_bytes())
    assert not layout.detect(not_dicom)
    info = json.loads((root / "dataset.json").read_text())
    assert info["labels"]["1"] == "anterior"  # the names the loaded cases carry come from here
