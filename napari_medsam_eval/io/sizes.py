"""Sizes a header declares, checked against the file and a memory ceiling before anything is allocated.

A header is a promise: ``sizes: 2000 2000 1000`` in an NRRD makes SimpleITK
allocate 4 GB before it finds that the file holds 1 KB, and an npz whose
``imgs`` header says ``(40000, 40000, 40000)`` makes numpy ask for 58 TiB. The
readers call these checks after reading the header and before reading data:

* **data on disk**: uncompressed voxel data must be at least as long as the
  header declares (the bytes after an NRRD/MetaImage header, or in its
  detached data file; the data part of an npz member). Deflate (gzip/zlib)
  cannot expand data more than :data:`DEFLATE_MAX_RATIO` times, so a
  compressed payload that would have to expand more is refused too;
* **memory ceiling** (the decoded-size limit, :mod:`napari_medsam_eval.core.decoded_limit`,
  re-exported here): whatever the file holds, a declared image whose decoded
  size is above :func:`memory_ceiling` is refused. Each reader checks it from
  its header alone: npz array headers (:func:`check_npz_sizes`), NIfTI/NRRD/
  MetaImage headers (SimpleITK's ``ReadImageInformation``), a DICOM series'
  slices x rows x columns, a video container's frames x height x width x 3, a
  2D image's size and mode, a folder of frames' count x its first frame.

Every refusal is a :class:`~napari_medsam_eval.core.errors.DataError` naming the
file, what the header declares and what the file holds.
"""
from __future__ import annotations

import math
import re
import zipfile
from pathlib import Path
from typing import IO, Sequence

import numpy as np

from ..core.decoded_limit import (CEILING_ENV, MEMORY_FRACTION, RAISE_HINT, check_ceiling,  # noqa: F401
                                   human_bytes, memory_ceiling)
from ..core.errors import DataError

#: the largest expansion deflate can give (RFC 1951: about 1032:1), with a margin
DEFLATE_MAX_RATIO = 1100


def describe(shape: Sequence[int], what: str, n_bytes: int) -> str:
    """``"2000 x 2000 x 1000 voxels of 8-bit unsigned integer (4.0 GB)"``."""
    return f"{' x '.join(str(int(s)) for s in shape)} voxels of {what} ({human_bytes(n_bytes)})"


def check_on_disk(declared: int, available: int, description: str, path: str | Path, *,
                  compressed: bool = False, where: str = "the file") -> None:
    """Refuse when ``available`` bytes cannot hold the ``declared`` data (see the module doc)."""
    if compressed and declared > available * DEFLATE_MAX_RATIO:
        raise DataError(f"header declares {description}, but {where} holds {human_bytes(available)} of compressed "
                        f"data, which cannot expand to that (deflate expands at most ~1032x): the header lies or the "
                        "file is cut short; refused before allocating", path)
    if not compressed and available < declared:
        raise DataError(f"header declares {description}, but {where} holds only {human_bytes(available)} of "
                        "voxel data: the file is cut short or its header lies; refused before allocating", path)


# --------------------------------------------------------------------------- text headers (NRRD, MetaImage)
#: bytes of a text header read at most
_HEADER_LIMIT = 1 << 20


