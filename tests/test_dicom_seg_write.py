"""Predictions written as DICOM SEG (io/dicom_seg_write.py), read back by the field's own tools.

Conformance: every SEG we write is read by highdicom (the library that wrote it, reading as a PACS
client would) and by dcmqi's ``segimage2itkimage`` (the converter 3D Slicer's QuantitativeReporting
uses, an independent DCMTK reader): each segment equals its mask voxel for voxel, on the source
series' own grid (origin, spacing, direction). Sources: the CT phantom written as a DICOM series by
the test, and dcmqi's real ``ct-3slice`` series. Paths: ``io.write_mask``, ``api.write_mask``,
``segment --out x.dcm``, ``run --save-predictions --prediction-format dicom-seg`` and napari's writer.
"""
from __future__ import annotations

import json
import locale
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval import __version__
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.errors import DataError, OptionError
from napari_medsam_eval.datasets.phantoms import CT_LABEL_NAMES, CT_ORIGIN_XYZ, CT_SPACING_XYZ, make_phantom_ct
from napari_medsam_eval.io import read_case, write_mask
from napari_medsam_eval.io.dicom_seg_write import NEEDS_SOURCE, SegAlgorithm, SegSegment
from napari_medsam_eval.io.writers import write_dicom_seg

hd = pytest.importorskip("highdicom")
DCMQI = shutil.which("segimage2itkimage") or str(Path(sys.executable).parent / "segimage2itkimage")
needs_dcmqi = pytest.mark.skipif(not Path(DCMQI).exists(), reason="dcmqi (the test extra) is not installed")
CT3 = Path(__file__).resolve().parents[2] / "shared" / "data" / "dicom_seg_rtstruct" / "dcmqi"
SERIES_UID = "1.2.826.0.1.3680043.2.1125.4242"


def write_ct_series(folder: Path, hu: np.ndarray, spacing=CT_SPACING_XYZ, origin=CT_ORIGIN_XYZ) -> Path:
    """``hu`` (z, y, x) as a CT series, one file per slice, with what a planning CT carries (Frame of
    Reference, slice thickness and spacing, patient and study ids). GDCM's writer leaves the C locale: put back.
    Spacing Between Slices is set to the step (:func:`_spacing_between_slices`)."""
    saved = locale.setlocale(locale.LC_ALL)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        volume = sitk.GetImageFromArray(hu)
        volume.SetSpacing(spacing)
        volume.SetOrigin(origin)
        writer = sitk.ImageFileWriter()
        writer.KeepOriginalImageUIDOn()
        for i in range(volume.GetDepth()):
            plane = volume[:, :, i]
            tags = {"0008|0060": "CT", "0008|0016": "1.2.840.10008.5.1.4.1.1.2", "0008|0018": f"{SERIES_UID}.{i + 1}",
                    "0010|0020": "PHANTOM1", "0020|000d": f"{SERIES_UID}.0", "0020|000e": SERIES_UID,
                    "0020|0052": f"{SERIES_UID}.9", "0020|0013": str(i + 1), "0020|0037": "1\\0\\0\\0\\1\\0",
                    "0018|0050": str(spacing[2]),
                    "0020|0032": "\\".join(str(v) for v in volume.TransformIndexToPhysicalPoint((0, 0, i)))}
            for key, value in tags.items():
                plane.SetMetaData(key, value)
            writer.SetFileName(str(folder / f"ct{i:03d}.dcm"))
            writer.Execute(plane)
            _spacing_between_slices(folder / f"ct{i:03d}.dcm", spacing[2])
    finally:
        locale.setlocale(locale.LC_ALL, saved)
    return folder


def _spacing_between_slices(path: Path, step: float) -> None:
    """Spacing Between Slices (0018,0088) set to the series' step: once a process has read a DICOM series with
    GDCM, GDCM's writer puts one of 1 mm into a slice by itself (the SEG then said 1 mm and dcmqi read it so: this
    test failed only after another DICOM test in the same process)."""
    import pydicom

    dataset = pydicom.dcmread(path)
    dataset.SpacingBetweenSlices = step
    dataset.save_as(path)


