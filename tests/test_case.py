"""The Case model: axis order, spacing order, validation."""
from __future__ import annotations

import numpy as np
import pytest

from napari_medsam_eval import Case, Spacing


def test_spacing_from_xyz_reverses_into_array_order():
    spacing = Spacing.from_xyz((0.314, 0.314, 5.0))
    assert spacing.axes == "zyx"
    assert spacing.values == (5.0, 0.314, 0.314)
    assert spacing["z"] == 5.0
    assert spacing.xyz() == (0.314, 0.314, 5.0)


def test_spacing_rejects_wrong_length_and_non_positive():
    with pytest.raises(ValueError):
        Spacing.from_array_order((1.0, 2.0), "zyx")
    with pytest.raises(ValueError):
        Spacing.from_array_order((1.0, 0.0, 1.0), "zyx")


def test_case_refuses_bare_tuple_spacing():
    with pytest.raises(TypeError, match="axis order"):
        Case(np.zeros((4, 5, 6)), None, (1.0, 1.0, 1.0), "volume", "c")  # type: ignore[arg-type]


def test_case_refuses_spacing_of_another_kind():
    with pytest.raises(ValueError, match="zyx"):
        Case(np.zeros((4, 5, 6)), None, Spacing.isotropic("tyx"), "volume", "c")


def test_case_shapes_and_label_check():
    video = Case(np.zeros((3, 8, 9, 3), np.uint8), np.zeros((3, 8, 9), np.uint8), Spacing.isotropic("tyx"), "video", "v")
    assert video.has_channels and video.spatial_shape == (3, 8, 9) and video.n_slices() == 3
    with pytest.raises(ValueError, match="label shape"):
        Case(np.zeros((8, 9)), np.zeros((8, 8), np.uint8), Spacing.isotropic("yx"), "image", "i")
    with pytest.raises(TypeError, match="integer"):
        Case(np.zeros((8, 9)), np.zeros((8, 9), np.float32), Spacing.isotropic("yx"), "image", "i")
    with pytest.raises(ValueError, match="dims"):
        Case(np.zeros((2, 3, 4, 5)), None, Spacing.isotropic("zyx"), "volume", "c")


def test_label_values_and_names():
    label = np.zeros((2, 4, 4), np.uint8)
    label[0, 1, 1] = 2
    label[1, 2, 2] = 1
    case = Case(np.zeros((2, 4, 4)), label, Spacing.isotropic("zyx"), "volume", "c", metadata={"label_names": {1: "a", 2: "b"}})
    assert case.label_values() == [1, 2]
    assert case.label_names == {1: "a", 2: "b"}
