"""Reading an RT Structure Set (RTSTRUCT) as ground truth: each ROI a mask rasterised on its series' grid.

* **Which series**: the one its Referenced Frame of Reference Sequence's RT Referenced Series names; it must
  be the image's (else refused, naming both). An RTSTRUCT naming no series must share the image's Frame of
  Reference (else refused).
* **Each ROI** of the Structure Set ROI Sequence is a target named by its ROI Name and numbered by its ROI
  Number. Its CLOSED_PLANAR contours are placed on the slice their z position (along the slice normal)
  names; a contour whose points are not on one plane, or on no slice of the series, or naming a Contour Image
  the series does not hold, refuses the file with a message naming the ROI. An ROI without any contour is
  left out with a note naming it (never an empty target); POINT and OPEN contours mark no area and are left
  out with a note.
* **Rasterisation rule** (:func:`fill_contours`): a pixel belongs to the ROI when its *centre* lies inside or
  on the contour polygon (vertices in pixel coordinates, mm mapped through the series' position,
  orientation and spacing); the contours of one ROI on one slice combine by the even-odd rule, so a contour
  inside another is a hole, as the standard's closed planar contours imply. Inside is decided by a scanline
  crossing count at each row's pixel centres; a centre within 1e-3 pixel of an edge counts as on it.

rt-utils (the reader's conformance reference in tests/test_rtstruct.py) rounds each vertex to the nearest
pixel and fills with OpenCV's ``fillPoly``: it takes the pixels the rounded outline passes through, so where
contours run between pixel centres the two differ on boundary pixels only (docs/clinical-dicom.md states the
per-ROI agreement on the shared files).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.errors import DataError
from .dicom_grid import SeriesGrid
from .dicom_masks import DicomObjects, ObjectMask, unique_names

#: a pixel centre this close (pixels) to a contour's edge is on the contour
ON_EDGE = 1e-3
#: contour points may stray this far (in slice steps) from their plane
_PLANAR = 0.1


def fill_polygon(rows: np.ndarray, columns: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Pixels (bool, ``shape``) whose centre lies inside or on the closed polygon of vertices
    (``rows``, ``columns``), in pixel coordinates (the module's rasterisation rule)."""
    mask = np.zeros(shape, dtype=bool)
    r0, c0 = rows, columns
    r1, c1 = np.roll(rows, -1), np.roll(columns, -1)
    top, bottom = max(int(np.ceil(rows.min() - ON_EDGE)), 0), min(int(np.floor(rows.max() + ON_EDGE)), shape[0] - 1)
    if top > bottom:
        return mask
    ys = np.arange(top, bottom + 1, dtype=float)[:, np.newaxis]
    low, high = np.minimum(r0, r1), np.maximum(r0, r1)
    crossing = (ys >= low) & (ys < high)  # half-open: a vertex on the row is counted once
    with np.errstate(divide="ignore", invalid="ignore"):
        xs = np.where(crossing, c0 + (ys - r0) * (c1 - c0) / np.where(r1 != r0, r1 - r0, 1.0), np.nan)
    xs = np.sort(xs, axis=1)
    for i, row in enumerate(xs):
        row = row[~np.isnan(row)]
        y = top + i
        for start, stop in zip(row[0::2], row[1::2]):
            first, last = max(int(np.ceil(start - ON_EDGE)), 0), min(int(np.floor(stop + ON_EDGE)), shape[1] - 1)
            if first <= last:
                mask[y, first:last + 1] = True
    _mark_edges(mask, r0, c0, r1, c1)
    return mask


def _mark_edges(mask: np.ndarray, r0, c0, r1, c1) -> None:
    """Set the pixels whose centres lie on an edge (the scanline leaves out horizontal edges and lower vertices)."""
    for a_r, a_c, b_r, b_c in zip(r0, c0, r1, c1):
        low, high = min(a_r, b_r), max(a_r, b_r)
        ys = np.arange(max(int(np.ceil(low - ON_EDGE)), 0), min(int(np.floor(high + ON_EDGE)), mask.shape[0] - 1) + 1)
        if abs(b_r - a_r) < ON_EDGE:
            if abs(a_r - round(a_r)) > ON_EDGE or not 0 <= round(a_r) < mask.shape[0]:
                continue
            xs = np.arange(max(int(np.ceil(min(a_c, b_c) - ON_EDGE)), 0),
                           min(int(np.floor(max(a_c, b_c) + ON_EDGE)), mask.shape[1] - 1) + 1)
            mask[int(round(a_r)), xs] = True
            continue
        xs = a_c + (ys - a_r) * (b_c - a_c) / (b_r - a_r)
        on = (np.abs(xs - np.round(xs)) <= ON_EDGE) & (np.round(xs) >= 0) & (np.round(xs) < mask.shape[1])
        mask[ys[on], np.round(xs[on]).astype(int)] = True


def fill_contours(polygons: list[tuple[np.ndarray, np.ndarray]], shape: tuple[int, int]) -> np.ndarray:
    """One slice of an ROI: its contours' fills combined by the even-odd rule (a contour inside another is a hole)."""
    mask = np.zeros(shape, dtype=bool)
    for rows, columns in polygons:
        mask ^= fill_polygon(rows, columns, shape)
    return mask


def referenced_series_uids(ds) -> list[str]:
    return [str(series.SeriesInstanceUID)
            for frame in ds.get("ReferencedFrameOfReferenceSequence", [])
            for study in frame.get("RTReferencedStudySequence", [])
            for series in study.get("RTReferencedSeriesSequence", []) if "SeriesInstanceUID" in series]


