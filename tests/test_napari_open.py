"""Opening data in a real napari viewer without naming the plugin (drag-and-drop, File > Open).

napari's builtin reader matches ``*.nii.gz``, ``*.npz`` ... and every folder too,
so napari asks which reader to use until ``plugins.extension2reader`` names one, which only the user
does (napari's dialog, "remember"): the plugin never writes napari's settings (issue 58).
napari's settings are kept in memory here: the user's settings file is never touched.
"""
from __future__ import annotations

import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval import _reader
from napari_medsam_eval.core.errors import DataError

from dicom_series import write_series

pytestmark = pytest.mark.gui

HIPPO = "hippocampus_001"


@pytest.fixture
def settings(monkeypatch):
    """napari's settings, fresh and in memory."""
    from napari import settings as napari_settings

    fresh = napari_settings.NapariSettings(config_path=None)
    monkeypatch.setattr(napari_settings, "_SETTINGS", fresh)
    return fresh


@pytest.fixture
def dialogs(monkeypatch):
    """napari's "Choose reader" dialog, answered "MedSAM Eval"; records what each one showed."""
    from napari._qt.dialogs import qt_reader_dialog

    shown = Answers()

    def answer(dialog):
        shown.append({"file": dialog._current_file, "text": dialog.findChild(qt_reader_dialog.QLabel).text()})
        return ("MedSAM Eval", shown.remember) if "MedSAM Eval" in _choices(dialog) else ("", False)

    monkeypatch.setattr(qt_reader_dialog.QtReaderDialog, "get_user_choices", answer)
    return shown


class Answers(list):
    """What each dialog showed; ``remember``: whether the next answers tick the dialog's "remember" box."""

    remember = False


def _choices(dialog) -> list[str]:
    return [button.text() for button in dialog.reader_btn_group.buttons()]


@pytest.fixture
def viewer(settings, make_napari_viewer):
    """A viewer where the user chose this reader for the medical formats and folders (napari's Preferences)."""
    settings.plugins.extension2reader = {pattern: "napari-medsam-eval" for pattern in (
        "*.nii.gz", "*.nii", "*.nrrd", "*.mha", "*.mhd", "*.npz", "*.dcm", "*/")}
    return make_napari_viewer()


def _kinds(layers) -> list[str]:
    return [type(layer).__name__ for layer in layers]


def test_napari_asks_and_only_the_users_remembered_choice_is_kept(settings, dialogs, make_napari_viewer,
                                                                   shared_data):
    from napari.errors import MultipleReaderError

    viewer = make_napari_viewer()
    image = shared_data / "hippocampus_mri" / "imagesTr" / f"{HIPPO}.nii.gz"
    with pytest.raises(MultipleReaderError):  # napari's builtins claim *.nii.gz too: napari must ask
        viewer.open(str(image), plugin=None)
    viewer.window._qt_viewer._qt_open([str(image)], stack=False)  # drag-and-drop / File > Open, not remembered
    assert len(dialogs) == 1 and _kinds(viewer.layers) == ["Image", "Labels"]
    assert settings.plugins.extension2reader == {}  # the plugin wrote nothing: no format, no folder pattern
    dialogs.remember = True  # the user ticks "remember" for the npz
    npz = shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz"
    viewer.window._qt_viewer._qt_open([str(npz)], stack=False)
    assert settings.plugins.extension2reader == {"*.npz": "napari-medsam-eval"}  # theirs, that kind only
    dialogs.remember = False
    viewer.window._qt_viewer._qt_open([str(npz)], stack=False)  # remembered: no question
    viewer.window._qt_viewer._qt_open([str(shared_data / "cvc_clinicdb_video")], stack=False)  # asked again
    assert len(dialogs) == 3 and not any(key.endswith(("/", "\\")) for key in settings.plugins.extension2reader)
    assert _kinds(viewer.layers) == ["Image", "Labels"] * 4
    assert viewer.layers[-2].name == "seq01" and viewer.layers[-2].rgb


def test_a_reader_preference_the_user_set_is_kept(settings, make_napari_viewer, shared_data):
    from napari.plugins.utils import get_preferred_reader

    settings.plugins.extension2reader = {"*.npz": "napari", "*.gz": "napari"}
    viewer = make_napari_viewer()
    viewer.open(str(shared_data / "hippocampus_mri" / "imagesTr" / f"{HIPPO}.nii.gz"), plugin="napari-medsam-eval")
    assert settings.plugins.extension2reader == {"*.npz": "napari", "*.gz": "napari"}
    assert get_preferred_reader(str(shared_data / "deeplesion_ct_npz" / "x.npz")) == "napari"
    assert get_preferred_reader(str(shared_data / "hippocampus_mri" / "imagesTr" / "x.nii.gz")) == "napari"


