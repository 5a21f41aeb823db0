"""Reading a DICOM Segmentation (SEG) as ground truth: each segment a mask on its image series' grid.

* **Which series**: the SEG's Referenced Series Sequence must name the series' UID and its Frame of
  Reference must be the series' (when both have one); otherwise the SEG is refused, naming both series.
* **Where each frame goes**: by its Image Position (Patient) (Plane Position Sequence), projected on the
  slice normal, onto the slice at that position (:class:`~.dicom_grid.SeriesGrid`), never by frame order;
  its orientation, pixel spacing and size must be the series' and its in-plane position the slice's. A
  frame whose Derivation Image Sequence names a source slice must lie on that slice. Slices a segment has
  no frame on are empty.
* **Values**: BINARY frames are the segment's mask; FRACTIONAL frames (probability or occupancy) are
  thresholded at half the Maximum Fractional Value (0.5), said in a note; a LABELMAP SEG's pixel values
  are segment numbers (segment 0, the background, is not a target).
* **Names**: each segment is named by its Segment Label and keeps its Segment Number
  (:mod:`.dicom_objects` turns them into the case's label and targets).

pydicom decodes the pixels (1-bit BINARY frames unpacked); highdicom reads the same files in the
conformance tests (tests/test_dicom_seg_read.py).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.errors import DataError
from .dicom_grid import SeriesGrid
from .dicom_masks import DicomObjects, ObjectMask, read_dataset, unique_names

#: how far (pixels) a frame's in-plane origin may be from its slice's
_IN_PLANE_TOLERANCE = 0.05


def _item(dataset, sequence: str):
    value = dataset.get(sequence) if dataset is not None else None
    return value[0] if value else None


def _frame_value(shared, frame, sequence: str, attribute: str):
    """An attribute of a functional group: the frame's own, else the shared one."""
    for group in (frame, shared):
        item = _item(group, sequence)
        if item is not None and attribute in item:
            return item.get(attribute)
    return None


def check_series(ds, grid: SeriesGrid, path: Path, what: str) -> None:
    """A DataError when the object references another series or another frame of reference than ``grid``'s."""
    referenced = [str(s.SeriesInstanceUID) for s in ds.get("ReferencedSeriesSequence", []) if "SeriesInstanceUID" in s]
    if referenced and grid.series_uid not in referenced:
        raise DataError(f"the {what} belongs to another series: it references series {referenced[0]}, the image is "
                        f"series {grid.series_uid}" + (f" ({grid.folder})" if grid.folder else ""), path)
    frame = str(ds.get("FrameOfReferenceUID", "") or "")
    if frame and grid.frame_of_reference and frame != grid.frame_of_reference:
        raise DataError(f"the {what}'s frame of reference {frame} is not the image's {grid.frame_of_reference} "
                        f"({grid.describe()})", path)


def _segments(ds, path: Path) -> dict[int, str]:
    segments = {}
    for item in ds.get("SegmentSequence", []):
        number = int(item.SegmentNumber)
        segments[number] = str(item.get("SegmentLabel", "") or f"segment_{number}")
    if not segments:
        raise DataError("the SEG has no Segment Sequence: no segment to read", path)
    return segments


