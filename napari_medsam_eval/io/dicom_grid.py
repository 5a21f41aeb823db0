"""The voxel grid of a DICOM image series, on which SEG frames and RTSTRUCT contours are placed.

A :class:`SeriesGrid` is what a derived object needs from its source series: the series and frame of
reference UIDs, each slice's SOP Instance UID and Image Position (Patient) in the order the case's
volume has them (GDCM's, along the slice normal), the row and column directions, the pixel spacing and
the slice size. It maps points in patient coordinates (mm) to voxel indices: column
``(p - P0) . row_direction / column_spacing``, row ``(p - P0) . column_direction / row_spacing``, and the
slice whose position along the normal is within :attr:`SeriesGrid.z_tolerance` of the point's (a point
between slices lies on no slice). Headers only, read with pydicom; no pixel is decoded here.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import DataError
from .dicom_raw import Unparsed, numbers, read_raw, text, unsigned_short


@dataclass(frozen=True)
class SeriesGrid:
    """One image series' geometry (module doc); ``files`` in slice order, ``folder`` the series folder."""

    series_uid: str
    frame_of_reference: str
    sop_uids: tuple[str, ...]
    positions: np.ndarray  # (slices, 3) Image Position (Patient), mm
    row_direction: np.ndarray  # along a row: the direction of increasing column index
    column_direction: np.ndarray  # down a column: increasing row index
    pixel_spacing: tuple[float, float]  # (between rows, between columns), DICOM's order
    shape: tuple[int, int, int]  # (slices, rows, columns)
    folder: Path | None = None
    files: tuple[str, ...] = ()

    @cached_property
    def normal(self) -> np.ndarray:
        return np.cross(self.row_direction, self.column_direction)

    @cached_property
    def slice_z(self) -> np.ndarray:
        """Each slice's position along the normal (mm)."""
        return self.positions @ self.normal

    @cached_property
    def slice_of_uid(self) -> dict[str, int]:
        """Each slice's index by its SOP Instance UID (the first, should two slices share one)."""
        found: dict[str, int] = {}
        for index, uid in enumerate(self.sop_uids):
            found.setdefault(uid, index)
        return found

    @cached_property
    def z_tolerance(self) -> float:
        """How far (mm) from a slice's plane a point may lie and still be on it: a tenth of the slice step
        (0.1 mm for a single slice)."""
        z = self.slice_z
        return 0.1 * float(np.median(np.abs(np.diff(z)))) if len(z) > 1 else 0.1

    def slice_of(self, z: float) -> int | None:
        """The slice index at position ``z`` along the normal, None when no slice lies there."""
        offsets = np.abs(self.slice_z - z)
        index = int(np.argmin(offsets))
        return index if offsets[index] <= self.z_tolerance else None

    def to_index(self, points: np.ndarray, slice_index: int) -> np.ndarray:
        """Patient points (n, 3) on slice ``slice_index`` -> (n, 2) fractional (row, column) indices."""
        relative = np.asarray(points, dtype=float) - self.positions[slice_index]
        rows = relative @ self.column_direction / self.pixel_spacing[0]
        columns = relative @ self.row_direction / self.pixel_spacing[1]
        return np.stack([rows, columns], axis=1)

    def describe(self) -> str:
        """``series 1.2.3 (3 slices, z -128.7 to -126.7 mm)``, for messages."""
        z = self.slice_z
        return f"series {self.series_uid} ({len(z)} slice{'s' if len(z) != 1 else ''}, z {z.min():.4g} to {z.max():.4g} mm)"

    def check_plane(self, orientation: np.ndarray, spacing: tuple[float, float], rows: int, columns: int,
                    what: str, path: Path) -> None:
        """A DataError when an object's frames (``orientation``: row then column direction, ``spacing``,
        size) are not this series' slices: placing them would shift or stretch the object."""
        mine = np.concatenate([self.row_direction, self.column_direction])
        if not np.allclose(orientation, mine, atol=1e-4):
            raise DataError(f"{what}: its frames' orientation {np.round(orientation, 4).tolist()} is not the "
                            f"image's {np.round(mine, 4).tolist()} ({self.describe()})", path)
        if not np.allclose(spacing, self.pixel_spacing, rtol=1e-4, atol=1e-6):
            raise DataError(f"{what}: its pixel spacing {list(spacing)} mm is not the image's "
                            f"{list(self.pixel_spacing)} mm ({self.describe()})", path)
        if (rows, columns) != self.shape[1:]:
            raise DataError(f"{what}: its frames are {rows}x{columns} pixels, the image's slices "
                            f"{self.shape[1]}x{self.shape[2]} ({self.describe()})", path)


