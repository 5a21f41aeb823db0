"""Checks shared by every reader: image values, label values, shapes, geometry.

Every check raises a :class:`~napari_medsam_eval.errors.DataError` subclass
whose message starts with the offending file, so a batch run can record why a
case was skipped.

Rules
-----
Images
    Float images must be finite: a NaN or infinite voxel is an error (a model
    would silently propagate it), naming how many voxels are affected.

Labels
    A label map is cast to the smallest fitting unsigned integer dtype
    (``uint8`` when the maximum is below 256, ``uint16`` below 65536, else
    ``int32``). A float label whose values are all integral (the MSD
    hippocampus labels are float32 in some files) is accepted and cast; a
    fractional value such as 0.5, a NaN or a negative value is an error.

Geometry (image vs label, both carrying a header)
    *Error* (:class:`GeometryMismatchError`) when

    - any spacing differs by more than ``SPACING_RTOL`` (1e-3) relative,
    - the origins differ by more than half a voxel along any axis
      (``ORIGIN_VOXEL_FRACTION``), i.e. the label would be drawn shifted,
    - any direction-cosine element differs by more than ``DIRECTION_ATOL``
      (1e-3, about 0.06 degrees).

    *Warning* (:class:`GeometryWarning`) when a difference is inside those
    tolerances but larger than float32 header round-off (``SPACING_WARN_RTOL``
    1e-5 relative, ``ORIGIN_WARN_FRACTION`` 1e-3 of a voxel, ``DIRECTION_WARN_ATOL``
    1e-5): the overlay is right but the two files were not written from the
    same header. The label is then used on the image's geometry.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import DataError, GeometryMismatchError

SPACING_RTOL = 1e-3
ORIGIN_VOXEL_FRACTION = 0.5
DIRECTION_ATOL = 1e-3
SPACING_WARN_RTOL = 1e-5
ORIGIN_WARN_FRACTION = 1e-3
DIRECTION_WARN_ATOL = 1e-5


class GeometryWarning(UserWarning):
    """Image and label geometry differ, but within the tolerance that is accepted."""


def check_finite_image(image: np.ndarray, path: str | Path | None) -> None:
    """Raise when a float image holds NaN or infinite values."""
    if not np.issubdtype(image.dtype, np.floating):
        return
    bad = np.count_nonzero(~np.isfinite(image))
    if bad:
        n_nan = np.count_nonzero(np.isnan(image))
        raise DataError(
            f"image has {bad} non-finite voxel(s) ({n_nan} NaN) out of {image.size}; "
            "fix or mask them before segmentation",
            path,
        )


def label_dtype_for(max_value: int) -> np.dtype:
    """Smallest integer dtype used for a label map whose largest value is ``max_value``."""
    if max_value < 256:
        return np.dtype(np.uint8)
    if max_value < 65536:
        return np.dtype(np.uint16)
    return np.dtype(np.int32)


def to_label_array(values: np.ndarray, path: str | Path | None) -> np.ndarray:
    """Validate ``values`` as a label map and cast it to a small integer dtype.

    See the module docstring for the rules (integral floats accepted, 0.5 not).
    """
    values = np.asarray(values)
    if values.dtype == bool:
        return values.astype(np.uint8)
    if values.size == 0:
        raise DataError("label map is empty (zero voxels)", path)
    if np.issubdtype(values.dtype, np.floating):
        _check_integral(values, path)
    elif not np.issubdtype(values.dtype, np.integer):
        raise DataError(f"label map has non-numeric dtype {values.dtype}", path)
    low, high = values.min(), values.max()
    if low < 0:
        raise DataError(f"label map has negative value {low:g}; labels must be >= 0 (0 = background)", path)
    if high > np.iinfo(np.int32).max:
        raise DataError(f"label value {high:g} is too large for a label map", path)
    dtype = label_dtype_for(int(high))
    return values if values.dtype == dtype else values.astype(dtype)


def _check_integral(values: np.ndarray, path: str | Path | None) -> None:
    if not np.all(np.isfinite(values)):
        raise DataError("label map holds NaN or infinite values", path)
    fractional = values != np.round(values)
    if np.any(fractional):
        example = float(values[fractional].flat[0])
        count = int(np.count_nonzero(fractional))
        raise DataError(
            f"label map holds non-integer values (e.g. {example:g}, {count} voxel(s)); "
            "labels must be whole numbers",
            path,
        )


def check_same_shape(
    label_shape: Sequence[int],
    image_shape: Sequence[int],
    label_path: str | Path | None,
    image_path: str | Path | None = None,
) -> None:
    """Raise :class:`GeometryMismatchError` when the label is not the image's spatial shape."""
    if tuple(label_shape) != tuple(image_shape):
        image_name = f" of image {Path(image_path).name}" if image_path is not None else ""
        raise GeometryMismatchError(
            f"label shape {tuple(label_shape)} does not match the spatial shape {tuple(image_shape)}{image_name}",
            label_path,
        )


