"""What is read from a DICOM file's raw bytes (``io/dicom_raw``) equals pydicom's reading of it: each SEG frame's
placement (``io/dicom_frames``), each RTSTRUCT contour, each slice header of a series, on the real files of
../shared/data/dicom_seg_rtstruct (dcmqi's explicit-VR files, highdicom's, rt-utils' and dicompyler's implicit-VR
ones) and on files we write; an encoding the walk does not read goes through pydicom."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom
import pytest

from napari_medsam_eval.io import dicom_frames

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "dicom_seg_rtstruct"
SEGS = ["dcmqi/liver.dcm", "dcmqi/partial_overlaps.dcm", "dcmqi/sparse-labelmap-noppv.dcm",
        "dcmqi/sparse-labelmap-ppv5.dcm", "dcmqi/24x38x3/seg/label.seg", "dcmqi/23x38x3/seg/label.seg",
        "highdicom/seg_image_ct_binary.dcm", "highdicom/seg_image_ct_binary_overlap.dcm",
        "highdicom/seg_image_ct_binary_fractional.dcm", "highdicom/seg_image_ct_binary_single_frame.dcm",
        "highdicom/seg_image_ct_true_fractional.dcm"]


@pytest.mark.parametrize("name", SEGS)
def test_the_raw_walk_reads_each_frame_as_pydicom_does(name):
    path = DATA / name
    if not path.exists():
        pytest.fail(f"{path} is missing: ../shared/data/dicom_seg_rtstruct is part of the test data")
    raw = dicom_frames._from_raw(path)  # raises where the walk gives up
    assert raw == dicom_frames._from_datasets(pydicom.dcmread(path))
    assert raw and all(frame.position is not None for frame in raw)


def test_a_seg_we_write_walks_the_same(tmp_path):
    from test_dicom_seg_write import CT_LABEL_NAMES, make_phantom_ct, write_ct_series
    from napari_medsam_eval.io import read_case
    from napari_medsam_eval.io.writers import write_mask

    hu, label = make_phantom_ct(np.random.default_rng(0))
    case = read_case(write_ct_series(tmp_path / "series", hu))
    path = write_mask(label, tmp_path / "pred.dcm", case, names=dict(CT_LABEL_NAMES), model="box", protocol="medsam2")
    raw = dicom_frames._from_raw(path)
    assert raw == dicom_frames._from_datasets(pydicom.dcmread(path))
    assert {frame.segment for frame in raw} == {1, 2, 3} and all(frame.source_uid for frame in raw)


def test_another_encoding_is_read_by_pydicom(tmp_path):
    path = DATA / "dcmqi" / "liver.dcm"
    ds = pydicom.dcmread(path)
    ds.file_meta.TransferSyntaxUID = pydicom.uid.DeflatedExplicitVRLittleEndian
    out = tmp_path / "deflated.dcm"
    ds.save_as(out, enforce_file_format=True)
    with pytest.raises(dicom_frames.Unparsed):
        dicom_frames._from_raw(out)
    assert dicom_frames.frame_descriptions(pydicom.dcmread(out), out) == \
        dicom_frames._from_datasets(pydicom.dcmread(path))


def test_objects_overlapping_in_more_ways_than_a_byte_holds_keep_their_masks():
    """Nine objects meeting in all 512 ways: the label map's codes outgrow a byte mid-way; each target is still
    its object's mask, and a label of few sets stays a byte a voxel."""
    from napari_medsam_eval.io.dicom_masks import ObjectMask
    from napari_medsam_eval.io.dicom_objects import object_label

    voxel = np.arange(512).reshape(1, 32, 16)
    objects = []
    for bit in range(9):
        obj = ObjectMask(bit + 1, f"roi_{bit + 1}", voxel.shape)
        obj.add(0, ((voxel[0] >> bit) & 1).astype(bool))
        objects.append(obj)
    label, names, targets = object_label(objects, voxel.shape)
    assert label.dtype == np.uint16 and len(np.unique(label)) == 512
    for obj, target in zip(objects, targets):
        assert np.array_equal(target.mask(label), obj.mask), target.name
    few, _names, few_targets = object_label(objects[:3], voxel.shape)
    assert few.dtype == np.uint8
    assert all(np.array_equal(t.mask(few), o.mask) for o, t in zip(objects[:3], few_targets))


RTSTRUCTS = ["rt_utils/mock_data/rt.dcm", "rt_utils/mock_data/invalid_reference_rt.dcm",
             "rt_utils/mock_data/non_existent_reference_rt.dcm", "rt_utils/empty/dummy_rt.dcm", "dicompyler/rtss.dcm"]
