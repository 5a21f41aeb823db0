"""NIfTI, NRRD, MetaImage and DICOM through SimpleITK, geometry kept.

SimpleITK arrays are ``(z, y, x)`` while its spacing, origin and direction are
``x, y, z``: the :class:`Case` gets ``Spacing.from_xyz`` and the metadata keep
``origin``, ``direction`` and ``spacing_xyz`` in ITK order, so a mask written
back (:mod:`.writers`) overlays the source image in any viewer.

SimpleITK reports failures as ``RuntimeError`` with a long C++ trace; they are
re-raised here as :class:`DataError` with one short line naming the file.
Failures SimpleITK does *not* report are checked: a truncated NIfTI (ITK fills
the missing voxels with zeros), NaNs stored in a float NIfTI (ITK < 6 reads
them as 0; the raw voxels are scanned, only for float files whose decoded
array holds a 0) and missing DICOM slices (:mod:`.dicom`). Before any voxel is
read, the size the header declares is checked against the data in the file and
a memory ceiling (:func:`check_declared_size`, :mod:`.sizes`), so a header that
lies is refused instead of making ITK allocate what it claims; and ITK's own
reason (``Failed to allocate memory for image.``) is kept in the message.
"""
from __future__ import annotations

import gzip
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from ..core.case import Case, CaseKind, sitk_image
from ..core.errors import DataError
from .case_builder import check_kind, make_case, spacing_for_kind
from .formats import format_suffix, looks_like_text, require_file
from .sizes import check_ceiling, check_on_disk, describe, metaimage_data, nrrd_data
from .validation import check_orthogonal_axes

_FORMAT_NAMES = {".nii.gz": "NIfTI", ".nii": "NIfTI", ".nrrd": "NRRD", ".nhdr": "NRRD",
                 ".mha": "MetaImage", ".mhd": "MetaImage", ".dcm": "DICOM"}


#: parts of a SimpleITK/ITK error line that say where in C++ it happened, not what went wrong
_NOISE = (re.compile(r"^Exception thrown in SimpleITK \w+:\s*"), re.compile(r"^\S+\.(?:cxx|hxx|txx|cpp|h):\d+:\s*"),
          re.compile(r"^(?:itk::|sitk::)?(?:ITK )?ERROR:\s*"), re.compile(r"^\w+\s*\(0x[0-9a-f]+\):\s*"))


def short_sitk_message(error: RuntimeError) -> str:
    """The informative part of a SimpleITK error, on one line.

    Source locations and object addresses are dropped; the reason is kept:
    ``Failed to allocate memory for image.``, or, after a line announcing
    more (``Read: Error reading x.nrrd:``), the last detail line (``fread got
    only 1024 1-sized things, not 4000000000``).
    """
    lines = []
    for line in str(error).splitlines():
        line = line.strip()
        for pattern in _NOISE:
            line = pattern.sub("", line)
        if line:
            lines.append(line)
    if not lines:
        return str(error).strip() or type(error).__name__
    first = lines[0]
    if len(lines) > 1 and (first.endswith(":") or "Reason" in lines[-1] or len(lines) > 2):
        first = f"{first} {lines[-1]}"
    return first if len(first) <= 300 else first[:297] + "..."


def read_sitk_image(path: str | Path) -> sitk.Image:
    """Read one NIfTI/NRRD/MHA/MHD/DICOM file, refusing truncated or mislabelled files."""
    path = require_file(path)
    fmt = _FORMAT_NAMES.get(format_suffix(path), "image")
    if fmt in ("NIfTI", "DICOM") and looks_like_text(path):  # binary formats; NRRD/MHA headers are text
        raise DataError(f"is a text file, not a {fmt} image", path)
    if format_suffix(path) == ".nii.gz" and not _has_gzip_magic(path):
        raise DataError("is not gzip-compressed although named .nii.gz (renamed .nii or not a NIfTI file?)", path)
    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    try:
        reader.ReadImageInformation()
        check_orthogonal_axes(reader.GetDirection(), path)  # a sheared NRRD/MetaImage, as ITK refuses a NIfTI
        check_declared_size(path, fmt, reader)
        if fmt == "NIfTI":
            _check_nifti_complete(path, reader)
        image = reader.Execute()
    except RuntimeError as error:
        raise DataError(f"cannot be read as {fmt}: {short_sitk_message(error)}", path) from None
    if fmt == "NIfTI":
        _check_nifti_finite(path, reader, image)
    return image


