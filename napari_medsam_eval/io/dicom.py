"""DICOM series folders, read with SimpleITK's ImageSeriesReader.

GDCM finds the series in a folder and sorts each series' slices along the
slice normal. A folder with several series needs ``series_id`` (the error
lists them); a folder with none is an error. Derived objects in the folder
(a DICOM SEG, an RTSTRUCT, a dose or a report: :data:`OBJECT_MODALITIES`) are
not image series: they are left out of the listing, and a SEG or RTSTRUCT
there is the series' ground truth (:mod:`.dicom_objects`). Missing,
duplicated or unevenly spaced slices are an error here, because ITK only
prints a warning and stretches the spacing to cover the gap (the volume would
be silently wrong); so are slices of two in-plane pixel spacings (ITK takes
the first slice's for all).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from ..core.case import Case, CaseKind
from ..core.errors import DataError
from ..core.decoded_limit import check_ceiling
from .sitk_io import array_of, case_from_sitk, declared_size, geometry_of, short_sitk_message

_TAG_POSITION = "0020|0032"
_TAG_ORIENTATION = "0020|0037"
_TAG_MODALITY = "0008|0060"
_TAG_PIXEL_SPACING = "0028|0030"
#: modalities of DICOM objects that are not image slices (never taken for a series to read)
OBJECT_MODALITIES = ("SEG", "RTSTRUCT", "RTDOSE", "RTPLAN", "RTRECORD", "SR", "PR", "KO", "REG")


def dicom_modality(path: str | Path) -> str:
    """The Modality (0008,0060) of a DICOM file, '' when it has none or cannot be read (headers only)."""
    import pydicom

    try:
        header = pydicom.dcmread(str(path), stop_before_pixels=True, specific_tags=["Modality"])
    except Exception:  # pydicom raises many kinds on a file that is not DICOM; the series reader says why
        return ""
    return str(header.get("Modality", "") or "").strip().upper()


def image_series_ids(folder: Path) -> list[str]:
    """GDCM's series UIDs in ``folder`` less those of derived objects (a SEG is listed by GDCM as a series)."""
    ids = list(sitk.ImageSeriesReader.GetGDCMSeriesIDs(str(folder)))
    return [uid for uid in ids
            if dicom_modality(sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folder), uid)[0]) not in OBJECT_MODALITIES]


def dicom_series_files(folder: str | Path, series_id: str | None = None) -> tuple[list[str], str]:
    """Sorted slice files of one DICOM series in ``folder`` and the series UID.

    Several series need ``series_id``; the error lists them with their slice counts.
    """
    folder = Path(folder)
    if series_id is not None:  # one scan of the folder where the series is named (a case's own, read before)
        files = list(sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folder), series_id))
        if files and dicom_modality(files[0]) not in OBJECT_MODALITIES:
            return files, series_id
    ids = image_series_ids(folder)
    if not ids:
        raise DataError("no DICOM series found in folder (no readable DICOM slices)", folder)
    if series_id is None:
        if len(ids) > 1:
            listing = "; ".join(
                f"{uid} ({len(sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folder), uid))} slices)" for uid in ids
            )
            raise DataError(f"folder holds {len(ids)} DICOM series: choose one (--series-id UID on the command line, "
                            f"series_id= from Python): {listing}", folder)
        series_id = ids[0]
    elif series_id not in ids:
        raise DataError(f"DICOM series {series_id!r} not in folder; found: {', '.join(ids)}", folder)
    return list(sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folder), series_id)), series_id


def read_dicom_series(folder: str | Path, series_id: str | None = None) -> tuple[sitk.Image, dict[str, Any]]:
    """Read one DICOM series as a 3D image; returns it with ``series_id`` and ``modality``."""
    folder = Path(folder)
    files, series_id = dicom_series_files(folder, series_id)
    headers = [_read_header(Path(f)) for f in files]
    _check_slice_positions(files, headers, folder)
    _check_pixel_spacing(files, headers, folder)
    _check_series_size(files, folder)
    reader = sitk.ImageSeriesReader()
    reader.SetFileNames(files)
    try:
        image = reader.Execute()
    except RuntimeError as error:
        raise DataError(f"cannot read DICOM series {series_id}: {short_sitk_message(error)}", folder) from None
    modality = headers[0].get(_TAG_MODALITY, "").strip() or None
    return image, {"series_id": series_id, "modality": modality, "n_files": len(files)}


