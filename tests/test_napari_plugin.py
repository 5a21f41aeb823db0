"""The npe2 manifest and reader in a real napari viewer (under Xvfb via pytest-xvfb)."""
from __future__ import annotations

import numpy as np
import pytest

from napari_medsam_eval._reader import napari_get_reader

pytestmark = pytest.mark.gui


def test_manifest_is_valid():
    from npe2 import PluginManifest

    manifest = PluginManifest.from_distribution("napari-medsam-eval")
    assert manifest.name == "napari-medsam-eval"
    assert {s.key for s in manifest.contributions.sample_data} == {"phantom_ct", "phantom_video"}


def test_reader_returns_none_for_unknown(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    assert napari_get_reader(str(path)) is None


def test_open_npz_volume_in_viewer(make_napari_viewer, shared_data):
    viewer = make_napari_viewer()
    path = shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz"
    layers = viewer.open(str(path), plugin="napari-medsam-eval")
    assert [type(layer).__name__ for layer in layers] == ["Image", "Labels"]
    image, labels = layers
    np.testing.assert_allclose(image.scale, [5.0, 0.314, 0.314], atol=1e-3)
    np.testing.assert_allclose(labels.scale, image.scale)
    assert set(np.unique(labels.data)) == {0, 1}


def test_sample_data_opens(make_napari_viewer):
    viewer = make_napari_viewer()
    viewer.open_sample("napari-medsam-eval", "phantom_video")
    assert viewer.layers[0].rgb and viewer.layers[0].data.shape == (24, 128, 128, 3)
    assert viewer.layers[1].data.shape == (24, 128, 128)