def _read_head(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(_HEADER_LIMIT)


def nrrd_data(path: Path) -> tuple[int, bool, Path] | None:
    """(bytes of data, compressed?, data file) of an NRRD (attached or one detached file), or None.

    None when the header cannot be understood here (several data files, an
    unknown encoding): SimpleITK then judges the file alone.
    """
    head = _read_head(path)
    end = re.search(rb"\r?\n\r?\n", head)
    if not head.startswith(b"NRRD"):
        return None
    text = head[: end.start() if end else len(head)].decode("latin-1")
    fields = {k.strip().lower(): v.strip() for k, sep, v in
              (line.partition(":") for line in text.splitlines()[1:]) if sep and not v.startswith("=")}
    encoding = fields.get("encoding", "").lower()
    skip = _int(fields.get("byte skip", "0"))
    data_file = fields.get("data file") or fields.get("datafile")
    if data_file:
        if data_file.upper().startswith("LIST") or len(data_file.split()) > 1:
            return None
        source, start = path.parent / data_file, 0
    elif end is None:
        return None
    else:
        source, start = path, end.end()
    if encoding not in ("raw", "gzip", "gz") or skip < 0:
        return None
    try:
        size = source.stat().st_size
    except OSError:
        return None  # SimpleITK names the missing data file
    return max(size - start - skip, 0), encoding != "raw", source


def metaimage_data(path: Path) -> tuple[int, bool, Path] | None:
    """(bytes of data, compressed?, data file) of a MetaImage (``.mha``/``.mhd``), or None (see :func:`nrrd_data`)."""
    head = _read_head(path)
    fields: dict[str, str] = {}
    offset = 0
    for line in head.splitlines(keepends=True):
        offset += len(line)
        key, sep, value = line.decode("latin-1").partition("=")
        if not sep:
            return None
        fields[key.strip().lower()] = value.strip()
        if key.strip().lower() == "elementdatafile":
            break
    data_file = fields.get("elementdatafile")
    if data_file is None or data_file.upper().startswith("LIST") or "%" in data_file:
        return None
    source, start = (path, offset) if data_file.upper() == "LOCAL" else (path.parent / data_file, 0)
    if source != path:
        start = max(_int(fields.get("headersize", "0")), 0)
    try:
        size = source.stat().st_size
    except OSError:
        return None
    return max(size - start, 0), fields.get("compresseddata", "false").lower() == "true", source


def _int(text: str) -> int:
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        return 0


# --------------------------------------------------------------------------- npz members
def _member_header(member: IO[bytes]) -> tuple[tuple[int, ...], np.dtype] | None:
    """Shape and dtype from an ``.npy`` member's header; None for formats not read here (3.0)."""
    version = np.lib.format.read_magic(member)
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version not in readers:
        return None
    shape, _, dtype = readers[version](member)
    return tuple(int(s) for s in shape), dtype


def check_npz_sizes(path: Path) -> None:
    """Refuse an npz whose array headers declare more data than their members hold, or than the ceiling.

    Every member counts against the ceiling: an array (named ``x.npy`` or just ``x``: ``np.load`` reads both) by
    its header, a pickled array or a member that is not an array (``np.load`` reads it whole, as bytes) by its
    uncompressed size. Only headers are read. Errors of the archive itself (not a zip, a bad
    header) propagate as zipfile/ValueError exceptions, which the caller
    reports as an unreadable archive.
    """
    total, largest = 0, (0, "no arrays")
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            with archive.open(info) as member:
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if not info.filename.endswith(".npy") and member.read(6) != b"\x93NUMPY":
                    declared = info.file_size  # np.load reads a member that is not an array whole, as bytes
                    description = f"member '{info.filename}' of {human_bytes(declared)} that is not an array"
                    total += declared
                    largest = max(largest, (declared, description))
                    continue
                if not info.filename.endswith(".npy"):
                    member.seek(0)  # an array under a name without .npy: np.load reads it as one
                header = _member_header(member)
                if header is None or header[1].hasobject:  # pickled (read within bounds: npz_objects), or 3.0
                    declared = info.file_size
                    total += declared
                    largest = max(largest, (declared, f"pickled array '{name}' of {human_bytes(declared)}"))
                    continue
                shape, dtype = header
                declared = math.prod(shape) * dtype.itemsize
                description = f"array '{name}' of shape {shape} {dtype} ({human_bytes(declared)})"
                if info.file_size - member.tell() < declared:
                    raise DataError(f"header declares {description}, but its archive member holds only "
                                    f"{human_bytes(info.file_size - member.tell())} of data: the file is cut short "
                                    "or the header lies; refused before allocating", path)
            total += declared
            largest = max(largest, (declared, description))
    check_ceiling(total, f"arrays of {human_bytes(total)} in all (the largest: {largest[1]})", path)