def _read_header(path: Path) -> dict[str, str]:
    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    try:
        reader.ReadImageInformation()
    except RuntimeError as error:
        raise DataError(f"unreadable DICOM slice: {short_sitk_message(error)}", path) from None
    return {key: reader.GetMetaData(key) for key in (_TAG_POSITION, _TAG_ORIENTATION, _TAG_MODALITY, _TAG_PIXEL_SPACING)
            if reader.HasMetaDataKey(key)}


def _check_pixel_spacing(files: list[str], headers: list[dict[str, str]], folder: Path) -> None:
    """Raise when the slices do not share one in-plane Pixel Spacing (ITK would use the first slice's for all)."""
    found: dict[tuple[float, ...], list[str]] = {}
    for name, header in zip(files, headers):
        if _TAG_PIXEL_SPACING in header:
            try:
                value = tuple(round(float(v), 6) for v in header[_TAG_PIXEL_SPACING].strip().split("\\"))
            except ValueError:
                raise DataError(f"DICOM slice has an unreadable Pixel Spacing {header[_TAG_PIXEL_SPACING]!r}",
                                name) from None
            found.setdefault(value, []).append(Path(name).name)
    if len(found) > 1:
        listing = "; ".join(f"{' x '.join(f'{v:g}' for v in value)} mm on {len(names)} slice"
                            f"{'s' if len(names) > 1 else ''} (e.g. {names[0]})" for value, names in found.items())
        raise DataError(f"DICOM slices have {len(found)} different in-plane pixel spacings: {listing}; one series "
                        "has one pixel grid (ITK would read every slice with the first slice's spacing)", folder)


def _check_series_size(files: list[str], folder: Path) -> None:
    """Refuse a series whose slices x rows x columns (of the first slice's pixel type) exceed the decoded-size
    limit (:mod:`napari_medsam_eval.core.decoded_limit`), before a pixel is read."""
    reader = sitk.ImageFileReader()
    reader.SetFileName(files[0])
    try:
        reader.ReadImageInformation()
    except RuntimeError as error:
        raise DataError(f"unreadable DICOM slice: {short_sitk_message(error)}", files[0]) from None
    columns, rows = (int(v) for v in reader.GetSize()[:2])
    declared, description = declared_size(reader, [columns, rows, len(files)])
    check_ceiling(declared, f"a series of {description}", folder)


def _check_slice_positions(files: list[str], headers: list[dict[str, str]], folder: Path) -> None:
    """Raise on missing, duplicated or unevenly spaced slices (ITK would only warn)."""
    if len(files) < 3 or any(_TAG_POSITION not in h or _TAG_ORIENTATION not in h for h in headers):
        return
    cosines = np.array([float(v) for v in headers[0][_TAG_ORIENTATION].split("\\")])
    normal = np.cross(cosines[:3], cosines[3:6])
    positions = np.array([[float(v) for v in h[_TAG_POSITION].split("\\")] for h in headers]) @ normal
    steps = np.diff(positions)
    expected = float(np.median(steps))
    if abs(expected) < 1e-6:
        raise DataError("DICOM slices share one position (duplicated slices?)", folder)
    tolerance = max(0.01, 0.05 * abs(expected))
    bad = np.flatnonzero(np.abs(steps - expected) > tolerance)
    if bad.size:
        i = int(bad[0])
        raise DataError(
            f"missing or unevenly spaced DICOM slices: gap of {steps[i]:.4g} mm between "
            f"{Path(files[i]).name} and {Path(files[i + 1]).name} (expected {expected:.4g} mm)",
            folder,
        )


def read_dicom_case(folder: str | Path, *, series_id: str | None = None, kind: CaseKind | None = None,
                    modality: str | None = None, case_id: str | None = None) -> Case:
    """Read a DICOM series folder as a volume Case; modality from tag (0008,0060) when not given."""
    image, info = read_dicom_series(folder, series_id)
    return case_from_sitk(
        image,
        folder,
        kind=kind,
        modality=modality or info["modality"],
        case_id=case_id,
        metadata={"dicom_series_id": info["series_id"], "n_files": info["n_files"],
                  "dicom_series_folder": str(Path(folder).resolve())},
    )


def read_dicom_label(folder: str | Path, series_id: str | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """A label stored as a DICOM series: its raw array (z, y, x) and ITK geometry."""
    image, _ = read_dicom_series(folder, series_id)
    return array_of(image, folder), geometry_of(image)
