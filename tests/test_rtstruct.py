"""RTSTRUCT as ground truth: each ROI rasterised on its series' grid, checked against rt-utils and refused
with a message naming the ROI when it does not fit (../shared/data/dicom_seg_rtstruct, PROVENANCE.md).

rt-utils is installed with ``pip install --no-deps rt-utils`` (its opencv-python requirement would replace the
project's headless OpenCV); the tests comparing with it are skipped without it, the rest need nothing more."""
from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pydicom
import pytest
import SimpleITK as sitk
from dicom_series import write_series
from rtstruct_writer import write_rtstruct
from scipy import ndimage

from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.datasets import detect_layout
from napari_medsam_eval.io import read_case, read_label
from napari_medsam_eval.io.dicom_objects import DicomObjectWarning
from napari_medsam_eval.io.rtstruct import fill_contours

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "phantom_ct"


@pytest.fixture(scope="module")
def rt_data(shared_data: Path) -> Path:
    return shared_data / "dicom_seg_rtstruct"


def _phantom_objects() -> dict[str, np.ndarray]:
    label = sitk.GetArrayFromImage(sitk.ReadImage(str(SAMPLE / "label.nii.gz")))
    return {"liver": np.isin(label, (1, 3)), "kidney": label == 2, "lesion": label == 3}


def _phantom_series(folder: Path) -> list[Path]:
    image = sitk.Cast(sitk.ReadImage(str(SAMPLE / "image.nii.gz")), sitk.sitkInt16)
    return write_series(image, folder, "1.2.826.0.1.3680043.2.1125.7.1")


@pytest.fixture(scope="module")
def phantom_series(tmp_path_factory) -> Path:
    """The CT phantom written as a DICOM series with an RTSTRUCT of its three objects (the lesion inside the
    liver), its contours scikit-image's iso-lines between the pixel centres in and out (tests/rtstruct_writer.py)."""
    folder = tmp_path_factory.mktemp("phantom") / "series"
    write_rtstruct(_phantom_series(folder), _phantom_objects(), folder / "rs.dcm")
    return folder


@pytest.fixture(scope="module")
def rt_utils_series(tmp_path_factory) -> Path:
    """The same, its RTSTRUCT written by rt-utils (contours through the boundary pixels' centres)."""
    import rt_utils  # make install: pip install --no-deps rt-utils (docs/clinical-dicom.md)

    folder = tmp_path_factory.mktemp("phantom_rt_utils") / "series"
    _phantom_series(folder)
    builder = rt_utils.RTStructBuilder.create_new(dicom_series_path=str(folder))
    for name, mask in _phantom_objects().items():
        builder.add_roi(mask=np.moveaxis(mask, 0, 2), name=name)  # rt-utils takes (rows, columns, slices)
    builder.save(str(folder / "rs.dcm"))
    return folder


@pytest.mark.parametrize("writer", ["pydicom", "rt-utils"])
def test_phantom_rtstruct_reads_back_each_object_exactly(writer: str, request) -> None:
    """Contours between pixel centres (pydicom's file) or through the boundary pixels' centres (rt-utils'): by
    the documented rule (a centre inside or on the contour is in) every object comes back voxel for voxel,
    the lesion inside the liver too."""
    folder = request.getfixturevalue("phantom_series" if writer == "pydicom" else "rt_utils_series")
    case = read_case(folder)  # the series folder holding its RTSTRUCT: the RTSTRUCT is the label
    assert case.metadata["dicom_objects"] == "RTSTRUCT"
    targets = {t.name: t for t in case.metadata["targets"]}
    assert list(targets) == ["liver", "kidney", "lesion"]
    for name, expected in _phantom_objects().items():
        np.testing.assert_array_equal(targets[name].mask(case.label), expected, err_msg=name)
    liver, lesion = targets["liver"].mask(case.label), targets["lesion"].mask(case.label)
    assert lesion.sum() == 441 and (liver & lesion).sum() == 441  # nested: the liver keeps the lesion's voxels


def test_rt_utils_reads_the_same_phantom_masks(rt_utils_series: Path) -> None:
    from rt_utils import RTStructBuilder

    ours = read_case(rt_utils_series)
    theirs = RTStructBuilder.create_from(str(rt_utils_series), str(rt_utils_series / "rs.dcm"))
    for target in ours.metadata["targets"]:
        mask = np.moveaxis(theirs.get_roi_mask_by_name(target.name), 2, 0)
        np.testing.assert_array_equal(target.mask(ours.label), mask, err_msg=target.name)


