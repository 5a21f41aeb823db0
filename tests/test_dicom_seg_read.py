"""DICOM SEG as ground truth, read against the field's own expectations (dcmqi's label maps, highdicom).

The files are dcmqi's and highdicom's test data (../shared/data/dicom_seg_rtstruct, PROVENANCE.md):
dcmqi's tests make each SEG from the NRRD named beside it and read it back to that NRRD
(TESTS_CMakeLists.txt), so reading the SEG here must give the NRRD's voxels exactly.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pydicom
import pytest
import SimpleITK as sitk

from napari_medsam_eval import api
from napari_medsam_eval.cli.info import describe_case, format_text
from napari_medsam_eval.cli.score import score_files
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.io import read_case, read_label
from napari_medsam_eval.io.dicom_grid import SeriesGrid
from napari_medsam_eval.io.dicom_objects import DicomObjectWarning
from napari_medsam_eval.io.dicom_seg import read_seg


@pytest.fixture(scope="module")
def dicom_data(shared_data: Path) -> Path:
    return shared_data / "dicom_seg_rtstruct"


def _nrrd(path: Path) -> np.ndarray:
    return sitk.GetArrayFromImage(sitk.ReadImage(str(path)))


def _by_name(case) -> dict:
    return {t.name: t for t in case.metadata["targets"]}


def test_liver_gives_liver_seg_nrrd_exactly(dicom_data: Path) -> None:
    dcmqi = dicom_data / "dcmqi"
    case = read_case(dcmqi / "ct-3slice", dcmqi / "liver.dcm")
    liver = _by_name(case)["Liver"]
    assert liver.key == 1 and case.label_names[1] == "Liver"  # its number and name kept (not 255)
    np.testing.assert_array_equal(liver.mask(case.label), _nrrd(dcmqi / "liver_seg.nrrd") == 1)
    assert case.metadata["dicom_objects"] == "SEG"
    # alone (as `score` reads it), the series is found beside it and the geometry is the NRRD's
    alone = read_label(dcmqi / "liver.dcm")
    reference = sitk.ReadImage(str(dcmqi / "liver_seg.nrrd"))
    assert alone.geometry["spacing"] == pytest.approx(reference.GetSpacing(), abs=1e-5)
    assert alone.geometry["origin"] == pytest.approx(reference.GetOrigin(), abs=1e-4)
    assert alone.geometry["direction"] == pytest.approx(reference.GetDirection(), abs=1e-6)


def test_partial_overlaps_give_dcmqi_three_label_maps(dicom_data: Path) -> None:
    """partial_overlaps.dcm holds 5 segments, three of them overlapping: each keeps its own mask, equal to
    the value its number has in the NRRD dcmqi made it from (-1: GREEN, LIGHT_BLUE, DARK_BLUE; -2: ORANGE;
    -3: PURPLE)."""
    dcmqi = dicom_data / "dcmqi"
    case = read_case(dcmqi / "ct-3slice", dcmqi / "partial_overlaps.dcm")
    targets = _by_name(case)
    assert [t.key for t in case.metadata["targets"]] == [1, 2, 3, 4, 5]
    groups = {1: ["GREEN", "LIGHT_BLUE", "DARK_BLUE"], 2: ["ORANGE"], 3: ["PURPLE"]}
    for group, names in groups.items():
        expected = _nrrd(dcmqi / f"partial_overlaps-{group}.nrrd")
        for name in names:
            np.testing.assert_array_equal(targets[name].mask(case.label), expected == targets[name].key, err_msg=name)
    overlap = targets["GREEN"].mask(case.label) & targets["ORANGE"].mask(case.label)
    assert overlap.sum() > 1000  # the overlap is kept in both, not given to one


@pytest.mark.parametrize("size", ["23x38x3", "24x38x3"])
def test_small_series_seg_gives_label_nrrd(dicom_data: Path, size: str) -> None:
    folder = dicom_data / "dcmqi" / size
    case = read_case(folder / "image", folder / "seg" / "label.seg")
    np.testing.assert_array_equal(case.label, _nrrd(folder / "nrrd" / "label.nrrd"))


@pytest.mark.parametrize("name", ["ppv5", "noppv"])
def test_sparse_labelmap_missing_slice_is_empty(dicom_data: Path, name: str) -> None:
    """A LABELMAP SEG with frames on slices 1 and 3 only: slice 2 is empty (dcmqi fills it with the padding
    value 5 or 0, which name no segment); segment 0 is the background, said in a note."""
    dcmqi = dicom_data / "dcmqi"
    with pytest.warns(DicomObjectWarning, match="segment 0 .*background"):
        case = read_case(dcmqi / "24x38x3" / "image", dcmqi / f"sparse-labelmap-{name}.dcm")
    expected = _nrrd(dcmqi / f"sparse_labelmap_{name}_seg.nrrd")
    liver = _by_name(case)["Liver"]
    np.testing.assert_array_equal(liver.mask(case.label), expected == 1)
    assert not liver.mask(case.label)[1].any()


def _grid_of_frames(path: Path) -> SeriesGrid:
    """highdicom's 16x16 SEGs reference a series that is not shipped: a grid of their own frames' positions
    and source instances (what the series would be)."""
    ds = pydicom.dcmread(str(path))
    shared = ds.SharedFunctionalGroupsSequence[0]
    orientation = [float(v) for v in shared.PlaneOrientationSequence[0].ImageOrientationPatient]
    spacing = [float(v) for v in shared.PixelMeasuresSequence[0].PixelSpacing]
    slices = {}
    for frame in ds.PerFrameFunctionalGroupsSequence:
        uid = frame.DerivationImageSequence[0].SourceImageSequence[0].ReferencedSOPInstanceUID
        slices[uid] = [float(v) for v in frame.PlanePositionSequence[0].ImagePositionPatient]
    order = sorted(slices, key=lambda u: slices[u][2])
    return SeriesGrid(str(ds.ReferencedSeriesSequence[0].SeriesInstanceUID), str(ds.FrameOfReferenceUID),
                      tuple(order), np.array([slices[u] for u in order]), np.array(orientation[:3]),
                      np.array(orientation[3:]), (spacing[0], spacing[1]), (len(order), int(ds.Rows), int(ds.Columns)))


@pytest.mark.parametrize("name", ["seg_image_ct_binary", "seg_image_ct_binary_overlap",
                                  "seg_image_ct_binary_fractional", "seg_image_ct_true_fractional"])
def test_highdicom_segs_read_as_highdicom_reads_them(dicom_data: Path, name: str) -> None:
    import highdicom as hd

    path = dicom_data / "highdicom" / f"{name}.dcm"
    grid = _grid_of_frames(path)
    found = read_seg(path, grid)
    seg = hd.seg.segread(str(path))
    numbers = [o.number for o in found.objects]
    theirs = seg.get_pixels_by_source_instance(source_sop_instance_uids=list(grid.sop_uids),
                                               segment_numbers=numbers, combine_segments=False)
    for index, obj in enumerate(found.objects):
        expected = theirs[..., index] >= 0.5 if "fractional" in name else theirs[..., index] > 0
        np.testing.assert_array_equal(obj.mask, expected, err_msg=f"{name} segment {obj.number}")
        assert obj.mask.any()
    if "fractional" in name:
        assert any("thresholded at 0.5" in note for note in found.notes)
    if "overlap" in name:
        assert (found.objects[0].mask & found.objects[1].mask).any()


def test_single_frame_seg_opens_with_its_series_folder(dicom_data: Path, tmp_path: Path) -> None:
    """A series folder holding its SEG opens with the SEG as its ground truth (napari's File > Open, the API)."""
    import highdicom as hd

    from napari_medsam_eval._reader import opened_to_layer_data
    from napari_medsam_eval.datasets.ground_truth_pairing import open_path

    folder = tmp_path / "ct"
    folder.mkdir()
    shutil.copy(dicom_data / "highdicom" / "ct_image.dcm", folder / "ct_image.dcm")
    shutil.copy(dicom_data / "highdicom" / "seg_image_ct_binary_single_frame.dcm", folder / "seg.dcm")
    case = api.read_case(folder)
    seg = hd.seg.segread(str(folder / "seg.dcm"))
    expected = seg.get_pixels_by_source_instance(source_sop_instance_uids=[case_uid(folder / "ct_image.dcm")],
                                                 segment_numbers=[1], combine_segments=False)[..., 0] > 0
    np.testing.assert_array_equal(case.label == 1, expected)
    layers = opened_to_layer_data(open_path(folder))
    assert [kind for _, _, kind in layers] == ["image", "labels"]
    assert layers[1][1]["metadata"]["label_names"] == {1: "first_segment"}
    assert layers[1][1]["metadata"]["targets"] == {1: ("first_segment", (1,))}
    np.testing.assert_array_equal(layers[1][0], case.label)


def case_uid(path: Path) -> str:
    return str(pydicom.dcmread(str(path), stop_before_pixels=True).SOPInstanceUID)


def test_frames_placed_by_position_not_order(dicom_data: Path, tmp_path: Path) -> None:
    """liver.dcm with its frames written in reverse order (pixels and positions together) reads the same."""
    from pydicom.pixels import pack_bits

    dcmqi = dicom_data / "dcmqi"
    ds = pydicom.dcmread(str(dcmqi / "liver.dcm"))
    frames = ds.pixel_array[::-1].copy()
    ds.PerFrameFunctionalGroupsSequence = pydicom.Sequence(list(ds.PerFrameFunctionalGroupsSequence)[::-1])
    ds.PixelData = pack_bits(frames)
    ds.save_as(str(tmp_path / "reversed.dcm"))
    case = read_case(dcmqi / "ct-3slice", tmp_path / "reversed.dcm")
    expected = _nrrd(dcmqi / "liver_seg.nrrd")
    assert (expected[0] != expected[2]).any()  # an order-based reader would swap slices 1 and 3
    np.testing.assert_array_equal(case.label, expected)


def test_seg_of_another_series_refused_naming_both(dicom_data: Path) -> None:
    dcmqi = dicom_data / "dcmqi"
    with pytest.raises(DataError, match=r"belongs to another series: it references series 1\.2\.826\.0\.1\.3680043"
                                        r"\.2\.1125\.1\.3140.*the image is series 1\.2\.392\.200103"):
        read_case(dcmqi / "ct-3slice", dcmqi / "23x38x3" / "seg" / "label.seg")
    with pytest.raises(DataError, match="is a DICOM SEG .*open its image series folder"):
        read_case(dcmqi / "liver.dcm")


def test_seg_without_its_series_says_where_it_looked(dicom_data: Path, tmp_path: Path) -> None:
    shutil.copy(dicom_data / "dcmqi" / "liver.dcm", tmp_path / "liver.dcm")
    with pytest.raises(DataError, match=r"its image series 1\.2\.392.* is not there \(looked in"):
        read_label(tmp_path / "liver.dcm")


def test_info_and_score_name_each_segment(dicom_data: Path, tmp_path: Path) -> None:
    dcmqi = dicom_data / "dcmqi"
    case = read_case(dcmqi / "ct-3slice", dcmqi / "partial_overlaps.dcm")
    text = format_text(describe_case(case))
    assert "targets   (SEG: each its own mask)" in text and "1 GREEN: 9602 voxels (labels 1, 6, 7, 9)" in text
    # a prediction holding ORANGE exactly and GREEN where ORANGE does not cover it (one label map)
    targets = _by_name(case)
    prediction = np.zeros(case.label.shape, np.uint8)
    prediction[targets["GREEN"].mask(case.label)] = 1
    prediction[targets["ORANGE"].mask(case.label)] = 2
    image = sitk.GetImageFromArray(prediction)
    image.CopyInformation(sitk.ReadImage(str(dcmqi / "liver_seg.nrrd")))
    sitk.WriteImage(image, str(tmp_path / "pred.nii.gz"))
    rows = {row["name"]: row for row in score_files(tmp_path / "pred.nii.gz", dcmqi / "partial_overlaps.dcm")}
    assert list(rows) == ["GREEN", "ORANGE", "PURPLE", "LIGHT_BLUE", "DARK_BLUE"]
    assert rows["ORANGE"]["dice"] == pytest.approx(1.0) and rows["ORANGE"]["label"] == 2
    green = targets["GREEN"].mask(case.label)
    kept = green & ~targets["ORANGE"].mask(case.label)
    assert rows["GREEN"]["dice"] == pytest.approx(2 * kept.sum() / (kept.sum() + green.sum()))
    assert rows["PURPLE"]["pred_voxels"] == 0 and rows["PURPLE"]["gt_voxels"] == 10743


def test_score_a_seg_prediction_away_from_its_series(dicom_data: Path, tmp_path: Path) -> None:
    """A SEG prediction saved far from the series is placed on the ground truth's series; segments are matched
    by name, each scored on its own mask (the overlapping ones too)."""
    shutil.copy(dicom_data / "dcmqi" / "partial_overlaps.dcm", tmp_path / "pred.dcm")
    rows = score_files(tmp_path / "pred.dcm", dicom_data / "dcmqi" / "partial_overlaps.dcm")
    assert [(row["name"], row["dice"]) for row in rows] == [(name, pytest.approx(1.0)) for name in
                                                           ("GREEN", "ORANGE", "PURPLE", "LIGHT_BLUE", "DARK_BLUE")]
    with pytest.raises(DataError, match="is not there"):
        read_label(tmp_path / "pred.dcm")


def test_napari_opens_a_seg_by_itself_on_the_series_beside_it(dicom_data: Path) -> None:
    from napari_medsam_eval._reader import _read

    layers = _read(dicom_data / "dcmqi" / "partial_overlaps.dcm")
    assert [kind for _, _, kind in layers] == ["labels"]
    data, kwargs, _ = layers[0]
    assert data.shape == (3, 512, 512) and kwargs["metadata"]["label_names"][1] == "GREEN"
    assert kwargs["scale"] == pytest.approx([1.0, 0.810547, 0.810547], abs=1e-5)


def test_seg_claiming_a_million_frames_refused_before_decoding(dicom_data: Path, tmp_path: Path) -> None:
    ds = pydicom.dcmread(str(dicom_data / "dcmqi" / "liver.dcm"))
    ds.NumberOfFrames = 1_000_000
    ds.save_as(str(tmp_path / "huge.dcm"))
    with pytest.raises(DataError, match=r"header declares a SEG of 1000000 frames of 512 x 512 pixels, above the "
                                        r"memory ceiling"):
        read_case(dicom_data / "dcmqi" / "ct-3slice", tmp_path / "huge.dcm")


def test_series_folder_with_two_segs_opens_neither_and_says_so(dicom_data: Path, tmp_path: Path) -> None:
    folder = tmp_path / "ct"
    shutil.copytree(dicom_data / "dcmqi" / "ct-3slice", folder)
    for name in ("liver.dcm", "partial_overlaps.dcm"):
        shutil.copy(dicom_data / "dcmqi" / name, folder / name)
    with pytest.warns(DicomObjectWarning, match="2 ground truths of the series \\(liver.dcm, partial_overlaps.dcm\\): "
                                                "none opened; give one as the label"):
        case = read_case(folder)
    assert case.label is None and case.image.shape == (3, 512, 512)  # the SEGs are not taken for slices
    assert _by_name(read_case(folder, folder / "liver.dcm"))["Liver"].key == 1


def test_dicom_layout_case_with_a_dcm_that_is_no_ground_truth(dicom_data: Path, tmp_path: Path) -> None:
    from napari_medsam_eval.datasets import detect_layout

    root = tmp_path / "studies"
    shutil.copytree(dicom_data / "dcmqi" / "ct-3slice", root / "a" / "image")
    shutil.copy(dicom_data / "dcmqi" / "ct-3slice" / "01.dcm", root / "a" / "notes.dcm")
    layout = detect_layout(root)
    with pytest.raises(DataError, match="case a: notes.dcm is not a DICOM SEG or RTSTRUCT"):
        layout.load(layout.list_cases(root)[0])