def _floats(value, count: int, tag: str, path: str) -> np.ndarray:
    try:
        array = np.array([float(v) for v in value], dtype=float)
    except (TypeError, ValueError):
        array = np.array([])
    if array.shape != (count,) or not np.all(np.isfinite(array)):
        raise DataError(f"DICOM slice has no usable {tag} ({value!r})", path)
    return array


#: what the grid reads of each slice's header: tag -> pydicom's keyword
_HEADER_TAGS = {0x00080018: "SOPInstanceUID", 0x00200032: "ImagePositionPatient", 0x00200037: "ImageOrientationPatient",
                0x00280030: "PixelSpacing", 0x00280010: "Rows", 0x00280011: "Columns", 0x0020000E: "SeriesInstanceUID",
                0x00200052: "FrameOfReferenceUID"}
_NUMBERS, _COUNTS = ("ImagePositionPatient", "ImageOrientationPatient", "PixelSpacing"), ("Rows", "Columns")


def _header(name: str) -> Any:
    """The slice header's :data:`_HEADER_TAGS` (``.get(keyword)``): read from its raw bytes (:mod:`.dicom_raw`,
    a quarter of pydicom's time), else by pydicom."""
    try:
        raw = read_raw(name, {(tag,): keyword for tag, keyword in _HEADER_TAGS.items()})
    except Unparsed:
        import pydicom

        try:
            return pydicom.dcmread(name, stop_before_pixels=True, specific_tags=list(_HEADER_TAGS.values()))
        except Exception as error:  # pydicom raises many kinds on a damaged file
            raise DataError(f"unreadable DICOM slice ({type(error).__name__}: {error})", name) from None
    return {key: numbers(value) if key in _NUMBERS else unsigned_short(value) if key in _COUNTS else text(value)
            for key, value in raw.items() if key in _HEADER_TAGS.values()}


def _size(header: Any, path: str) -> tuple[int, int]:
    rows, columns = header.get("Rows"), header.get("Columns")
    if rows is None or columns is None:
        raise DataError("DICOM slice has no Rows or Columns", path)
    return int(rows), int(columns)


def series_grid(files: list[str], folder: Path | None = None) -> SeriesGrid:
    """The grid of a series' slice ``files`` (already in slice order, as :func:`.dicom.dicom_series_files`
    returns them); a DataError naming the file for a slice without position, orientation or spacing."""
    headers = [_header(name) for name in files]
    first = headers[0]
    orientation = _floats(first.get("ImageOrientationPatient"), 6, "Image Orientation (Patient)", files[0])
    spacing = _floats(first.get("PixelSpacing"), 2, "Pixel Spacing", files[0])
    positions = np.stack([_floats(h.get("ImagePositionPatient"), 3, "Image Position (Patient)", f)
                          for h, f in zip(headers, files)])
    return SeriesGrid(series_uid=str(first.get("SeriesInstanceUID", "")),
                      frame_of_reference=str(first.get("FrameOfReferenceUID", "")),
                      sop_uids=tuple(str(h.get("SOPInstanceUID", "")) for h in headers), positions=positions,
                      row_direction=orientation[:3], column_direction=orientation[3:],
                      pixel_spacing=(float(spacing[0]), float(spacing[1])),
                      shape=(len(files), *_size(first, files[0])), folder=folder,
                      files=tuple(str(f) for f in files))


__all__ = ["SeriesGrid", "series_grid"]