SLICES = ["dcmqi/ct-3slice/01.dcm", "dcmqi/24x38x3/image/IMG0001.dcm", "rt_utils/mock_data/ct_1.dcm",
          "rt_utils/oriented_data/1.dcm", "highdicom/ct_image.dcm", "dicompyler/ct.0.dcm"]


@pytest.mark.parametrize("name", RTSTRUCTS)
def test_each_rtstruct_contour_reads_as_pydicom_reads_it(name):
    from napari_medsam_eval.io import rtstruct
    from napari_medsam_eval.io.dicom_raw import read_raw

    path = DATA / name
    read_raw(path, rtstruct._CONTOURS)  # the walk reads it (raises where it gives up)
    raw = rtstruct._contours_by_roi(pydicom.dcmread(path), path)
    ds = pydicom.dcmread(path)
    ref = {int(c.ReferencedROINumber): [rtstruct._from_dataset(x) for x in c.get("ContourSequence", []) or []]
           for c in ds.get("ROIContourSequence", []) if "ReferencedROINumber" in c}
    assert raw.keys() == ref.keys() and sum(map(len, raw.values())) > 0
    for number in raw:
        assert [(c["type"], c["image"]) for c in raw[number]] == [(c["type"], c["image"]) for c in ref[number]]
        for ours, theirs in zip(raw[number], ref[number]):
            assert np.array_equal(rtstruct._contour_points(ours), rtstruct._contour_points(theirs))


@pytest.mark.parametrize("name", SLICES)
def test_a_slice_header_reads_as_pydicom_reads_it(name):
    from napari_medsam_eval.io import dicom_grid

    path = DATA / name
    header = dicom_grid._header(str(path))
    assert isinstance(header, dict)  # read from the raw bytes, not by pydicom
    ds = pydicom.dcmread(path, stop_before_pixels=True)
    for keyword in dicom_grid._HEADER_TAGS.values():
        theirs = ds.get(keyword)
        if keyword in dicom_grid._NUMBERS:
            theirs = tuple(float(v) for v in theirs) if theirs is not None else None
        elif keyword in dicom_grid._COUNTS:
            theirs = int(theirs) if theirs is not None else None
        else:
            theirs = str(theirs) if theirs is not None else None
        assert header.get(keyword) == theirs, keyword


def test_a_seg_of_one_segment_names_it_in_the_shared_groups_and_reads_back(tmp_path):
    """highdicom names a lone segment once, in the shared functional groups: our reader takes it from there."""
    from test_dicom_seg_write import make_phantom_ct, write_ct_series
    from napari_medsam_eval.io import read_case, read_label
    from napari_medsam_eval.io.writers import write_mask

    hu, label = make_phantom_ct(np.random.default_rng(0))
    case = read_case(write_ct_series(tmp_path / "series", hu))
    path = write_mask((label == 2).astype(np.uint8), tmp_path / "kidney.dcm", case, names={1: "kidney"})
    ds = pydicom.dcmread(path)
    assert "SegmentIdentificationSequence" in ds.SharedFunctionalGroupsSequence[0]
    read = read_label(path, case)
    kidney = next(t for t in read.info["targets"] if t.name == "kidney")
    assert np.array_equal(kidney.mask(read.array), label == 2)


def test_a_damaged_file_is_left_to_pydicom(tmp_path):
    """Cut before its pixel data, or nested without end, a file is not read by the walk (pydicom says what is
    wrong)."""
    from napari_medsam_eval.io.dicom_raw import Unparsed, read_raw

    whole = (DATA / "dcmqi" / "liver.dcm").read_bytes()
    spec = {(dicom_frames._PER_FRAME,): ("frames", dicom_frames._WANTED)}
    per_frame = whole.index(b"\x00\x52\x30\x92SQ")  # (5200,9230): cut inside the frames' descriptions
    for cut in (0, 100, 140, 2000, per_frame + 200):
        path = tmp_path / f"cut{cut}.dcm"
        path.write_bytes(whole[:cut])
        with pytest.raises(Unparsed):
            read_raw(path, spec)
    # a sequence nested 5,000 deep, each of undefined length, after a valid file meta group
    meta_end = 132 + 12 + int.from_bytes(whole[140:144], "little")
    nest = (b"\x08\x00\x24\x91SQ\x00\x00\xff\xff\xff\xff" + b"\xfe\xff\x00\xe0\xff\xff\xff\xff") * 5000
    path = tmp_path / "nested.dcm"
    path.write_bytes(whole[:meta_end] + nest)
    with pytest.raises(Unparsed):
        read_raw(path, {(0x00089124,): ("deep", {})})