def truth_beside(root: Path, label: np.ndarray) -> Path:
    """``root`` a DICOM dataset of one case: ``patient1/label.nii.gz`` (the phantom's ``label`` on the series'
    grid) beside ``patient1/image`` and a dataset.json naming the labels."""
    truth = sitk.GetImageFromArray(label)
    truth.SetSpacing(CT_SPACING_XYZ)
    truth.SetOrigin(CT_ORIGIN_XYZ)
    sitk.WriteImage(truth, str(root / "patient1" / "label.nii.gz"))
    (root / "dataset.json").write_text(json.dumps({"labels": {"0": "background", **{
        str(v): n for v, n in CT_LABEL_NAMES.items()}}}))
    return root


@pytest.fixture(scope="module")
def phantom(tmp_path_factory):
    """The CT phantom as a DICOM series (read back as a Case) and its label map."""
    hu, label = make_phantom_ct(np.random.default_rng(0))
    folder = write_ct_series(tmp_path_factory.mktemp("phantom") / "series", hu)
    return read_case(folder), label


def highdicom_segments(path: Path, source_folder: Path, strict: bool = True) -> dict[str, np.ndarray]:
    """Each segment of the SEG at ``path`` by its label, on the source series' slices (highdicom); ``strict``:
    its frames must say they keep the source's spatial locations (ours do; dcmqi's own files do not say)."""
    import pydicom

    from napari_medsam_eval.io.dicom import dicom_series_files

    files, _ = dicom_series_files(source_folder)
    uids = [pydicom.dcmread(f, stop_before_pixels=True).SOPInstanceUID for f in files]
    seg = hd.seg.segread(str(path))
    return {str(item.SegmentLabel): seg.get_pixels_by_source_instance(
        uids, segment_numbers=[int(item.SegmentNumber)], assert_missing_frames_are_empty=True,
        ignore_spatial_locations=not strict)[..., 0] > 0
        for item in seg.SegmentSequence}


