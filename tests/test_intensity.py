"""Intensity preparation: CT windows and MR percentiles on arrays with known answers."""
from __future__ import annotations

import numpy as np
import pytest

from napari_medsam_eval.core.intensity import CT_WINDOWS, prepare_intensity, resolve_window


def test_the_rule_depends_on_the_modality_not_the_dtype():
    volume = np.arange(1, 61, dtype=np.uint8).reshape(3, 4, 5)
    # raw MR stored as uint8 is prepared like any MR (pre_CT_MR.py never checks the dtype)
    mr = prepare_intensity(volume, "MR")
    assert mr is not volume and mr.dtype == np.uint8
    assert np.array_equal(mr, prepare_intensity(volume.astype(np.float32), "MR"))
    assert mr.max() == 255 and not np.array_equal(mr, volume)
    # a uint8 CT cannot hold Hounsfield units: it was windowed already
    assert prepare_intensity(volume, "CT") is volume
    assert not np.array_equal(prepare_intensity(volume, "CT", intensity="raw"), volume)
    # the override for data that really is prepared
    assert prepare_intensity(volume, "MR", intensity="prepared") is volume
    with pytest.raises(ValueError, match="needs uint8"):
        prepare_intensity(volume.astype(np.int16), "MR", intensity="prepared")
    with pytest.raises(ValueError, match="intensity must be one of"):
        prepare_intensity(volume, "MR", intensity="cooked")


def test_prepare_image_by_kind_and_the_npz_flag(shared_data):
    from napari_medsam_eval.core.intensity import case_intensity, prepare_image
    from napari_medsam_eval.io import read_case

    frames = np.random.default_rng(0).integers(0, 200, (4, 8, 9, 3), dtype=np.uint8)
    assert prepare_image(frames, "video") is frames  # video frames and photographs are used as they are
    photo = frames[0]
    assert prepare_image(photo, "image") is photo
    assert set(np.unique(prepare_image(np.eye(3, dtype=bool), "image"))) == {0, 255}
    case = read_case(next((shared_data / "deeplesion_ct_npz").glob("*.npz")))
    assert case.metadata["intensity"] == "prepared" and case.image.dtype == np.uint8
    mode = case_intensity(case.metadata)
    assert prepare_image(case.image, case.kind, case.modality, intensity=mode) is case.image
    assert case_intensity(case.metadata, "raw") == "raw" and case_intensity({}, None) == "auto"
    # a raw uint8 MR scan of the MSD hippocampus set is prepared (its values change)
    hippo = shared_data / "hippocampus_mri"
    raw = read_case(hippo / "imagesTr" / "hippocampus_001.nii.gz", hippo / "labelsTr" / "hippocampus_001.nii.gz")
    assert raw.image.dtype == np.uint8 and case_intensity(raw.metadata) == "auto"
    prepared = prepare_image(raw.image, raw.kind, raw.modality)
    assert prepared.dtype == np.uint8 and not np.array_equal(prepared, raw.image)


def test_ct_soft_tissue_window_is_the_default():
    hu = np.array([-1000, -160, -60, 40, 240, 3000], dtype=np.int16)
    out = prepare_intensity(hu, "CT")
    # window 40/400 -> [-160, 240]; (x + 160) / 400 * 255, truncated
    assert out.dtype == np.uint8
    assert out.tolist() == [0, 0, 63, 127, 255, 255]
    assert np.array_equal(out, prepare_intensity(hu, "ct", "soft_tissue"))
    assert np.array_equal(out, prepare_intensity(hu, "CT", (40, 400)))


def test_ct_lung_window_and_custom_tuple():
    hu = np.array([-2000.0, -1350.0, -600.0, 150.0, 500.0])
    assert CT_WINDOWS["lung"] == (-600.0, 1500.0)
    assert prepare_intensity(hu, "CT", "lung").tolist() == [0, 0, 127, 255, 255]
    # bone window 400/1800 -> [-500, 1300]
    assert prepare_intensity(np.array([-500.0, 400.0, 1300.0]), "CT", (400, 1800)).tolist() == [0, 127, 255]


def test_ct_rescale_uses_clipped_data_range_like_pre_ct_mr():
    # values inside the window: pre_CT_MR.py rescales by the clipped data's min/max
    hu = np.array([0.0, 50.0, 100.0])
    assert prepare_intensity(hu, "CT").tolist() == [0, 127, 255]
    # the window bounds instead (MedSAM2 scripts): (x + 160) / 400 * 255
    assert prepare_intensity(hu, "CT", rescale="window").tolist() == [102, 133, 165]


def test_mr_percentiles_of_positive_voxels():
    data = np.arange(0, 1001, dtype=np.float32)  # one zero voxel, 1..1000 positive
    out = prepare_intensity(data, "MR")
    positive = np.arange(1, 1001, dtype=np.float64)
    lo, hi = np.percentile(positive, 0.5), np.percentile(positive, 99.5)
    assert lo == pytest.approx(5.995) and hi == pytest.approx(995.005)
    expected = np.uint8((np.clip(data.astype(np.float64), lo, hi) - lo) / (hi - lo) * 255)
    expected[0] = 0
    assert np.array_equal(out, expected)
    assert out[0] == 0 and out[1] == 0 and out[-1] == 255 and out[-5] == 255
    assert out[500] == 127


def test_mr_zero_voxels_stay_zero_and_negatives_are_not_in_the_percentiles():
    rng = np.random.default_rng(0)
    data = rng.uniform(100, 200, size=(4, 10, 10))
    data[0] = 0.0
    data[1, 0, :] = -50.0  # negative voxels: outside the percentile sample, clipped to lo -> 0
    out = prepare_intensity(data, "MRI")
    assert (out[0] == 0).all()
    assert (out[1, 0, :] == 0).all()
    assert out.max() == 255
    positive = data[data > 0]
    lo = np.percentile(positive, 0.5)
    assert (out[data <= lo] == 0).all()


def test_pet_and_unknown_modalities_use_the_percentile_rule():
    data = np.linspace(0, 10, 101)
    assert np.array_equal(prepare_intensity(data, "PET"), prepare_intensity(data, "MR"))
    assert np.array_equal(prepare_intensity(data, None), prepare_intensity(data, "MR"))


def test_constant_and_degenerate_volumes():
    assert (prepare_intensity(np.full((2, 3, 3), 7.0), "MR") == 0).all()
    assert (prepare_intensity(np.full((2, 3, 3), 7.0), "CT") == 0).all()
    # no positive voxel: the percentiles of all voxels
    out = prepare_intensity(np.linspace(-10, -1, 10), "MR")
    assert out.dtype == np.uint8 and out[-1] == 255


def test_bad_inputs_are_refused_with_clear_errors():
    with pytest.raises(ValueError, match="NaN"):
        prepare_intensity(np.array([1.0, np.nan]), "MR")
    with pytest.raises(ValueError, match="unknown CT window"):
        prepare_intensity(np.array([1.0, 2.0]), "CT", "kidney-ish")
    with pytest.raises(ValueError, match="width"):
        resolve_window((40, -1))
    with pytest.raises(ValueError, match="dtype"):
        prepare_intensity(np.array([True, False]), "MR")