def _component_bytes(pixel_type: str) -> int:
    """Bytes of one component of a SimpleITK pixel type named like ``"vector of 16-bit signed integer"``."""
    bits = re.search(r"(\d+)-bit", pixel_type)
    return max(1, int(bits.group(1)) // 8 if bits else 1) * (2 if "complex" in pixel_type else 1)


def declared_size(reader: sitk.ImageFileReader, size: list[int]) -> tuple[int, str]:
    """(decoded bytes, description) of an image of ``size`` (x, y, z) voxels of the pixel type ``reader`` read
    from a header (``ReadImageInformation``): what decoding it will allocate."""
    pixel_type = sitk.GetPixelIDValueAsString(reader.GetPixelID())
    components = int(reader.GetNumberOfComponents())
    declared = int(np.prod(size, dtype=object)) * components * _component_bytes(pixel_type)
    what = pixel_type if components == 1 else f"{pixel_type}, {components} components"
    return declared, describe(size, what, declared)


def check_declared_size(path: Path, fmt: str, reader: sitk.ImageFileReader) -> None:
    """Refuse a header whose declared image the file cannot hold or memory cannot take (:mod:`.sizes`).

    NRRD and MetaImage data are measured from their headers (attached or
    detached file, raw or deflate); a gzip NIfTI's compressed size bounds what
    it can hold (an uncompressed one is measured by :func:`_check_nifti_complete`).
    """
    size = [int(v) for v in reader.GetSize()]
    declared, description = declared_size(reader, size)
    data = nrrd_data(path) if fmt == "NRRD" else metaimage_data(path) if fmt == "MetaImage" else None
    if data is not None:
        available, compressed, source = data
        check_on_disk(declared, available, description, path, compressed=compressed,
                      where="the file" if source == path else f"its data file {source.name}")
    elif fmt == "NIfTI" and format_suffix(path) == ".nii.gz" and (end := _nifti_data_end(reader)):
        stored = end - int(float(reader.GetMetaData("vox_offset")))  # bitpix: the stored type, before scaling
        bits = reader.GetMetaData("bitpix")
        check_on_disk(stored, path.stat().st_size, describe(size, f"{bits}-bit values", stored), path,
                      compressed=True)
    check_ceiling(declared, description, path)


def _has_gzip_magic(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def _nifti_data_end(reader: sitk.ImageFileReader) -> int | None:
    """Byte offset where a NIfTI file's voxel data end, from its header (None if unknown)."""
    keys = set(reader.GetMetaDataKeys())
    if not {"vox_offset", "bitpix", "dim[0]"} <= keys:
        return None
    ndim = int(reader.GetMetaData("dim[0]"))
    n_voxels = int(np.prod([int(reader.GetMetaData(f"dim[{i}]")) for i in range(1, ndim + 1)]))
    return int(float(reader.GetMetaData("vox_offset"))) + n_voxels * int(reader.GetMetaData("bitpix")) // 8


def _check_nifti_complete(path: Path, reader: sitk.ImageFileReader) -> None:
    """Raise when the file holds fewer voxel bytes than its header announces.

    For ``.nii.gz`` the gzip trailer (uncompressed size mod 2**32) is compared
    first, which costs nothing; only on a mismatch is the stream decompressed to
    tell a truncated file from a legitimately padded one.
    """
    expected = _nifti_data_end(reader)
    if expected is None:
        return
    if format_suffix(path) == ".nii":
        actual = path.stat().st_size
    else:
        with open(path, "rb") as handle:
            handle.seek(-4, 2)
            if struct.unpack("<I", handle.read(4))[0] == expected % 2**32:
                return
        actual = _gzip_payload_size(path)
    if actual < 0:
        raise DataError("file is truncated or corrupt: the gzip stream ends early", path)
    if actual < expected:
        raise DataError(f"file is truncated or corrupt: {actual} of {expected} data bytes present", path)


_NIFTI_FLOAT_TYPES = {"16": "f4", "64": "f8"}


def _check_nifti_finite(path: Path, reader: sitk.ImageFileReader, image: sitk.Image) -> None:
    """Raise when a float NIfTI stores NaN/inf voxels.

    ITK before 6.0 (SimpleITK 2.x) silently replaces them with 0 while reading
    (ITK PR #6683), so the decoded array cannot show them: the raw voxels are
    scanned instead, only for float files whose decoded array holds a 0.
    """
    if sitk.Version.ITKMajorVersion() >= 6:
        return  # NaNs survive the read; validation.check_finite_image sees them
    code = reader.GetMetaData("datatype") if reader.HasMetaDataKey("datatype") else ""
    if code not in _NIFTI_FLOAT_TYPES or np.all(sitk.GetArrayViewFromImage(image)):
        return
    bad, n_nan = _count_raw_nonfinite(path, reader, _NIFTI_FLOAT_TYPES[code])
    if bad:
        raise DataError(f"file stores {bad} non-finite voxel(s) ({n_nan} NaN), which SimpleITK reads as 0; "
                        "fix or mask them before segmentation", path)


def _count_raw_nonfinite(path: Path, reader: sitk.ImageFileReader, code: str) -> tuple[int, int]:
    """(non-finite, NaN) voxel counts of a NIfTI file's raw float data."""
    end = _nifti_data_end(reader)
    start = int(float(reader.GetMetaData("vox_offset")))
    opener = gzip.open if format_suffix(path) == ".nii.gz" else open
    count = n_nan = 0
    with opener(path, "rb") as stream:
        header_size = stream.read(4)
        dtype = np.dtype(("<" if struct.unpack("<i", header_size)[0] in (348, 540) else ">") + code)
        stream.seek(start)
        remaining = (end or start) - start
        chunk = (1 << 24) // dtype.itemsize * dtype.itemsize
        while remaining > 0 and (block := stream.read(min(chunk, remaining))):
            usable = len(block) // dtype.itemsize * dtype.itemsize
            values = np.frombuffer(block[:usable], dtype=dtype)
            count += int(np.count_nonzero(~np.isfinite(values)))
            n_nan += int(np.count_nonzero(np.isnan(values)))
            remaining -= len(block)
    return count, n_nan


def _gzip_payload_size(path: Path) -> int:
    """Decompressed size, or -1 when the stream ends early or is corrupt."""
    size = 0
    try:
        with gzip.open(path, "rb") as stream:
            while chunk := stream.read(1 << 22):
                size += len(chunk)
    except (EOFError, OSError, gzip.BadGzipFile):
        return -1
    return size


def geometry_of(image: sitk.Image) -> dict[str, tuple[float, ...]]:
    """``spacing``, ``origin`` and ``direction`` of an image, in ITK (x, y, z) order."""
    return {
        "spacing": tuple(float(v) for v in image.GetSpacing()),
        "origin": tuple(float(v) for v in image.GetOrigin()),
        "direction": tuple(float(v) for v in image.GetDirection()),
    }


def array_of(image: sitk.Image, path: str | Path) -> np.ndarray:
    """The voxel array in numpy order (z, y, x[, c]); 4D or vector volumes are refused."""
    dim, components = image.GetDimension(), image.GetNumberOfComponentsPerPixel()
    if dim > 3:
        raise DataError(
            f"{dim}D image (size {image.GetSize()}, x,y,z,t order) where a 2D or 3D image was expected; "
            "split the time points or channels into separate files",
            path,
        )
    if dim == 3 and components > 1:
        raise DataError(f"3D image with {components} components per voxel; one scalar per voxel expected", path)
    return sitk.GetArrayFromImage(image)


def image_from_array(array: np.ndarray, geometry: dict[str, Any]) -> sitk.Image:
    """A SimpleITK image from a numpy (z, y, x) array and ITK-order ``spacing``/``origin``/``direction``
    (:func:`~napari_medsam_eval.core.case.sitk_image`, which ``Case.to_sitk`` uses too)."""
    return sitk_image(array, geometry)


def case_from_sitk(
    image: sitk.Image,
    source: str | Path,
    *,
    kind: CaseKind | None = None,
    modality: str | None = None,
    case_id: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Case:
    """A Case from a SimpleITK image: 2D -> ``image``, 3D -> ``volume`` (or ``video`` if asked).

    A 3D image read as a video has axes ``(t, y, x)``: its last ITK axis is time.
    """
    array = array_of(image, source)
    if image.GetDimension() == 2:
        check_kind(kind, ("image",), source, "a 2D image")
        kind = "image"
    else:
        check_kind(kind, ("volume", "video"), source, "a 3D image")
        kind = kind or "volume"
    geometry = geometry_of(image)
    info = {
        "origin": geometry["origin"],
        "direction": geometry["direction"],
        "spacing_xyz": geometry["spacing"],
        "spacing_unit": "mm",
        **(metadata or {}),
    }
    return make_case(
        array,
        kind=kind,
        spacing=spacing_for_kind(kind, geometry["spacing"]),
        path=source,
        case_id=case_id,
        modality=modality,
        metadata=info,
    )


def read_sitk_case(path: str | Path, *, kind: CaseKind | None = None, modality: str | None = None,
                   case_id: str | None = None) -> Case:
    """Read a NIfTI/NRRD/MHA/MHD/single DICOM file as a Case (no label)."""
    return case_from_sitk(read_sitk_image(path), path, kind=kind, modality=modality, case_id=case_id)


def read_sitk_label(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """A label file's raw voxel array (z, y, x) and its ITK geometry (not yet validated)."""
    image = read_sitk_image(path)
    return array_of(image, path), geometry_of(image)