def check_geometry(
    image_geometry: dict,
    label_geometry: dict,
    label_path: str | Path | None,
    image_path: str | Path | None = None,
) -> None:
    """Compare two ITK geometries (keys ``spacing``, ``origin``, ``direction``, x,y,z order).

    Missing keys on either side are skipped (a PNG mask has no geometry).
    Raises or warns following the module docstring's tolerances.
    """
    spacing = _pair(image_geometry, label_geometry, "spacing")
    if spacing is not None:
        _compare_spacing(*spacing, label_path, image_path)
    origin = _pair(image_geometry, label_geometry, "origin")
    if origin is not None:
        voxel = np.asarray(image_geometry.get("spacing", np.ones(len(origin[0]))), dtype=float)
        _compare_origin(*origin, voxel, label_path, image_path)
    direction = _pair(image_geometry, label_geometry, "direction")
    if direction is not None:
        _compare_direction(*direction, label_path, image_path)


def _pair(a: dict, b: dict, key: str) -> tuple[np.ndarray, np.ndarray] | None:
    if a.get(key) is None or b.get(key) is None:
        return None
    first, second = np.asarray(a[key], dtype=float).ravel(), np.asarray(b[key], dtype=float).ravel()
    if first.shape != second.shape:
        return None  # different dimensionality is reported by the shape check
    return first, second


def _compare_spacing(image: np.ndarray, label: np.ndarray, label_path, image_path) -> None:
    relative = np.max(np.abs(image - label) / np.maximum(np.abs(image), 1e-12))
    text = f"label spacing {tuple(label.round(6))} vs image spacing {tuple(image.round(6))} (x, y, z)"
    _judge(relative, SPACING_RTOL, SPACING_WARN_RTOL, text, label_path, image_path)


def _compare_origin(image: np.ndarray, label: np.ndarray, voxel: np.ndarray, label_path, image_path) -> None:
    voxel = voxel[: len(image)] if len(voxel) >= len(image) else np.ones(len(image))
    in_voxels = np.max(np.abs(image - label) / np.maximum(voxel, 1e-12))
    text = f"label origin {tuple(label.round(4))} vs image origin {tuple(image.round(4))} ({in_voxels:.3g} voxel)"
    _judge(in_voxels, ORIGIN_VOXEL_FRACTION, ORIGIN_WARN_FRACTION, text, label_path, image_path)


def _compare_direction(image: np.ndarray, label: np.ndarray, label_path, image_path) -> None:
    difference = float(np.max(np.abs(image - label)))
    text = f"label direction {tuple(label.round(4))} vs image direction {tuple(image.round(4))}"
    _judge(difference, DIRECTION_ATOL, DIRECTION_WARN_ATOL, text, label_path, image_path)


def _judge(value: float, error_above: float, warn_above: float, text: str, label_path, image_path) -> None:
    image_name = f" (image {Path(image_path).name})" if image_path is not None else ""
    if value > error_above:
        raise GeometryMismatchError(f"geometry mismatch: {text}{image_name}", label_path)
    if value > warn_above:
        where = f"{label_path}: " if label_path is not None else ""
        warnings.warn(f"{where}small geometry difference accepted: {text}{image_name}", GeometryWarning, stacklevel=4)
