"""The npe2 Labels writer: a mask saved from napari lands on the source image's grid."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval._reader import case_to_layer_data
from napari_medsam_eval._writer import write_labels
from napari_medsam_eval.io import read_case

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "phantom_ct"


@pytest.mark.gui
def test_save_ground_truth_layer_from_the_viewer_as_nifti(make_napari_viewer, tmp_path):
    from napari.layers import Layer

    viewer = make_napari_viewer()
    case = read_case(SAMPLE / "image.nii.gz", SAMPLE / "label.nii.gz")
    for data, meta, kind in case_to_layer_data(case):  # what our reader gives napari
        viewer.add_layer(Layer.create(data, meta, kind))
    labels = viewer.layers[-1]
    assert labels.metadata["role"] == "ground_truth"
    edited = np.array(labels.data)
    edited[edited == 3] = 0  # a user's edit must be what is saved
    labels.data = edited
    viewer.layers.selection = {labels}
    out = tmp_path / "edited.nii.gz"
    viewer.layers.save(str(out), selected=True, plugin="napari-medsam-eval")
    saved, source = sitk.ReadImage(str(out)), sitk.ReadImage(str(SAMPLE / "label.nii.gz"))
    assert np.array_equal(sitk.GetArrayFromImage(saved), edited)
    assert np.allclose(saved.GetSpacing(), source.GetSpacing())
    assert np.allclose(saved.GetOrigin(), source.GetOrigin())
    assert np.allclose(saved.GetDirection(), source.GetDirection())


def test_npz_gets_segs_and_xyz_spacing_from_the_layer_scale(tmp_path):
    data = np.zeros((4, 6, 8), np.uint8)
    data[1:3, 2:4, 3:6] = 2
    written = write_labels(str(tmp_path / "pred.npz"), data, {"name": "pred", "scale": (5.0, 0.5, 0.7)})
    assert written == [str(tmp_path / "pred.npz")]
    with np.load(written[0]) as npz:
        assert np.array_equal(npz["segs"], data)
        assert np.allclose(npz["spacing"], (0.7, 0.5, 5.0))  # x, y, z as MedSAM npz store it


def test_bad_layers_get_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="2D or 3D"):
        write_labels(str(tmp_path / "m.nii.gz"), np.zeros((2, 3, 4, 5), np.uint8), {"name": "m"})
    with pytest.raises(ValueError, match="fractional|label|integer"):
        write_labels(str(tmp_path / "m.nii.gz"), np.full((3, 4), 0.5), {"name": "m"})


@pytest.mark.gui
def test_a_widget_prediction_saves_on_the_source_grid(make_napari_viewer, tmp_path):
    from napari.layers import Layer

    from napari_medsam_eval._widgets.segment._prediction_layer import write_object

    viewer = make_napari_viewer()
    case = read_case(SAMPLE / "image.nii.gz", SAMPLE / "label.nii.gz")
    image = viewer.add_layer(Layer.create(*case_to_layer_data(case)[0]))
    prediction = write_object(viewer, image, 2, case.label == 2)
    out = tmp_path / "kidney.nrrd"
    write_labels(str(out), prediction.data, {"name": prediction.name, "scale": prediction.scale,
                                             "metadata": prediction.metadata})
    saved, source = sitk.ReadImage(str(out)), sitk.ReadImage(str(SAMPLE / "image.nii.gz"))
    assert np.array_equal(sitk.GetArrayFromImage(saved) == 2, case.label == 2)
    assert np.allclose(saved.GetOrigin(), source.GetOrigin())
    assert np.allclose(saved.GetDirection(), source.GetDirection())