def dcmqi_segments(path: Path, out: Path) -> dict[str, sitk.Image]:
    """Each segment of the SEG at ``path`` by its label as dcmqi's segimage2itkimage writes it (a 0/1 image
    with its geometry); overlapping segments come in groups of one file each (meta.json names them)."""
    out.mkdir(parents=True)
    done = subprocess.run([DCMQI, "--inputDICOM", str(path), "--outputDirectory", str(out), "-t", "nrrd"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    groups = json.loads((out / "meta.json").read_text())["segmentAttributes"]
    found = {}
    for index, group in enumerate(groups, start=1):
        image = sitk.ReadImage(str(out / f"{index}.nrrd"))
        for segment in group:
            one = sitk.Cast(image == int(segment["labelID"]), sitk.sitkUInt8)
            found[segment["SegmentLabel"]] = one
    return found


def assert_on_source_grid(image: sitk.Image, case) -> None:
    assert np.allclose(image.GetOrigin(), case.metadata["origin"], atol=1e-4)
    assert np.allclose(image.GetSpacing(), case.metadata["spacing_xyz"], atol=1e-4)
    assert np.allclose(image.GetDirection(), case.metadata["direction"], atol=1e-6)


@needs_dcmqi
def test_phantom_label_map_as_seg_read_back_by_highdicom_and_dcmqi(phantom, tmp_path):
    case, label = phantom
    path = write_mask(label, tmp_path / "pred.dcm", case, names=dict(CT_LABEL_NAMES),
                      model="litemedsam", protocol="medsam2")
    by_highdicom = highdicom_segments(path, Path(case.metadata["dicom_series_folder"]))
    assert list(by_highdicom) == ["liver", "kidney", "lesion"]
    for value, name in CT_LABEL_NAMES.items():
        assert np.array_equal(by_highdicom[name], label == value), name
    by_dcmqi = dcmqi_segments(path, tmp_path / "dcmqi")
    for value, name in CT_LABEL_NAMES.items():
        assert_on_source_grid(by_dcmqi[name], case)
        assert np.array_equal(sitk.GetArrayFromImage(by_dcmqi[name]) > 0, label == value), name


def test_seg_references_its_series_and_names_the_algorithm(phantom, tmp_path):
    import pydicom

    case, label = phantom
    path = write_mask(label, tmp_path / "pred.dcm", case, names=dict(CT_LABEL_NAMES),
                      model="litemedsam", protocol="medsam2")
    seg = pydicom.dcmread(path)
    source = pydicom.dcmread(next(Path(case.metadata["dicom_series_folder"]).iterdir()), stop_before_pixels=True)
    assert seg.Modality == "SEG" and seg.SegmentationType == "BINARY"
    assert seg.FrameOfReferenceUID == source.FrameOfReferenceUID
    assert seg.StudyInstanceUID == source.StudyInstanceUID and seg.PatientID == "PHANTOM1"
    assert seg.ReferencedSeriesSequence[0].SeriesInstanceUID == SERIES_UID
    referenced = {item.ReferencedSOPInstanceUID for item in seg.ReferencedSeriesSequence[0].ReferencedInstanceSequence}
    assert len(referenced) == case.n_slices()
    assert seg.NumberOfFrames == 3 * case.n_slices()  # a frame per slice and segment: the source's whole grid
    positions = sorted(tuple(round(float(v), 4) for v in f.PlanePositionSequence[0].ImagePositionPatient)
                       for f in seg.PerFrameFunctionalGroupsSequence[:case.n_slices()])  # segment 1's frames
    x, y, z = CT_ORIGIN_XYZ
    assert positions == [(x, y, round(z + i * CT_SPACING_XYZ[2], 4)) for i in range(case.n_slices())]
    for item, (value, name) in zip(seg.SegmentSequence, CT_LABEL_NAMES.items()):
        algorithm = item.SegmentationAlgorithmIdentificationSequence[0]
        assert (item.SegmentLabel, item.SegmentAlgorithmType, item.SegmentAlgorithmName) == (
            name, "AUTOMATIC", "litemedsam")
        assert item.SegmentDescription == "litemedsam, protocol medsam2"
        assert algorithm.AlgorithmVersion == __version__
        assert algorithm.AlgorithmParameters == f"protocol=medsam2,label value={value}"


@needs_dcmqi
def test_overlapping_objects_each_keep_their_whole_mask(phantom, tmp_path):
    case, label = phantom
    liver = (label == 1) | (label == 3)  # the lesion lies inside the liver: both whole
    segments = [SegSegment("liver", liver, 1), SegSegment("lesion", label == 3, 3), SegSegment("none", label > 9, 4)]
    path = write_dicom_seg(segments, tmp_path / "nested.dcm", case, SegAlgorithm("medsam2", "manual"))
    by_highdicom = highdicom_segments(path, Path(case.metadata["dicom_series_folder"]))
    by_dcmqi = dcmqi_segments(path, tmp_path / "dcmqi")
    for segment in segments:
        assert np.array_equal(by_highdicom[segment.name], segment.mask), segment.name
        assert_on_source_grid(by_dcmqi[segment.name], case)
        assert np.array_equal(sitk.GetArrayFromImage(by_dcmqi[segment.name]) > 0, segment.mask), segment.name


@needs_dcmqi
def test_real_ct_3slice_liver_as_dcmqi_wrote_it(tmp_path):
    """dcmqi's liver_seg.nrrd written by us on dcmqi's ct-3slice: dcmqi and highdicom read the liver back
    exactly, on the series' grid, and highdicom reads dcmqi's own liver.dcm as the same voxels."""
    case = read_case(CT3 / "ct-3slice")
    liver = sitk.GetArrayFromImage(sitk.ReadImage(str(CT3 / "liver_seg.nrrd"))) > 0
    path = write_mask(liver.astype(np.uint8), tmp_path / "liver.dcm", case, names={1: "Liver"},
                      model="box", protocol="medsam2")
    ours = highdicom_segments(path, CT3 / "ct-3slice")["Liver"]
    assert np.array_equal(ours, liver) and liver.sum() > 1000
    assert np.array_equal(highdicom_segments(CT3 / "liver.dcm", CT3 / "ct-3slice", strict=False)["Liver"], liver)
    back = dcmqi_segments(path, tmp_path / "dcmqi")["Liver"]
    assert_on_source_grid(back, case)
    assert np.array_equal(sitk.GetArrayFromImage(back) > 0, liver)


def test_a_source_that_is_not_dicom_is_refused_before_writing(tmp_path):
    sample = Path(__file__).resolve().parents[1] / "sample_data" / "phantom_ct"
    case = read_case(sample / "image.nii.gz")
    with pytest.raises(DataError, match=NEEDS_SOURCE.replace(".", r"\.")):
        write_mask(np.zeros(case.spatial_shape, np.uint8), tmp_path / "p.dcm", case)
    assert list(tmp_path.iterdir()) == []
    assert main(["segment", str(sample / "image.nii.gz"), "--model", "box", "--box", "30", "30", "60", "60",
                 "--out", str(tmp_path / "p.dcm")]) == 2
    assert list(tmp_path.iterdir()) == []


def test_a_series_without_a_frame_of_reference_is_refused_by_name(tmp_path):
    from dicom_series import write_series  # the reader tests' series: no Frame of Reference UID

    volume = sitk.GetImageFromArray(np.zeros((3, 8, 8), np.int16))
    write_series(volume, tmp_path / "series", "1.2.826.0.1.3680043.2.1125.77")
    case = read_case(tmp_path / "series")
    with pytest.raises(DataError, match=r"slice000.dcm has no FrameOfReferenceUID \(0020,0052\): a SEG cannot"):
        write_mask(np.ones(case.spatial_shape, np.uint8), tmp_path / "p.dcm", case)
    assert not (tmp_path / "p.dcm").exists()


def test_a_seg_that_does_not_read_back_replaces_nothing(phantom, tmp_path, monkeypatch):
    from napari_medsam_eval.io import dicom_seg_write

    case, label = phantom
    path = tmp_path / "pred.dcm"
    path.write_bytes(b"an earlier file")
    monkeypatch.setattr(dicom_seg_write, "seg_holds", lambda *args: False)
    with pytest.raises(DataError, match="does not hold the mask; .*nothing was replaced"):
        write_mask(label, path, case, names=dict(CT_LABEL_NAMES))
    assert path.read_bytes() == b"an earlier file" and sorted(tmp_path.iterdir()) == [path]


def test_segment_cli_and_api_write_a_named_segment(phantom, tmp_path):
    import pydicom

    from napari_medsam_eval import api

    case, label = phantom
    folder = Path(case.metadata["dicom_series_folder"])
    out = tmp_path / "kidney.dcm"
    assert main(["segment", str(folder), "--model", "box", "--box", "60", "50", "75", "65", "--slice", "22",
                 "--no-propagate", "--label-value", "2", "--out", str(out)]) == 0
    seg = pydicom.dcmread(out)
    item = seg.SegmentSequence[0]
    assert (item.SegmentLabel, item.SegmentAlgorithmName, item.SegmentDescription) == ("label 2", "box",
                                                                                     "box, protocol manual")
    mask = highdicom_segments(out, folder)["label 2"]
    assert mask.sum() == 16 * 16 and mask[22, 50:66, 60:76].all()  # the box, inclusive, on slice 22 only
    written = api.write_mask(case, label == 3, tmp_path / "lesion.dcm", names={1: "lesion"}, model="medsam2")
    assert np.array_equal(highdicom_segments(written, folder)["lesion"], label == 3)


def test_prediction_format_is_checked_with_the_run_options(tmp_path):
    from napari_medsam_eval.benchmark.config import RunConfig

    with pytest.raises(OptionError, match="save_predictions"):
        RunConfig(tmp_path, tmp_path / "run", prediction_format="dicom-seg").checked()
    with pytest.raises(OptionError, match="nifti, dicom-seg"):
        RunConfig(tmp_path, tmp_path / "run", save_predictions=True, prediction_format="dicom").checked()
    config = RunConfig(tmp_path, tmp_path / "run", save_predictions=True, prediction_format="dicom-seg")
    assert config.to_manifest()["prediction_format"] == "dicom-seg"
    assert "prediction_format" not in config.replace(prediction_format="nifti").to_manifest()


@needs_dcmqi
def test_run_on_a_dicom_dataset_writes_segs_equal_to_its_nifti_predictions(phantom, tmp_path):
    case, label = phantom
    root = tmp_path / "dataset"
    shutil.copytree(case.metadata["dicom_series_folder"], root / "patient1" / "image")
    truth_beside(root, label)
    common = [str(root), "--model", "box", "--limit", "1", "--save-predictions", "--no-report", "--quiet",
              "--targets", "liver=1,3", "kidney=2", "lesion=3"]
    assert main(["run", *common, "--out", str(tmp_path / "nifti")]) == 0
    assert main(["run", *common, "--out", str(tmp_path / "seg"), "--prediction-format", "dicom-seg"]) == 0
    import pandas as pd

    rows = pd.read_csv(tmp_path / "seg" / "results.csv")
    assert set(rows["status"]) == {"ok"}, rows["error"].tolist()
    nifti_rows = pd.read_csv(tmp_path / "nifti" / "results.csv").set_index("label_name")
    series = root / "patient1" / "image"
    for _, row in rows.iterrows():
        assert row["prediction_path"].endswith(".dcm")
        expected = sitk.GetArrayFromImage(sitk.ReadImage(str(tmp_path / "nifti" /
                                                             nifti_rows.loc[row["label_name"], "prediction_path"])))
        value = 1 if row["label_name"] == "liver" else int(row["target_label"])
        segments = highdicom_segments(tmp_path / "seg" / row["prediction_path"], series)
        assert np.array_equal(segments[row["label_name"]], expected == value), row["label_name"]
        assert expected[expected == value].size == row["pred_voxels"]
    combined = tmp_path / "seg" / rows.loc[rows["label_name"] == "kidney", "prediction_path"].item()
    by_dcmqi = dcmqi_segments(combined, tmp_path / "dcmqi")
    kidney = highdicom_segments(combined, series)["kidney"]
    assert_on_source_grid(by_dcmqi["kidney"], case)
    assert np.array_equal(sitk.GetArrayFromImage(by_dcmqi["kidney"]) > 0, kidney)


def test_run_on_dicom_studies_with_seg_ground_truth_saves_seg_predictions(phantom, tmp_path):
    """The clinical round trip: ground truth a SEG beside its series, predictions SEGs on the same series,
    named as the ground truth's segments, each equal to the prediction the row scored."""
    import pandas as pd

    case, label = phantom
    study = tmp_path / "studies" / "patient1"
    shutil.copytree(case.metadata["dicom_series_folder"], study / "image")
    truth = [SegSegment(name, label == value, value) for value, name in CT_LABEL_NAMES.items()]
    write_dicom_seg(truth, study / "seg.dcm", read_case(study / "image"), SegAlgorithm("manual", None))
    out = tmp_path / "run"
    assert main(["run", str(tmp_path / "studies"), "--model", "oracle", "--save-predictions", "--no-report",
                 "--quiet", "--prediction-format", "dicom-seg", "--out", str(out)]) == 0
    rows = pd.read_csv(out / "results.csv")
    assert set(rows["status"]) == {"ok"} and sorted(rows["label_name"]) == ["kidney", "lesion", "liver"]
    for _, row in rows.iterrows():  # each saved segment is the mask its row scored: its voxels, its DSC
        predicted = highdicom_segments(out / row["prediction_path"], study / "image")[row["label_name"]]
        truth_mask = label == next(v for v, n in CT_LABEL_NAMES.items() if n == row["label_name"])
        dice = 2 * np.count_nonzero(predicted & truth_mask) / (predicted.sum() + truth_mask.sum())
        assert (predicted.sum(), row["gt_voxels"]) == (row["pred_voxels"], truth_mask.sum())
        assert dice == pytest.approx(row["dice"], abs=1e-4) and dice > 0.5, row["label_name"]


@pytest.mark.gui
def test_napari_saves_a_prediction_on_a_dicom_series_as_seg(make_napari_viewer, phantom, tmp_path):
    from napari_medsam_eval._widgets.segment._prediction_layer import write_object

    case, label = phantom
    folder = Path(case.metadata["dicom_series_folder"])
    viewer = make_napari_viewer()
    viewer.open(str(folder), plugin="napari-medsam-eval")
    image = viewer.layers[0]
    write_object(viewer, image, 1, (label == 1) | (label == 3), metadata={"model": "medsam2"})
    prediction = write_object(viewer, image, 3, label == 3)  # inside the liver: both kept whole
    viewer.layers.selection = {prediction}
    out = tmp_path / "prediction.dcm"
    viewer.layers.save(str(out), selected=True, plugin="napari-medsam-eval")
    segments = highdicom_segments(out, folder)
    assert list(segments) == ["object 1", "object 3"]
    assert np.array_equal(segments["object 1"], (label == 1) | (label == 3))
    assert np.array_equal(segments["object 3"], label == 3)
    sample = Path(__file__).resolve().parents[1] / "sample_data" / "phantom_ct" / "image.nii.gz"
    nifti_image = viewer.open(str(sample), plugin="napari-medsam-eval")[0]
    other = write_object(viewer, nifti_image, 1, np.asarray(nifti_image.data) > 200)
    viewer.layers.selection = {other}
    with pytest.raises(DataError, match="cannot write nifti_source.dcm: .*needs a DICOM series source"):
        viewer.layers.save(str(tmp_path / "nifti_source.dcm"), selected=True, plugin="napari-medsam-eval")
    assert not (tmp_path / "nifti_source.dcm").exists()
