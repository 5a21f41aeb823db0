"""``medsam-eval segment``: writes npz (key 'segs') and NIfTI with the source geometry."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import SimpleITK as sitk

import pytest

from napari_medsam_eval.cli import main

REPO = Path(__file__).resolve().parents[1]


def test_segment_writes_npz_segs_with_box_baseline(tmp_path, shared_data):
    image = shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz"
    out = tmp_path / "pred.npz"
    assert main(["segment", str(image), "--model", "box", "--box", "200", "210", "240", "250", "--slice", "7",
                 "--no-propagate", "--out", str(out)]) == 0
    with np.load(out) as data:
        segs, spacing = data["segs"], data["spacing"]
    assert segs.shape == (16, 512, 512)
    np.testing.assert_allclose(spacing[2], 5.0)  # stored x, y, z like the MedSAM npz
    assert segs[7, 210:251, 200:241].all() and segs.sum() == 41 * 41  # inclusive box, one slice


@pytest.mark.slow
def test_segment_nifti_keeps_source_geometry_with_litemedsam(tmp_path):
    image = REPO / "sample_data" / "phantom_ct" / "image.nii.gz"
    out = tmp_path / "pred.nii.gz"
    label = sitk.GetArrayFromImage(sitk.ReadImage(str(REPO / "sample_data" / "phantom_ct" / "label.nii.gz")))
    z = 20
    ys, xs = np.nonzero(label[z] == 2)
    box = [str(v) for v in (xs.min(), ys.min(), xs.max(), ys.max())]
    assert main(["segment", str(image), "--modality", "CT", "--box", *box, "--slice", str(z), "--no-propagate",
                 "--label-value", "2", "--out", str(out)]) == 0
    written, source = sitk.ReadImage(str(out)), sitk.ReadImage(str(image))
    assert written.GetSpacing() == source.GetSpacing() and written.GetOrigin() == source.GetOrigin()
    pred = sitk.GetArrayFromImage(written)
    assert set(np.unique(pred)) == {0, 2} and pred[z].any() and not np.delete(pred, z, axis=0).any()
    truth = label[z] == 2
    dice = 2 * np.logical_and(pred[z] == 2, truth).sum() / ((pred[z] == 2).sum() + truth.sum())
    assert dice > 0.8, dice  # a bright, well-separated organ from its tight box


def test_segment_without_prompt_is_a_clean_error(tmp_path, capsys):
    image = REPO / "sample_data" / "CT_phantom_abdomen.npz"
    assert main(["segment", str(image), "--model", "box", "--out", str(tmp_path / "p.npz")]) == 2
    assert "--box" in capsys.readouterr().err
