"""The npe2 manifest and reader in a real napari viewer (under Xvfb via pytest-xvfb)."""
from __future__ import annotations

from pathlib import Path

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


def test_sample_data_is_built_from_the_files_generator():
    """File > Open Sample builds the phantoms in memory (it works from a wheel, with no
    sample_data/ beside it): they are the cases the committed files hold."""
    from napari_medsam_eval.io import read_case
    from napari_medsam_eval.datasets.phantoms import phantom_ct_case, phantom_video_case

    sample = Path(__file__).resolve().parents[1] / "sample_data"
    built, stored = phantom_ct_case(), read_case(sample / "CT_phantom_abdomen.npz")
    np.testing.assert_array_equal(built.image, stored.image)
    np.testing.assert_array_equal(built.label, stored.label)
    assert built.spacing == stored.spacing
    video = phantom_video_case()
    stored = read_case(sample / "phantom_video" / "Frame" / "clip01", sample / "phantom_video" / "GT" / "clip01")
    np.testing.assert_array_equal(video.label, stored.label)
    assert np.abs(video.image.astype(int) - stored.image.astype(int)).mean() < 3  # JPEG quality 90


def test_reader_patterns_cover_every_core_format():
    from npe2 import PluginManifest

    from napari_medsam_eval.io.formats import IMAGE2D_SUFFIXES, NPZ_SUFFIXES, SITK_SUFFIXES, VIDEO_SUFFIXES

    manifest = PluginManifest.from_distribution("napari-medsam-eval")
    (reader,) = manifest.contributions.readers
    patterns = set(reader.filename_patterns)
    for suffix in SITK_SUFFIXES + NPZ_SUFFIXES + IMAGE2D_SUFFIXES + VIDEO_SUFFIXES:
        assert f"*{suffix}" in patterns, suffix
    assert {"*.png", "*.jpg", "*.jpeg", "*.tif", "*.tiff", "*.dcm"} <= patterns
    assert reader.accepts_directories
    assert any(w.display_name == "Benchmark" for w in manifest.contributions.widgets)


@pytest.mark.parametrize(("name", "content", "problem"), [
    ("text.png", b"not an image at all\n", "is a text file, not a PNG file"),
    ("text.jpg", b"hello", "is a text file, not a JPEG file"),
    ("text.tif", b"hello\n", "is a text file, not a TIFF file"),
    ("text.dcm", b"this is a text file, not DICOM\n", "is a text file, not a .dcm file"),
    ("empty.dcm", b"", "file is empty (0 bytes)"),
    ("text.nii.gz", b"text named like NIfTI\n", "is a text file, not a gzip-compressed NIfTI file"),
    ("png_named.npz", b"\x89PNG\r\n\x1a\n" + bytes(64), "is not a valid npz (zip archive) file"),
])
def test_reader_takes_our_suffixes_and_says_why_it_cannot_read_them(tmp_path, name, content, problem):
    """A file named like ours is accepted (names only), and reading it says which file and why, where
    refusing it would leave napari's "... refused the file" with no reason."""
    from napari_medsam_eval.core.errors import DataError

    path = tmp_path / name
    path.write_bytes(content)
    reader = napari_get_reader(str(path))
    assert reader is not None and napari_get_reader([str(path)]) is reader
    with pytest.raises(DataError) as raised:
        reader(str(path))
    assert str(raised.value).startswith(f"{path}: {problem}")


def test_reader_refuses_missing_and_several_paths(tmp_path):
    assert napari_get_reader(str(tmp_path / "missing.png")) is None
    assert napari_get_reader([str(tmp_path / "a.png"), str(tmp_path / "b.png")]) is None


def test_open_png_with_its_mask_and_tiff(make_napari_viewer, tmp_path):
    from PIL import Image

    png = Path(__file__).resolve().parents[1] / "sample_data" / "phantom_2d" / "images" / "skin_phantom.png"
    expected = np.asarray(Image.open(png))
    assert napari_get_reader(str(png)) is not None
    viewer = make_napari_viewer()
    layers = viewer.open(str(png), plugin="napari-medsam-eval")
    np.testing.assert_array_equal(layers[0].data, expected)
    assert layers[0].rgb
    gray = tmp_path / "slice.tif"
    Image.fromarray(expected[..., 0]).save(gray)
    (layer,) = viewer.open(str(gray), plugin="napari-medsam-eval")
    np.testing.assert_array_equal(layer.data, expected[..., 0])


def test_open_single_dicom_file(make_napari_viewer, tmp_path):
    import SimpleITK as sitk

    array = (np.arange(32 * 40, dtype=np.int16).reshape(32, 40) % 300) - 100
    image = sitk.GetImageFromArray(array)
    image.SetSpacing((0.5, 0.7))
    path = tmp_path / "slice.dcm"
    sitk.WriteImage(image, str(path))
    assert napari_get_reader(str(path)) is not None
    viewer = make_napari_viewer()
    (layer,) = viewer.open(str(path), plugin="napari-medsam-eval")
    assert np.squeeze(layer.data).shape == (32, 40)
    np.testing.assert_array_equal(np.squeeze(layer.data), array)


def test_widget_tests_and_scripts_dock_through_the_plugins_menu():
    """napari hands a plugin widget its proxy of the viewer; a widget built on the real viewer object (in a
    test or a screenshot script) would miss what users meet, so none is built that way."""
    import re

    built = re.compile(r"\b(Segment|Compare|Benchmark|TwoRuns)Widget\(")
    root = Path(__file__).resolve().parents[1]
    offenders = [f"{path.relative_to(root)}:{number}" for folder in ("tests", "scripts", "benchmarks")
                 for path in sorted((root / folder).glob("*.py"))
                 for number, line in enumerate(path.read_text().splitlines(), 1) if built.search(line)]
    assert offenders == [], f"dock widgets with add_plugin_dock_widget (tests/plugin_dock.py): {offenders}"
