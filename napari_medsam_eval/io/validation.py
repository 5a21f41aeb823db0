"""Checks shared by every reader: image values, label values, shapes, geometry.

Every check raises a :class:`~napari_medsam_eval.core.errors.DataError` subclass
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

from ..core.array_blocks import blocks, count_nonfinite
from ..core.errors import DataError, GeometryMismatchError

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
    bad, n_nan = count_nonfinite(image)  # block by block: no whole-volume temporaries
    if bad:
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
    if count_nonfinite(values)[0]:
        raise DataError("label map holds NaN or infinite values", path)
    count, example = 0, None
    for part in blocks(values):  # block by block: no whole-volume temporaries
        block = values[part]
        fractional = block != np.round(block)
        if fractional.any():
            count += int(np.count_nonzero(fractional))
            example = float(block[fractional].flat[0]) if example is None else example
    if count:
        raise DataError(
            f"label map holds non-integer values (e.g. {example:g}, {count} voxel(s)); "
            "labels must be whole numbers (an image given as a label map?)",
            path,
        )


#: how far a header's direction matrix may be from orthonormal (the round-off of a header written as text)
ORTHONORMAL_ATOL = 1e-3


def check_orthogonal_axes(direction: Sequence[float], path: str | Path | None) -> None:
    """Refuse an image whose axes are not at right angles (a sheared NRRD's ``space directions``, any format
    SimpleITK reads): every distance metric measures on the voxel grid with one spacing an axis, which is
    wrong on sheared axes. ITK refuses a sheared NIfTI itself; this refuses the others alike."""
    values = np.asarray(direction, dtype=float).ravel()
    n = int(round(np.sqrt(values.size)))
    if n < 2 or n * n != values.size:
        return
    axes = values.reshape(n, n)  # column i: the direction of axis i (ITK's direction matrix)
    gram = axes.T @ axes
    if np.allclose(gram, np.eye(n), atol=ORTHONORMAL_ATOL):
        return
    off = np.abs(gram - np.diag(np.diag(gram)))
    i, j = np.unravel_index(int(np.argmax(off)), off.shape)
    lengths = np.sqrt(np.clip(np.diag(gram), 1e-12, None))
    angle = float(np.degrees(np.arccos(np.clip(gram[i, j] / (lengths[i] * lengths[j]), -1.0, 1.0))))
    names = "xyzt"
    raise DataError(f"its axes are not orthogonal (sheared): axes {names[min(i, j)]} and {names[max(i, j)]} meet at "
                    f"{angle:.1f} degrees, not 90 (direction {plain_numbers(values, 4)}); distances on its voxel grid "
                    "would be wrong: resample it onto orthogonal axes first", path)


def plain_numbers(values: Sequence[float], digits: int = 6) -> str:
    """``1, 1, 2.5``: numbers as people write them (no ``np.float64(...)``, no tuple brackets)."""
    return ", ".join(f"{round(float(v), digits):g}" for v in np.asarray(values, dtype=float).ravel())


def plain_shape(shape: Sequence[int]) -> str:
    """``(35, 51, 35)``: an array shape for a message, plain ints whatever the input's type."""
    return str(tuple(int(n) for n in shape))


def check_same_shape(
    label_shape: Sequence[int],
    image_shape: Sequence[int],
    label_path: str | Path | None,
    image_path: str | Path | None = None,
    *,
    roles: tuple[str, str] = ("label", "image"),
) -> None:
    """Raise :class:`GeometryMismatchError` when the label is not the image's spatial shape.

    ``roles`` names the two files in the message (``("prediction", "ground truth")`` for ``score``).
    """
    if tuple(label_shape) != tuple(image_shape):
        label_role, image_role = roles
        image_name = f" of {image_role} {Path(image_path).name}" if image_path is not None else ""
        raise GeometryMismatchError(
            f"{label_role} shape {plain_shape(label_shape)} does not match the spatial shape "
            f"{plain_shape(image_shape)}{image_name}",
            label_path,
        )


def check_geometry(
    image_geometry: dict,
    label_geometry: dict,
    label_path: str | Path | None,
    image_path: str | Path | None = None,
    *,
    roles: tuple[str, str] = ("label", "image"),
) -> None:
    """Compare two ITK geometries (keys ``spacing``, ``origin``, ``direction``, x,y,z order).

    Missing keys on either side are skipped (a PNG mask has no geometry).
    Raises or warns following the module docstring's tolerances; the message
    calls the files by ``roles`` (label, image) and names ``label_path`` and ``image_path``.
    """
    where = _Where(label_path, image_path, *roles)
    spacing = _pair(image_geometry, label_geometry, "spacing")
    if spacing is not None:
        _compare_spacing(*spacing, where)
    origin = _pair(image_geometry, label_geometry, "origin")
    if origin is not None:
        voxel = np.asarray(image_geometry.get("spacing", np.ones(len(origin[0]))), dtype=float)
        _compare_origin(*origin, voxel, where)
    direction = _pair(image_geometry, label_geometry, "direction")
    if direction is not None:
        _compare_direction(*direction, where)


class _Where:
    """The two files compared and what to call them."""

    def __init__(self, label_path, image_path, label_role: str, image_role: str) -> None:
        self.label_path, self.image_path = label_path, image_path
        self.label, self.image = label_role, image_role


def _pair(a: dict, b: dict, key: str) -> tuple[np.ndarray, np.ndarray] | None:
    if a.get(key) is None or b.get(key) is None:
        return None
    first, second = np.asarray(a[key], dtype=float).ravel(), np.asarray(b[key], dtype=float).ravel()
    if first.shape != second.shape:
        return None  # different dimensionality is reported by the shape check
    return first, second


def _compare_spacing(image: np.ndarray, label: np.ndarray, where: _Where) -> None:
    relative = np.max(np.abs(image - label) / np.maximum(np.abs(image), 1e-12))
    text = (f"{where.label} spacing {plain_numbers(label)} mm vs {where.image} spacing "
            f"{plain_numbers(image)} mm (x, y, z)")
    _judge(relative, SPACING_RTOL, SPACING_WARN_RTOL, text, where)


def _compare_origin(image: np.ndarray, label: np.ndarray, voxel: np.ndarray, where: _Where) -> None:
    voxel = voxel[: len(image)] if len(voxel) >= len(image) else np.ones(len(image))
    in_voxels = float(np.max(np.abs(image - label) / np.maximum(voxel, 1e-12)))
    text = (f"{where.label} origin {plain_numbers(label, 4)} mm vs {where.image} origin "
            f"{plain_numbers(image, 4)} mm ({in_voxels:.3g} voxel)")
    _judge(in_voxels, ORIGIN_VOXEL_FRACTION, ORIGIN_WARN_FRACTION, text, where)


def _compare_direction(image: np.ndarray, label: np.ndarray, where: _Where) -> None:
    difference = float(np.max(np.abs(image - label)))
    text = f"{where.label} direction {plain_numbers(label, 4)} vs {where.image} direction {plain_numbers(image, 4)}"
    _judge(difference, DIRECTION_ATOL, DIRECTION_WARN_ATOL, text, where)


def _judge(value: float, error_above: float, warn_above: float, text: str, where: _Where) -> None:
    image_name = f" ({where.image} {Path(where.image_path).name})" if where.image_path is not None else ""
    if value > error_above:
        raise GeometryMismatchError(f"geometry mismatch: {text}{image_name}", where.label_path)
    if value > warn_above:
        prefix = f"{where.label_path}: " if where.label_path is not None else ""
        warnings.warn(f"{prefix}small geometry difference accepted: {text}{image_name}", GeometryWarning,
                      stacklevel=4)