def test_rt_utils_reads_contours_between_centres_one_pixel_wider(phantom_series: Path) -> None:
    """The pydicom file's contours run between pixel centres: rt-utils (rounded vertices, OpenCV's fillPoly) takes
    each object with the one-pixel ring outside it; we take the object exactly (docs/clinical-dicom.md)."""
    from rt_utils import RTStructBuilder

    ours = read_case(phantom_series)
    theirs = RTStructBuilder.create_from(str(phantom_series), str(phantom_series / "rs.dcm"))
    counts = {}
    for target in ours.metadata["targets"]:
        mine, other = target.mask(ours.label), np.moveaxis(theirs.get_roi_mask_by_name(target.name), 2, 0)
        ring = ndimage.binary_dilation(mine, structure=np.ones((1, 3, 3), bool)) & ~mine
        assert not (mine & ~other).any() and not (other & ~mine & ~ring).any(), target.name
        counts[target.name] = (int(mine.sum()), int(other.sum()))
    assert counts == {"liver": (21762, 23159), "kidney": (1938, 2265), "lesion": (441, 541)}


def test_mock_rtstruct_agrees_with_rt_utils_within_one_pixel(rt_data: Path) -> None:
    """rt-utils' mock contour runs between pixel centres: rt-utils rounds its vertices and fills with OpenCV,
    taking the pixels the outline passes through; we take the centres inside it. Its mask holds ours, and adds
    only the one-pixel ring around our boundary (1443 vs 1660 voxels: docs/clinical-dicom.md)."""
    from rt_utils import RTStructBuilder

    folder = rt_data / "rt_utils" / "mock_data"
    with pytest.warns(DicomObjectWarning, match="frame of reference .* is not its series'"):
        case = read_case(folder, folder / "rt.dcm")
    ours = case.metadata["targets"][0].mask(case.label)
    theirs = np.moveaxis(RTStructBuilder.create_from(str(folder), str(folder / "rt.dcm"))
                         .get_roi_mask_by_name("ROI-1"), 2, 0)
    assert (ours.sum(), theirs.sum()) == (1443, 1660)
    assert not (ours & ~theirs).any()
    ring = ndimage.binary_dilation(ours, structure=np.ones((1, 3, 3), bool)) & ~ours
    assert not (theirs & ~ours & ~ring).any()


def test_even_odd_rule_makes_a_hole_and_counts_centres_on_the_edge() -> None:
    outer = (np.array([1.0, 1.0, 8.0, 8.0]), np.array([1.0, 8.0, 8.0, 1.0]))
    inner = (np.array([3.0, 3.0, 6.0, 6.0]), np.array([3.0, 6.0, 6.0, 3.0]))
    mask = fill_contours([outer, inner], (10, 10))
    expected = np.zeros((10, 10), bool)
    expected[1:9, 1:9] = True
    expected[3:7, 3:7] = False  # the inner contour is a hole, its edge pixels with it
    np.testing.assert_array_equal(mask, expected)
    between = (np.array([1.5, 1.5, 3.5, 3.5]), np.array([1.5, 3.5, 3.5, 1.5]))
    assert fill_contours([between], (10, 10)).sum() == 4  # centres (2..3, 2..3) only


@pytest.mark.parametrize("name, message", [
    ("mock_data/invalid_reference_rt.dcm", r"ROI 'ROI-1': 1 of 3 contours lie on slices the series does not have "
                                           r"\(z 70 mm\).*ROI 'ROI-4'"),
    ("mock_data/non_existent_reference_rt.dcm", r"ROI 'ROI-1': 1 of 3 contours lie on slices the series does not "
                                                r"have \(z 70 mm\)"),
])
def test_invalid_rt_utils_files_refused_naming_the_roi(rt_data: Path, name: str, message: str) -> None:
    with pytest.raises(DataError, match=message):
        read_case(rt_data / "rt_utils" / "mock_data", rt_data / "rt_utils" / name)


def test_dicompyler_plan_on_one_slice_refused_naming_rois(rt_data: Path) -> None:
    with pytest.raises(DataError, match=r"ROI 'BODY': 137 of 141 contours lie on slices the series does not have.*"
                                        r"ROI 'Borders': 2 of 2"):
        read_case(rt_data / "dicompyler", rt_data / "dicompyler" / "rtss.dcm")


def test_rtstruct_whose_series_is_absent_or_another(rt_data: Path, tmp_path: Path) -> None:
    shutil.copy(rt_data / "rt_utils" / "empty" / "dummy_rt.dcm", tmp_path / "dummy_rt.dcm")
    with pytest.raises(DataError, match=r"its image series 2\.16\.840\.1\.114362.*is not there \(looked in"):
        read_label(tmp_path / "dummy_rt.dcm")
    with pytest.raises(DataError, match=r"the RTSTRUCT belongs to another series: it references series "
                                        r"2\.16\.840\.1\.114362.*the image is series 1\.2\.392"):
        read_case(rt_data / "dcmqi" / "ct-3slice", rt_data / "rt_utils" / "mock_data" / "rt.dcm")


