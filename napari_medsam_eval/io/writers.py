"""Writing a predicted mask next to (and aligned with) its source case.

Formats, chosen by the path's suffix:

- ``.nii.gz``/``.nii``/``.nrrd``/``.mha``: the geometry (spacing, origin,
  direction) is copied from the source case's metadata, so the mask overlays
  the source image in any viewer. A case without a header (PNG, frame folder)
  gets its :class:`Spacing` and the ITK defaults.
- ``.npz``: MedSAM style, the mask under ``segs`` plus ``spacing`` in
  **x, y, z** order (as MedSAM npz store it) and ``origin``/``direction`` when known.
- ``.png`` (2D cases only): label values written as they are (1, 2, ...),
  not scaled to 255.

Every write goes to a temporary file in the target folder, then
``os.replace`` puts it in place: a crash never leaves a half-written mask
that a later run would take for a finished one.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

import imageio.v3 as iio
import numpy as np
import SimpleITK as sitk

from ..case import Case
from ..errors import DataError, UnknownFormatError
from .formats import format_suffix
from .sitk_io import image_from_array
from .validation import check_same_shape, to_label_array

SITK_MASK_SUFFIXES = (".nii.gz", ".nii", ".nrrd", ".mha")
MASK_SUFFIXES = SITK_MASK_SUFFIXES + (".npz", ".png")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (same suffix); move it onto ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=format_suffix(path))
    os.close(handle)
    temp = Path(temp_name)
    try:
        yield temp
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def mask_geometry(reference: Case) -> dict[str, tuple[float, ...]]:
    """ITK-order geometry for a mask of ``reference``: its file's header, else its Spacing."""
    metadata = reference.metadata
    spacing = metadata.get("spacing_xyz")
    if spacing is None or len(spacing) != len(reference.spacing):
        spacing = reference.spacing.xyz()
    return {"spacing": tuple(spacing), "origin": metadata.get("origin"), "direction": metadata.get("direction")}


def write_mask(mask: np.ndarray, path: str | Path, reference: Case) -> Path:
    """Write ``mask`` (the reference's spatial shape, integer labels) to ``path``; returns the path."""
    path = Path(path)
    suffix = format_suffix(path)
    if suffix not in MASK_SUFFIXES:
        raise UnknownFormatError(f"cannot write a mask as {suffix or '(no suffix)'!r}; use one of {MASK_SUFFIXES}",
                                 path)
    labels = to_label_array(np.asarray(mask), path)
    check_same_shape(labels.shape, reference.spatial_shape, path, reference.metadata.get("image_path"))
    if suffix == ".npz":
        _write_npz(labels, path, reference)
    elif suffix == ".png":
        _write_png(labels, path, reference)
    else:
        _write_sitk(labels, path, reference)
    return path


def _write_sitk(labels: np.ndarray, path: Path, reference: Case) -> None:
    image = image_from_array(labels, mask_geometry(reference))
    with atomic_path(path) as temp:
        try:
            sitk.WriteImage(image, str(temp), useCompression=format_suffix(path) != ".nii")
        except RuntimeError as error:
            raise DataError(f"cannot write mask: {error}".splitlines()[0], path) from None


def _write_npz(labels: np.ndarray, path: Path, reference: Case) -> None:
    geometry = mask_geometry(reference)
    arrays = {"segs": labels, "spacing": np.asarray(geometry["spacing"], dtype=float)}
    for key in ("origin", "direction"):
        if geometry[key] is not None:
            arrays[key] = np.asarray(geometry[key], dtype=float)
    with atomic_path(path) as temp:
        with open(temp, "wb") as handle:
            np.savez_compressed(handle, **arrays)


def _write_png(labels: np.ndarray, path: Path, reference: Case) -> None:
    if reference.kind != "image":
        raise DataError(f"PNG masks are for 2D images; this is a {reference.kind} case (use .nii.gz or .npz)", path)
    with atomic_path(path) as temp:
        iio.imwrite(temp, labels, extension=".png")
