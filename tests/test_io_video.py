"""Videos: frame folders (natural order, masks by stem), mp4 files, CAMUS-style NIfTI sequences."""
from __future__ import annotations

from pathlib import Path

import av
import imageio.v3 as iio
import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval.core.errors import DataError, UnknownFormatError
from napari_medsam_eval.io import natural_sort_key, read_case, write_mask


def _frames(n: int = 4, height: int = 32, width: int = 48) -> np.ndarray:
    frames = np.zeros((n, height, width, 3), np.uint8)
    for t in range(n):
        frames[t, 8:24, 4 + 4 * t: 20 + 4 * t] = (200, 100, 50)
    return frames


def _write_mp4(path: Path, frames: np.ndarray, fps: int = 10) -> Path:
    """A small MPEG-4 file written with PyAV (imageio's pyav plugin would gc.collect on close: slow)."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.height, stream.width = frames.shape[1:3]
        stream.pix_fmt = "yuv420p"
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return path


def test_natural_sort_key() -> None:
    names = ["frame10.png", "frame2.png", "frame1.png", "Frame3.png"]
    assert sorted(names, key=natural_sort_key) == ["frame1.png", "frame2.png", "Frame3.png", "frame10.png"]


def test_frame_folder_natural_order_and_masks_by_stem(tmp_path: Path) -> None:
    frames, masks = tmp_path / "Frame" / "clip", tmp_path / "GT" / "clip"
    frames.mkdir(parents=True)
    masks.mkdir(parents=True)
    for t in (1, 2, 10):
        iio.imwrite(frames / f"frame{t}.png", np.full((6, 8), t, np.uint8))
        mask = np.zeros((6, 8), np.uint8)
        mask[:t % 6 + 1] = 255
        iio.imwrite(masks / f"frame{t}.png", mask)
    (masks / "extra_not_a_frame.png").write_bytes((masks / "frame1.png").read_bytes())
    case = read_case(frames, masks)
    assert case.kind == "video" and case.image.shape == (3, 6, 8)
    assert case.metadata["frame_names"] == ["frame1.png", "frame2.png", "frame10.png"]
    assert list(case.image[:, 0, 0]) == [1, 2, 10]
    assert [int(case.label[t].sum()) for t in range(3)] == [2 * 8, 3 * 8, 5 * 8]
    assert case.spacing.axes == "tyx" and case.spacing.values == (1.0, 1.0, 1.0)


def test_frame_without_mask_is_an_error(tmp_path: Path) -> None:
    frames, masks = tmp_path / "frames", tmp_path / "masks"
    frames.mkdir()
    masks.mkdir()
    for t in range(3):
        iio.imwrite(frames / f"{t:04d}.jpg", _frames(1)[0])
    iio.imwrite(masks / "0000.png", np.zeros((32, 48), np.uint8))
    with pytest.raises(DataError, match=r"masks: no mask for 2 of 3 frame\(s\): 0001.jpg, 0002.jpg"):
        read_case(frames, masks)


def test_frames_of_different_size(tmp_path: Path) -> None:
    iio.imwrite(tmp_path / "a1.png", np.zeros((6, 8), np.uint8))
    iio.imwrite(tmp_path / "a2.png", np.zeros((6, 9), np.uint8))
    with pytest.raises(DataError, match="a2.png.*differs from first frame a1.png"):
        read_case(tmp_path)


def test_mp4_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "clip.mp4"
    _write_mp4(path, _frames(5))
    case = read_case(path)
    assert case.kind == "video"
    assert case.image.shape == (5, 32, 48, 3) and case.image.dtype == np.uint8
    assert case.spacing.axes == "tyx" and case.spacing["t"] == 1.0
    assert case.metadata["fps"] == pytest.approx(10.0)
    assert case.case_id == "clip"
    # lossy, but the bright block must still be where it was drawn
    assert case.image[0, 16, 10, 0] > 150 and case.image[0, 2, 40, 0] < 40


def test_mp4_with_mask_folder(tmp_path: Path) -> None:
    path = tmp_path / "clip.mp4"
    _write_mp4(path, _frames(3))
    masks = tmp_path / "masks"
    masks.mkdir()
    for t in (1, 2, 3):
        iio.imwrite(masks / f"mask_{t}.png", np.full((32, 48), t % 2, np.uint8))
    case = read_case(path, masks)
    assert case.label.shape == (3, 32, 48)
    assert list(case.label[:, 0, 0]) == [1, 0, 1]


def test_truncated_and_fake_video(tmp_path: Path) -> None:
    path = tmp_path / "clip.mp4"
    _write_mp4(path, _frames(5))
    data = path.read_bytes()
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="broken.mp4.*cannot be decoded"):
        read_case(broken)
    fake = tmp_path / "fake.avi"
    fake.write_text("not a video")
    with pytest.raises(DataError, match="fake.avi.*cannot be decoded"):
        read_case(fake)
    with pytest.raises(UnknownFormatError, match="clip.mp4.*masks in a \\(lossy\\) video"):
        read_case(path, path)


def _camus_pair(folder: Path) -> tuple[Path, Path]:
    """A CAMUS-layout half sequence: 3D NIfTI, ITK axes (x, y, t), labels 0-3."""
    rng = np.random.default_rng(0)
    sequence = rng.integers(0, 255, size=(6, 20, 16), dtype=np.uint8)  # numpy (t, y, x)
    labels = np.zeros((6, 20, 16), np.uint8)
    labels[:, 5:10, 4:8], labels[:, 10:12, 4:8], labels[:, 12:15, 4:8] = 1, 2, 3
    paths = []
    for array, name in ((sequence, "patient0001_2CH_half_sequence"), (labels, "patient0001_2CH_half_sequence_gt")):
        image = sitk.GetImageFromArray(array)
        image.SetSpacing((0.308, 0.154, 1.0))
        image.SetOrigin((0.0, 0.0, 0.0))
        paths.append(folder / f"{name}.nii.gz")
        sitk.WriteImage(image, str(paths[-1]))
    return paths[0], paths[1]


def test_camus_half_sequence_is_a_video(tmp_path: Path) -> None:
    image_path, label_path = _camus_pair(tmp_path)
    case = read_case(image_path, label_path)
    assert case.kind == "video" and case.image.shape == (6, 20, 16)
    assert case.spacing.axes == "tyx"
    assert case.spacing.values == pytest.approx((1.0, 0.154, 0.308))
    assert case.label_values() == [1, 2, 3]
    as_volume = read_case(image_path, kind="volume")
    assert as_volume.kind == "volume" and as_volume.spacing.axes == "zyx"


def test_plain_3d_nifti_read_as_video_on_request(tmp_path: Path) -> None:
    image = sitk.GetImageFromArray(np.zeros((4, 5, 6), np.uint8))
    image.SetSpacing((0.5, 0.25, 2.0))
    path = tmp_path / "cine.nii.gz"
    sitk.WriteImage(image, str(path))
    assert read_case(path).kind == "volume"
    case = read_case(path, kind="video")
    assert case.kind == "video" and case.spacing.values == pytest.approx((1.0, 0.25, 0.5))


def test_video_mask_written_with_file_geometry(tmp_path: Path) -> None:
    image_path, label_path = _camus_pair(tmp_path)
    case = read_case(image_path, label_path)
    out = write_mask(case.label, tmp_path / "pred.nii.gz", case)
    written = sitk.ReadImage(str(out))
    assert written.GetSpacing() == pytest.approx((0.308, 0.154, 1.0))
    back = read_case(image_path, out)
    np.testing.assert_array_equal(back.label, case.label)
