"""2D images and the documented mask rules (JPEG, 0/255, palette, label map, RGB, alpha)."""
from __future__ import annotations

from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
from PIL import Image

from napari_medsam_eval.core.errors import DataError, GeometryMismatchError
from napari_medsam_eval.io import read_case, read_image_with_masks, read_mask2d


def _rgb(height: int = 10, width: int = 12) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.integers(0, 255, size=(height, width, 3), dtype=np.uint8)


def test_rgb_and_grey_images(tmp_path: Path) -> None:
    iio.imwrite(tmp_path / "colour.png", _rgb())
    iio.imwrite(tmp_path / "grey.png", _rgb()[..., 0])
    colour, grey = read_case(tmp_path / "colour.png"), read_case(tmp_path / "grey.png")
    assert colour.image.shape == (10, 12, 3) and colour.kind == "image"
    assert grey.image.shape == (10, 12) and grey.image.dtype == np.uint8
    assert grey.spacing.axes == "yx" and grey.spacing.values == (1.0, 1.0)


def test_alpha_is_dropped(tmp_path: Path) -> None:
    rgba = np.dstack([_rgb(), np.full((10, 12), 255, np.uint8)])
    iio.imwrite(tmp_path / "rgba.png", rgba)
    case = read_case(tmp_path / "rgba.png")
    assert case.image.shape == (10, 12, 3) and case.metadata["alpha_dropped"] is True


def test_tiff_16bit_image(tmp_path: Path) -> None:
    image = (np.arange(120, dtype=np.uint16).reshape(10, 12) * 500)
    iio.imwrite(tmp_path / "scan.tif", image)
    case = read_case(tmp_path / "scan.tif")
    np.testing.assert_array_equal(case.image, image)


def test_mask_0_255_becomes_1(tmp_path: Path) -> None:
    mask = np.zeros((10, 12), np.uint8)
    mask[2:5, 3:7] = 255
    iio.imwrite(tmp_path / "m.png", mask)
    labels, info = read_mask2d(tmp_path / "m.png")
    assert set(np.unique(labels)) == {0, 1} and labels.sum() == 12
    assert info["label_source_values"] == {1: 255} and info["label_names"] == {1: "foreground"}


def test_jpeg_mask_is_binarised_at_127(tmp_path: Path) -> None:
    mask = np.zeros((32, 32), np.uint8)
    mask[5:21, 3:19] = 255  # not aligned on JPEG's 8x8 blocks, so the edges get noisy
    iio.imwrite(tmp_path / "m.jpg", mask, quality=60)
    raw = iio.imread(tmp_path / "m.jpg")
    assert len(np.unique(raw)) > 2, "JPEG noise is what this rule is for"
    labels, info = read_mask2d(tmp_path / "m.jpg")
    assert set(np.unique(labels)) == {0, 1}
    assert abs(int(labels.sum()) - 256) < 20
    assert "JPEG" in info["mask_encoding"]


def test_label_map_values_kept(tmp_path: Path) -> None:
    mask = np.zeros((10, 12), np.uint8)
    mask[0:3], mask[3:6], mask[6:8] = 1, 2, 7
    iio.imwrite(tmp_path / "labels.png", mask)
    labels, info = read_mask2d(tmp_path / "labels.png")
    np.testing.assert_array_equal(labels, mask)
    assert "label_names" not in info


def test_palette_png_keeps_indices(tmp_path: Path) -> None:
    indices = np.zeros((10, 12), np.uint8)
    indices[:4], indices[4:6] = 1, 2
    image = Image.fromarray(indices, mode="P")
    image.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0] + [0] * (256 * 3 - 9))
    image.save(tmp_path / "palette.png")
    labels, info = read_mask2d(tmp_path / "palette.png")
    np.testing.assert_array_equal(labels, indices)
    assert info["mask_encoding"] == "palette indices"


def test_rgb_mask_made_grey_first(tmp_path: Path) -> None:
    mask = np.zeros((10, 12, 3), np.uint8)
    mask[2:6, 2:6] = 255
    iio.imwrite(tmp_path / "rgb_mask.png", mask)
    labels, _ = read_mask2d(tmp_path / "rgb_mask.png")
    assert labels.shape == (10, 12) and labels.sum() == 16


def test_anti_aliased_mask_binarised(tmp_path: Path) -> None:
    mask = np.zeros((10, 12), np.uint8)
    mask[2:6, 2:6] = 255
    mask[6, 2:6] = 100  # blurred edge: below half
    mask[1, 2:6] = 200  # above half
    iio.imwrite(tmp_path / "soft.png", mask)
    labels, info = read_mask2d(tmp_path / "soft.png")
    assert labels.sum() == 20 and "grey-level" in info["mask_encoding"]


def test_image_mask_shape_mismatch(tmp_path: Path) -> None:
    iio.imwrite(tmp_path / "img.png", _rgb())
    iio.imwrite(tmp_path / "small_mask.png", np.zeros((9, 12), np.uint8))
    with pytest.raises(GeometryMismatchError, match=r"small_mask.png.*\(9, 12\).*\(10, 12\).*img.png"):
        read_case(tmp_path / "img.png", tmp_path / "small_mask.png")


def test_multi_page_tiff_refused(tmp_path: Path) -> None:
    iio.imwrite(tmp_path / "stack.tif", np.zeros((5, 10, 12), np.uint8))
    with pytest.raises(DataError, match="stack.tif.*single 2D"):
        read_case(tmp_path / "stack.tif")


def test_overlapping_object_masks(tmp_path: Path) -> None:
    iio.imwrite(tmp_path / "ct_7.png", _rgb())
    first, second = np.zeros((10, 12), np.uint8), np.zeros((10, 12), np.uint8)
    first[0:5], second[4:8] = 255, 255
    iio.imwrite(tmp_path / "ct_7_liver_000.png", first)
    iio.imwrite(tmp_path / "ct_7_spleen_000.png", second)
    masks = [tmp_path / "ct_7_liver_000.png", tmp_path / "ct_7_spleen_000.png"]
    case = read_image_with_masks(tmp_path / "ct_7.png", masks)
    assert case.label_names == {1: "liver", 2: "spleen"}
    assert case.metadata["overlap_pixels"] == 12
    assert (case.label[4] == 2).all(), "the later mask wins where masks overlap"
    with pytest.raises(DataError, match="ct_7.png.*no mask files"):
        read_image_with_masks(tmp_path / "ct_7.png", [])