def test_reader_called_outside_a_viewer_leaves_napari_settings_alone(settings, shared_data):
    reader = _reader.napari_get_reader(str(shared_data / "hippocampus_mri" / "imagesTr" / f"{HIPPO}.nii.gz"))
    assert reader is not None and settings.plugins.extension2reader == {}


@pytest.mark.parametrize("suffix", [".nrrd", ".mha"])
def test_nrrd_and_metaimage_open_by_path(viewer, shared_data, tmp_path, suffix):
    volume = sitk.ReadImage(str(shared_data / "hippocampus_mri" / "imagesTr" / f"{HIPPO}.nii.gz"))
    volume.SetSpacing((0.5, 0.75, 2.0))
    path = tmp_path / f"volume{suffix}"
    sitk.WriteImage(volume, str(path))
    (layer,) = viewer.open(str(path), plugin=None)
    assert _kinds([layer]) == ["Image"]
    np.testing.assert_array_equal(layer.data, sitk.GetArrayFromImage(volume))
    np.testing.assert_allclose(layer.scale, [2.0, 0.75, 0.5])


def test_npz_opens_by_path_with_its_ground_truth(viewer, shared_data):
    image, labels = viewer.open(str(shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz"),
                                plugin=None)
    assert _kinds([image, labels]) == ["Image", "Labels"]
    np.testing.assert_allclose(image.scale, [5.0, 0.314, 0.314], atol=1e-3)
    assert set(np.unique(labels.data)) == {0, 1}


def test_dicom_folder_opens_by_path(viewer, shared_data, tmp_path):
    volume = sitk.Cast(sitk.ReadImage(str(shared_data / "hippocampus_mri" / "imagesTr" / f"{HIPPO}.nii.gz")),
                       sitk.sitkInt16)
    write_series(volume, tmp_path / "series", "1.2.826.0.1.3680043.2.1125.7")
    (layer,) = viewer.open(str(tmp_path / "series"), plugin=None)
    np.testing.assert_array_equal(layer.data, sitk.GetArrayFromImage(volume))
    assert layer.metadata["kind"] == "volume"


def test_dataset_folder_opens_its_first_case(viewer, shared_data):
    image, labels = viewer.open(str(shared_data / "hippocampus_mri"), plugin=None)
    assert image.name == HIPPO and image.metadata["dataset_layout"] == "msd" and image.metadata["dataset_cases"] == 80
    assert labels.metadata["label_names"] == {1: "anterior", 2: "posterior"}
    expected = sitk.GetArrayFromImage(sitk.ReadImage(str(shared_data / "hippocampus_mri" / "labelsTr" /
                                                         f"{HIPPO}.nii.gz")))
    np.testing.assert_array_equal(labels.data, expected)


def test_msd_image_brings_its_label_file(viewer, shared_data):
    root = shared_data / "brats2021_flair"
    image, labels = viewer.open(str(root / "imagesTr" / "BraTS2021_01646.nii.gz"), plugin=None)
    assert _kinds([image, labels]) == ["Image", "Labels"] and image.data.dtype == np.float32
    assert np.issubdtype(labels.data.dtype, np.integer) and set(np.unique(labels.data)) == {0, 1}
    assert labels.metadata["role"] == "ground_truth"
    np.testing.assert_allclose(labels.scale, image.scale)


def test_nnunet_channel_image_brings_its_label_and_a_mismatched_one_is_left_out(viewer, shared_data, tmp_path):
    """nnU-Net names images ``<case>_0000``; a label of another shape opens nothing but a warning."""
    from napari_medsam_eval.datasets.ground_truth_pairing import GroundTruthWarning

    source = shared_data / "hippocampus_mri"
    (tmp_path / "imagesTr").mkdir()
    (tmp_path / "labelsTr").mkdir()
    (tmp_path / "imagesTr" / "hippo_0000.nii.gz").symlink_to(source / "imagesTr" / f"{HIPPO}.nii.gz")
    (tmp_path / "labelsTr" / "hippo.nii.gz").symlink_to(source / "labelsTr" / f"{HIPPO}.nii.gz")
    (tmp_path / "imagesTr" / "other_0000.nii.gz").symlink_to(source / "imagesTr" / f"{HIPPO}.nii.gz")
    (tmp_path / "labelsTr" / "other.nii.gz").symlink_to(source / "labelsTr" / "hippocampus_004.nii.gz")
    image, labels = viewer.open(str(tmp_path / "imagesTr" / "hippo_0000.nii.gz"), plugin=None)
    assert set(np.unique(labels.data)) == {0, 1, 2} and labels.data.shape == image.data.shape
    with pytest.warns(GroundTruthWarning, match="other.nii.gz"):
        layers = viewer.open(str(tmp_path / "imagesTr" / "other_0000.nii.gz"), plugin=None)
    assert _kinds(layers) == ["Image"]


@pytest.mark.parametrize(("dataset", "name", "values"), [
    ("hippocampus_mri", f"{HIPPO}.nii.gz", {0, 1, 2}),
    ("brats2021_flair", "BraTS2021_01646.nii.gz", {0, 1}),
])
def test_msd_label_file_opens_as_labels(viewer, shared_data, dataset, name, values):
    (layer,) = viewer.open(str(shared_data / dataset / "labelsTr" / name), plugin=None)
    assert _kinds([layer]) == ["Labels"] and np.issubdtype(layer.data.dtype, np.integer)
    assert set(np.unique(layer.data)) == values
    source = sitk.ReadImage(str(shared_data / dataset / "labelsTr" / name))
    np.testing.assert_allclose(layer.scale, source.GetSpacing()[::-1])
    assert layer.metadata["geometry"]["spacing_xyz"] == source.GetSpacing()


def test_sunseg_clip_brings_its_ground_truth_frames(viewer, shared_data):
    root = shared_data / "cvc_clinicdb_video"
    image, labels = viewer.open(str(root / "Frame" / "seq01"), plugin=None)
    assert image.rgb and image.metadata["kind"] == "video"
    assert labels.data.shape == image.data.shape[:3] and set(np.unique(labels.data)) == {0, 1}
    assert labels.metadata["label_names"] == {1: "polyp"}


def test_sunseg_ground_truth_folder_opens_as_labels_with_255_as_1(viewer, shared_data):
    from PIL import Image

    gt = shared_data / "cvc_clinicdb_video" / "GT" / "seq01"
    first = np.asarray(Image.open(sorted(gt.iterdir())[0]))
    assert set(np.unique(first)) == {0, 255}  # stored 0/255
    (layer,) = viewer.open(str(gt), plugin=None)
    assert _kinds([layer]) == ["Labels"] and layer.data.shape[0] == len(list(gt.iterdir()))
    assert set(np.unique(layer.data)) == {0, 1}
    np.testing.assert_array_equal(layer.data[0], first == 255)


@pytest.mark.parametrize(("name", "content", "problem"), [
    ("text.nii.gz", b"text named like NIfTI\n", "is a text file, not a gzip-compressed NIfTI file"),
    ("png_named.npz", b"\x89PNG\r\n\x1a\n" + bytes(64),
     "is not a valid npz (zip archive) file (its first bytes do not match: damaged, or named with the wrong suffix)"),
    ("empty.nrrd", b"", "file is empty (0 bytes)"),
])
def test_refused_file_says_which_file_and_why(viewer, tmp_path, name, content, problem):
    from napari.errors import ReaderPluginError

    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataError) as raised:  # naming the plugin: our error itself
        viewer.open(str(path), plugin="napari-medsam-eval")
    assert str(raised.value) == f"{path}: {problem}"
    with pytest.raises(ReaderPluginError) as raised:  # by preference: napari wraps it, keeping the text
        viewer.open(str(path), plugin=None)
    assert f"{path}: {problem}" in str(raised.value)


def test_refused_file_in_the_gui_shows_the_problem_in_napari_dialog(viewer, dialogs, tmp_path):
    path = tmp_path / "scan.nii.gz"
    path.write_text("not an image\n")
    viewer.window._qt_viewer._qt_open([str(path)], stack=False)
    (shown,) = dialogs  # napari offers its other reader, with our message above the choice
    assert f"{path}: is a text file, not a gzip-compressed NIfTI file" in shown["text"]
    assert len(viewer.layers) == 0


def test_lzw_compressed_tiff_opens(settings, make_napari_viewer, tmp_path):
    import tifffile

    grey = (np.arange(96 * 128, dtype=np.uint32).reshape(96, 128) * 37 % 4096).astype(np.uint16)
    path = tmp_path / "slice_lzw.tif"
    tifffile.imwrite(path, grey, compression="lzw")
    assert tifffile.TiffFile(path).pages[0].compression == tifffile.COMPRESSION.LZW
    viewer = make_napari_viewer()
    (layer,) = viewer.open(str(path), plugin="napari-medsam-eval")
    np.testing.assert_array_equal(layer.data, grey)