def _check_series(ds, grid: SeriesGrid, path: Path) -> list[str]:
    uids = referenced_series_uids(ds)
    frames = [str(f.get("FrameOfReferenceUID", "")) for f in ds.get("ReferencedFrameOfReferenceSequence", [])]
    where = f" ({grid.folder})" if grid.folder else ""
    if uids and grid.series_uid not in uids:
        raise DataError(f"the RTSTRUCT belongs to another series: it references series {uids[0]}, the image is "
                        f"series {grid.series_uid}{where}", path)
    if not uids:
        if grid.frame_of_reference not in frames:
            raise DataError(f"the RTSTRUCT names no image series, and its frame of reference "
                            f"{frames[0] if frames else '(none)'} is not the image's {grid.frame_of_reference}{where}",
                            path)
        return ["the RTSTRUCT names no image series (no RT Referenced Series): placed on the series of its frame "
                f"of reference, {grid.series_uid}"]
    if grid.frame_of_reference and frames and grid.frame_of_reference not in frames:
        return [f"the RTSTRUCT's frame of reference {frames[0]} is not its series' {grid.frame_of_reference}: "
                "contours placed by the referenced series"]
    return []


def read_rtstruct(path: str | Path, grid: SeriesGrid) -> DicomObjects:
    """The ROIs of the RTSTRUCT at ``path`` rasterised on ``grid`` (module doc for every rule and refusal)."""
    import pydicom

    path = Path(path)
    try:
        ds = pydicom.dcmread(str(path))
    except Exception as error:
        raise DataError(f"unreadable RTSTRUCT ({type(error).__name__}: {error})", path) from None
    notes = _check_series(ds, grid, path)
    names = {int(r.ROINumber): str(r.get("ROIName", "") or f"roi_{int(r.ROINumber)}")
             for r in ds.get("StructureSetROISequence", [])}
    if not names:
        raise DataError("the RTSTRUCT has no Structure Set ROI Sequence: no ROI to read", path)
    contours = {int(c.ReferencedROINumber): list(c.get("ContourSequence", []) or [])
                for c in ds.get("ROIContourSequence", []) if "ReferencedROINumber" in c}
    objects, problems, empty = [], [], []
    for number, name in names.items():
        found = contours.get(number, [])
        if not _closed(found):
            empty.append(f"'{name}'")
            continue
        mask, roi_problems, roi_notes = _roi_mask(found, grid, name)
        problems += roi_problems
        notes += roi_notes
        if mask is not None:
            if not mask.any():
                notes.append(f"ROI '{name}': its contours enclose no pixel centre: an empty target")
            objects.append(ObjectMask(number, name, mask))
    if problems:
        shown = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
        raise DataError(f"RTSTRUCT does not fit the image {grid.describe()}: {shown}", path)
    if empty:
        notes.append(f"ROI{'s' if len(empty) > 1 else ''} {', '.join(empty)} {'have' if len(empty) > 1 else 'has'} "
                     "no closed contour: not a target")
    if not objects:
        raise DataError(f"no ROI of the RTSTRUCT has a closed contour ({', '.join(empty)}): nothing to score", path)
    return DicomObjects("RTSTRUCT", unique_names(objects), grid, notes)


def _closed(contours) -> bool:
    return any(str(c.get("ContourGeometricType", "CLOSED_PLANAR")).upper() == "CLOSED_PLANAR" for c in contours)


def _roi_mask(contours, grid: SeriesGrid, name: str) -> tuple[np.ndarray | None, list[str], list[str]]:
    """One ROI's mask on the grid, the problems that refuse the file and the notes (module doc)."""
    per_slice: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    problems, skipped, absent = [], 0, []
    step = grid.z_tolerance / 0.1
    for contour in contours:
        if str(contour.get("ContourGeometricType", "CLOSED_PLANAR")).upper() != "CLOSED_PLANAR":
            skipped += 1
            continue
        points = np.asarray([float(v) for v in contour.get("ContourData", [])], dtype=float).reshape(-1, 3)
        if len(points) < 3:
            continue
        z = points @ grid.normal
        if np.ptp(z) > _PLANAR * step:
            problems.append(f"ROI '{name}': a contour is not planar (z {z.min():.4g} to {z.max():.4g} mm)")
            continue
        index = grid.slice_of(float(z.mean()))
        if index is None:
            absent.append(float(z.mean()))
            continue
        images = contour.get("ContourImageSequence", [])
        uid = str(images[0].get("ReferencedSOPInstanceUID", "")) if images else ""
        if uid and uid not in grid.sop_uids:
            problems.append(f"ROI '{name}': a contour names image {uid}, which the series does not hold")
            continue
        rows_columns = grid.to_index(points, index)
        per_slice.setdefault(index, []).append((rows_columns[:, 0], rows_columns[:, 1]))
    if absent:
        zs = sorted(set(round(z, 2) for z in absent))
        listed = ", ".join(f"{z:g}" for z in zs[:5]) + (f" and {len(zs) - 5} more" if len(zs) > 5 else "")
        problems.append(f"ROI '{name}': {len(absent)} of {len(contours)} contours lie on slices the series does not "
                        f"have (z {listed} mm)")
    notes = [f"ROI '{name}': {skipped} POINT or OPEN contour(s) mark no area: left out"] if skipped else []
    if problems:
        return None, problems, notes
    mask = np.zeros(grid.shape, dtype=bool)
    for index, polygons in per_slice.items():
        mask[index] = fill_contours(polygons, grid.shape[1:])
    return mask, [], notes


__all__ = ["ON_EDGE", "fill_contours", "fill_polygon", "read_rtstruct"]