def test_roi_without_contour_is_said_not_an_empty_target(phantom_series: Path, tmp_path: Path) -> None:
    folder = tmp_path / "series"
    shutil.copytree(phantom_series, folder)
    ds = pydicom.dcmread(str(folder / "rs.dcm"))
    kidney = next(r.ROINumber for r in ds.StructureSetROISequence if r.ROIName == "kidney")
    for item in ds.ROIContourSequence:
        if item.ReferencedROINumber == kidney:
            del item.ContourSequence
    ds.save_as(str(folder / "rs.dcm"))
    with pytest.warns(DicomObjectWarning, match="ROI 'kidney' has no closed contour: not a target"):
        case = read_case(folder)
    assert [t.name for t in case.metadata["targets"]] == ["liver", "lesion"]
    assert any("kidney" in note for note in case.metadata["notes"])


def test_dicom_dataset_of_studies_scores_each_roi(phantom_series: Path, rt_data: Path, tmp_path: Path) -> None:
    """The DICOM layout with a SEG or RTSTRUCT beside each case's series: each segment/ROI a target."""
    root = tmp_path / "studies"
    shutil.copytree(phantom_series, root / "phantom" / "image", ignore=shutil.ignore_patterns("rs.dcm"))
    shutil.copy(phantom_series / "rs.dcm", root / "phantom" / "RS.phantom.dcm")
    shutil.copytree(rt_data / "dcmqi" / "ct-3slice", root / "liver3" / "image")
    shutil.copy(rt_data / "dcmqi" / "partial_overlaps.dcm", root / "liver3" / "seg.dcm")
    layout = detect_layout(root)
    assert layout.name == "dicom"
    refs = layout.list_cases(root)
    found = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DicomObjectWarning)
        for ref in refs:
            case = layout.load(ref)
            found[ref.case_id] = [(t.name, t.key, int(t.mask(case.label).sum())) for t in layout.targets(ref, case)]
    assert found["phantom"] == [("liver", 1, 21762), ("kidney", 2, 1938), ("lesion", 3, 441)]
    assert [name for name, _, _ in found["liver3"]] == ["GREEN", "ORANGE", "PURPLE", "LIGHT_BLUE", "DARK_BLUE"]
    # `run` scores each ROI / segment as a target, on its own mask (the oracle model answers with the truth)
    import pandas as pd

    from napari_medsam_eval.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DicomObjectWarning)
        assert main(["run", str(root), "--model", "oracle", "--out", str(tmp_path / "run"), "--quiet",
                     "--no-report"]) == 0
    rows = pd.read_csv(tmp_path / "run" / "results.csv")
    assert (rows["status"] == "ok").all()
    assert sorted(rows["task"]) == sorted(f"studies/{name}" for names in found.values() for name, _, _ in names)
    by_task = rows.set_index("task")
    assert by_task.loc["studies/lesion", "gt_voxels"] == 441 and by_task.loc["studies/liver", "gt_voxels"] == 21762
    assert by_task.loc["studies/lesion", "dice"] > 0.9 and by_task.loc["studies/GREEN", "dice"] > 0.9


def test_score_against_an_rtstruct_scores_each_roi(phantom_series: Path) -> None:
    """`score PRED RS.dcm`: the series is found beside the RTSTRUCT; each ROI a row by its number, the label map's
    value of that number its prediction (the phantom's label: the liver's value 1 leaves out the lesion's 3)."""
    from napari_medsam_eval.cli.score import score_files

    rows = {row["name"]: row for row in score_files(SAMPLE / "label.nii.gz", phantom_series / "rs.dcm")}
    assert [(name, row["label"]) for name, row in rows.items()] == [("liver", 1), ("kidney", 2), ("lesion", 3)]
    assert rows["kidney"]["dice"] == pytest.approx(1.0) and rows["lesion"]["dice"] == pytest.approx(1.0)
    assert rows["liver"]["dice"] == pytest.approx(2 * 21321 / (21321 + 21762))


def test_grid_maps_points_as_itk_does_on_an_oblique_series(rt_data: Path) -> None:
    """rt-utils' oriented series (oblique rows and columns, 3.5 x 2.5 mm pixels): a patient point goes to the
    same slice, row and column as ITK's index transform says."""
    from napari_medsam_eval.io.dicom import dicom_series_files, read_dicom_series
    from napari_medsam_eval.io.dicom_grid import series_grid

    folder = rt_data / "rt_utils" / "oriented_data"
    image, _ = read_dicom_series(folder)
    grid = series_grid(dicom_series_files(folder)[0])
    for x, y, z in [(0.0, 0.0, 0), (99.0, 49.0, 2), (37.25, 11.5, 1), (3.5, 44.75, 2)]:
        point = np.array(image.TransformContinuousIndexToPhysicalPoint((x, y, float(z))))
        assert grid.slice_of(float(point @ grid.normal)) == z
        np.testing.assert_allclose(grid.to_index(point[np.newaxis], z)[0], (y, x), atol=1e-4)
