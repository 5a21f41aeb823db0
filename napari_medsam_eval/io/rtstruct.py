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

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import DataError
from .dicom_grid import SeriesGrid
from .dicom_raw import Unparsed, numbers, read_raw, text
from .dicom_masks import DicomObjects, ObjectMask, read_dataset, unique_names

#: a pixel centre this close (pixels) to a contour's edge is on the contour
ON_EDGE = 1e-3
#: contour points may stray this far (in slice steps) from their plane
_PLANAR = 0.1


def fill_polygon(rows: np.ndarray, columns: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Pixels (bool, ``shape``) whose centre lies inside or on the closed polygon of vertices
    (``rows``, ``columns``), in pixel coordinates (the module's rasterisation rule).

    Each edge crosses the pixel rows ``low <= y < high`` (half-open: a vertex on a row counts once); sorted by
    row then column, a row's crossings pair up (there are an even number), and the centres from each pair's
    first to its second are in. Work in proportion to the crossings, not to rows x edges."""
    mask = np.zeros(shape, dtype=bool)
    r0, c0 = np.asarray(rows, dtype=float), np.asarray(columns, dtype=float)
    r1, c1 = np.roll(r0, -1), np.roll(c0, -1)
    low, high = np.minimum(r0, r1), np.maximum(r0, r1)
    first = np.maximum(np.ceil(low), 0).astype(int)
    last = np.minimum(np.ceil(high) - 1, shape[0] - 1).astype(int)
    counts = np.maximum(last - first + 1, 0)
    if counts.sum():
        edge = np.repeat(np.arange(len(r0)), counts)
        ys = first[edge] + np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        xs = c0[edge] + (ys - r0[edge]) * (c1[edge] - c0[edge]) / (r1[edge] - r0[edge])
        order = np.lexsort((xs, ys))
        ys, xs = ys[order], xs[order]
        run_rows, starts, stops = ys[0::2], xs[0::2], xs[1::2]
        begin = np.clip(np.ceil(starts - ON_EDGE), 0, shape[1]).astype(int)
        end = np.clip(np.floor(stops + ON_EDGE) + 1, 0, shape[1]).astype(int)
        keep = begin < end
        top, left = int(ys[0]), int(begin.min(initial=0))
        height, width = int(ys[-1]) - top + 1, int(end.max(initial=0)) - left + 1  # the crossings' box
        at_start = (run_rows[keep] - top) * width + begin[keep] - left
        at_end = (run_rows[keep] - top) * width + end[keep] - left
        change = np.bincount(at_start, minlength=height * width) - np.bincount(at_end, minlength=height * width)
        mask[top:top + height, left:left + width - 1] |= np.cumsum(change.reshape(height, width), axis=1)[:, :-1] > 0
    _mark_edges(mask, r0, c0, r1, c1)
    return mask


def _spans(low: np.ndarray, high: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """For each interval [low, high] the whole numbers in it within [0, limit): (interval index, number)."""
    first = np.maximum(np.ceil(low - ON_EDGE), 0).astype(int)
    last = np.minimum(np.floor(high + ON_EDGE), limit - 1).astype(int)
    counts = np.maximum(last - first + 1, 0)
    owner = np.repeat(np.arange(len(low)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return owner, first[owner] + offsets


def _mark_edges(mask: np.ndarray, r0, c0, r1, c1) -> None:
    """Set the pixels whose centres lie on an edge (the scanline leaves out horizontal edges and lower vertices)."""
    flat = np.abs(r1 - r0) < ON_EDGE
    steep = ~flat
    edge, ys = _spans(np.minimum(r0, r1)[steep], np.maximum(r0, r1)[steep], mask.shape[0])
    a_r, a_c, b_r, b_c = r0[steep][edge], c0[steep][edge], r1[steep][edge], c1[steep][edge]
    xs = a_c + (ys - a_r) * (b_c - a_c) / (b_r - a_r)
    near = np.round(xs)
    on = (np.abs(xs - near) <= ON_EDGE) & (near >= 0) & (near < mask.shape[1])
    mask[ys[on], near[on].astype(int)] = True
    row = np.round(r0[flat])
    level = (np.abs(r0[flat] - row) <= ON_EDGE) & (row >= 0) & (row < mask.shape[0])
    edge, xs = _spans(np.minimum(c0, c1)[flat][level], np.maximum(c0, c1)[flat][level], mask.shape[1])
    mask[row[level][edge].astype(int), xs] = True


def fill_contours(polygons: list[tuple[np.ndarray, np.ndarray]], shape: tuple[int, int]) -> np.ndarray:
    """One slice of an ROI: its contours' fills combined by the even-odd rule (a contour inside another is a hole)."""
    mask = fill_polygon(*polygons[0], shape)
    for rows, columns in polygons[1:]:
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
    path = Path(path)
    ds = read_dataset(path, "RTSTRUCT")
    notes = _check_series(ds, grid, path)
    names = {int(r.ROINumber): str(r.get("ROIName", "") or f"roi_{int(r.ROINumber)}")
             for r in ds.get("StructureSetROISequence", [])}
    if not names:
        raise DataError("the RTSTRUCT has no Structure Set ROI Sequence: no ROI to read", path)
    contours = _contours_by_roi(ds, path)
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
            roi = ObjectMask(number, name, grid.shape, mask)
            if not roi.any():
                notes.append(f"ROI '{name}': its contours enclose no pixel centre: an empty target")
            objects.append(roi)
    if problems:
        shown = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
        raise DataError(f"RTSTRUCT does not fit the image {grid.describe()}: {shown}", path)
    if empty:
        notes.append(f"ROI{'s' if len(empty) > 1 else ''} {', '.join(empty)} {'have' if len(empty) > 1 else 'has'} "
                     "no closed contour: not a target")
    if not objects:
        raise DataError(f"no ROI of the RTSTRUCT has a closed contour ({', '.join(empty)}): nothing to score", path)
    return DicomObjects("RTSTRUCT", unique_names(objects), grid, notes)


#: what is read of each ROI's contours (:mod:`.dicom_raw`): ROI Contour Sequence > Referenced ROI Number, Contour
#: Sequence > Contour Geometric Type, Contour Data, Contour Image Sequence > Referenced SOP Instance UID
_CONTOURS = {(0x30060039,): ("rois", {(0x30060084,): "number", (0x30060040,): ("contours", {
    (0x30060042,): "type", (0x30060050,): "data", (0x30060016, 0x00081155): "image"})})}


def _contours_by_roi(ds, path: Path) -> dict[int, list[dict[str, Any]]]:
    """Each ROI's contours (ROI number -> [{type, data, image}]): the file's raw values where they allow
    (:mod:`.dicom_raw`: pydicom built two datasets a contour), else pydicom's."""
    try:
        found = read_raw(path, _CONTOURS)
    except Unparsed:
        return {int(c.ReferencedROINumber): [_from_dataset(contour) for contour in c.get("ContourSequence", []) or []]
                for c in ds.get("ROIContourSequence", []) if "ReferencedROINumber" in c}
    by_roi: dict[int, list[dict[str, Any]]] = {}
    for roi in found.get("rois", []):
        number = numbers(roi.get("number"))
        if number:
            by_roi[int(number[0])] = [{"type": text(c.get("type")) or "CLOSED_PLANAR", "data": c.get("data"),
                                       "image": text(c.get("image"))} for c in roi.get("contours", [])]
    return by_roi


def _from_dataset(contour) -> dict[str, Any]:
    images = contour.get("ContourImageSequence", [])
    raw = contour.get_item("ContourData") if "ContourData" in contour else None
    data = raw.value if raw is not None and isinstance(getattr(raw, "value", None), bytes) else \
        (list(contour.ContourData) if "ContourData" in contour else None)
    return {"type": str(contour.get("ContourGeometricType", "CLOSED_PLANAR")), "data": data,
            "image": str(images[0].get("ReferencedSOPInstanceUID", "")) if images else ""}


def _closed(contours: list[dict[str, Any]]) -> bool:
    return any(c["type"].upper() == "CLOSED_PLANAR" for c in contours)


def _contour_points(contour: dict[str, Any]) -> np.ndarray:
    """A contour's (n, 3) points in mm; its raw text parsed in C where it is text (pydicom's DS values are slow)."""
    value = contour["data"]
    if value is None:
        return np.zeros((0, 3))
    if isinstance(value, bytes):
        chars = value.replace(b"\x00", b" ").replace(b"\\", b" ").decode("ascii", "replace")
        with warnings.catch_warnings():  # numpy warns where the text is not all numbers: said below
            warnings.simplefilter("ignore", DeprecationWarning)
            parsed = np.fromstring(chars, dtype=float, sep=" ")  # C parsing; stops at the first non-number
        if parsed.size != len(chars.split()):
            raise ValueError(f"{chars.split()[parsed.size]!r} is not a number")
    else:
        parsed = np.asarray([float(v) for v in value], dtype=float)
    if len(parsed) % 3 or not np.all(np.isfinite(parsed)):
        raise ValueError(f"{len(parsed)} values, not x, y, z triples of numbers")
    return parsed.reshape(-1, 3)


def _roi_mask(contours, grid: SeriesGrid, name: str) -> tuple[dict[int, np.ndarray] | None, list[str], list[str]]:
    """One ROI's mask on the grid (slice index -> its 2D mask), the problems that refuse the file and the notes
    (module doc)."""
    per_slice: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    problems, skipped, absent = [], 0, []
    step = grid.z_tolerance / 0.1
    for contour in contours:
        if contour["type"].upper() != "CLOSED_PLANAR":
            skipped += 1
            continue
        try:
            points = _contour_points(contour)
        except ValueError as error:
            problems.append(f"ROI '{name}': unreadable Contour Data ({error})")
            continue
        if len(points) < 3:
            skipped += 1
            continue
        z = points @ grid.normal
        if np.ptp(z) > _PLANAR * step:
            problems.append(f"ROI '{name}': a contour is not planar (z {z.min():.4g} to {z.max():.4g} mm)")
            continue
        index = grid.slice_of(float(z.mean()))
        if index is None:
            absent.append(float(z.mean()))
            continue
        uid = contour["image"]
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
    notes = [f"ROI '{name}': {skipped} POINT, OPEN or degenerate contour(s) mark no area: left out"] if skipped else []
    if problems:
        return None, problems, notes
    return {index: fill_contours(polygons, grid.shape[1:]) for index, polygons in per_slice.items()}, [], notes


__all__ = ["ON_EDGE", "fill_contours", "fill_polygon", "read_rtstruct"]