def _frames(ds, path: Path) -> np.ndarray:
    from ..core.decoded_limit import check_ceiling

    frames, rows, columns = int(ds.get("NumberOfFrames", 1) or 1), int(ds.Rows), int(ds.Columns)
    check_ceiling(frames * rows * columns * max(int(ds.get("BitsAllocated", 8) or 8) // 8, 1),
                  f"a SEG of {frames} frames of {rows} x {columns} pixels", path)
    try:
        pixels = ds.pixel_array
    except Exception as error:  # pydicom raises many kinds (no handler for a transfer syntax, bad length)
        raise DataError(f"cannot decode the SEG's pixel data ({type(error).__name__}: {error})", path) from None
    return pixels[np.newaxis] if pixels.ndim == 2 else pixels


def read_seg(path: str | Path, grid: SeriesGrid) -> DicomObjects:
    """The segments of the SEG at ``path`` on ``grid`` (module doc for every rule and refusal)."""
    path = Path(path)
    ds = read_dataset(path, "DICOM SEG")
    check_series(ds, grid, path, "SEG")
    segments = _segments(ds, path)
    seg_type = str(ds.get("SegmentationType", "BINARY")).upper()
    shared = _item(ds, "SharedFunctionalGroupsSequence")
    per_frame = list(ds.get("PerFrameFunctionalGroupsSequence", []))
    pixels = _frames(ds, path)
    if len(per_frame) != len(pixels):
        raise DataError(f"the SEG has {len(pixels)} frames but {len(per_frame)} per-frame descriptions", path)
    masks = {number: ObjectMask(number, segments[number], grid.shape) for number in segments}
    notes = []
    maximum = float(ds.get("MaximumFractionalValue", 255) or 255)
    for index, (frame, values) in enumerate(zip(per_frame, pixels)):
        where = f"frame {index + 1}"
        slice_index = _place(frame, shared, grid, ds, path, where)
        if seg_type == "LABELMAP":
            for number in segments:
                if number > 0:
                    masks[number].add(slice_index, values == number)
            continue
        number = _frame_value(None, frame, "SegmentIdentificationSequence", "ReferencedSegmentNumber")
        number = int(number) if number is not None else None
        if number not in masks:
            raise DataError(f"{where} names segment {number}, which the Segment Sequence does not hold "
                            f"({', '.join(map(str, segments))})", path)
        if seg_type == "FRACTIONAL":
            on = values >= maximum / 2.0
        elif values.dtype == np.uint8 and int(ds.get("BitsAllocated", 8)) == 1:
            on = values.view(np.bool_)  # unpacked 1-bit frames hold 0 and 1 only: the mask shares their memory
        else:
            on = values > 0
        masks[number].add(slice_index, on)
    if seg_type == "FRACTIONAL":
        kind = str(ds.get("SegmentationFractionalType", "PROBABILITY")).lower()
        notes.append(f"fractional segments ({kind}, maximum {maximum:g}) thresholded at 0.5: a voxel is in a "
                     "segment where its value is at least half the maximum")
    if seg_type == "LABELMAP" and 0 in segments:
        notes.append(f"segment 0 ({segments[0]}) is the labelmap's background: not a target")
        segments.pop(0)
        masks.pop(0)
    empty = [f"{n} ({segments[n]})" for n in segments if not masks[n].any()]
    if empty:
        notes.append(f"segment{'s' if len(empty) > 1 else ''} {', '.join(empty)} cover{'s' if len(empty) == 1 else ''} "
                     "no voxel: an empty target")
    objects = unique_names([masks[n] for n in sorted(segments)])
    return DicomObjects("SEG", objects, grid, notes)


def _place(frame, shared, grid: SeriesGrid, ds, path: Path, where: str) -> int:
    """The slice a frame lies on (module doc), or a DataError saying why it lies on none."""
    orientation = _frame_value(shared, frame, "PlaneOrientationSequence", "ImageOrientationPatient")
    spacing = _frame_value(shared, frame, "PixelMeasuresSequence", "PixelSpacing")
    position = _frame_value(shared, frame, "PlanePositionSequence", "ImagePositionPatient")
    if orientation is None or spacing is None or position is None:
        raise DataError(f"{where} has no Image Orientation, Pixel Spacing or Image Position (Patient): it cannot be "
                        "placed on the image", path)
    grid.check_plane(np.array([float(v) for v in orientation]), (float(spacing[0]), float(spacing[1])),
                     int(ds.Rows), int(ds.Columns), f"SEG {where}", path)
    point = np.array([float(v) for v in position])
    slice_index = grid.slice_of(float(point @ grid.normal))
    if slice_index is None:
        raise DataError(f"{where} lies at {float(point @ grid.normal):.4g} mm along the slice normal, on no slice "
                        f"of the image {grid.describe()}", path)
    offset = grid.to_index(point[np.newaxis], slice_index)[0]
    if np.abs(offset).max() > _IN_PLANE_TOLERANCE:
        raise DataError(f"{where} is shifted in-plane by {offset[1]:.3g} columns, {offset[0]:.3g} rows from its "
                        f"slice's origin: frames cover the whole slice here", path)
    source = _item(_item(frame, "DerivationImageSequence"), "SourceImageSequence")
    uid = str(source.get("ReferencedSOPInstanceUID", "")) if source is not None else ""
    if uid in grid.sop_uids and grid.sop_uids.index(uid) != slice_index:
        raise DataError(f"{where} names source slice {grid.sop_uids.index(uid) + 1} (SOP Instance {uid}) but lies "
                        f"on slice {slice_index + 1} by its position", path)
    return slice_index


__all__ = ["check_series", "read_seg"]
