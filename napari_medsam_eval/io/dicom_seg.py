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

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..core.errors import DataError
from .dicom_frames import FrameDescription, frame_descriptions
from .dicom_grid import SeriesGrid
from .dicom_masks import DicomObjects, ObjectMask, read_dataset, unique_names

#: how far (pixels) a frame's in-plane origin may be from its slice's
_IN_PLANE_TOLERANCE = 0.05


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


def _frames(ds, path: Path) -> Sequence[np.ndarray | None]:
    """The SEG's frames, in order; a 1-bit frame that sets no pixel is None (placed, never unpacked)."""
    from ..core.decoded_limit import check_ceiling

    frames, rows, columns = int(ds.get("NumberOfFrames", 1) or 1), int(ds.Rows), int(ds.Columns)
    check_ceiling(frames * rows * columns * max(int(ds.get("BitsAllocated", 8) or 8) // 8, 1),
                  f"a SEG of {frames} frames of {rows} x {columns} pixels", path)
    packed = _packed_frames(ds, frames, rows, columns)
    if packed is not None:
        return packed
    try:
        pixels = ds.pixel_array
    except Exception as error:  # pydicom raises many kinds (no handler for a transfer syntax, bad length)
        raise DataError(f"cannot decode the SEG's pixel data ({type(error).__name__}: {error})", path) from None
    return pixels[np.newaxis] if pixels.ndim == 2 else pixels


class _PackedFrames(Sequence):
    """1-bit frames of uncompressed pixel data, each starting on a byte (rows x columns a multiple of 8),
    unpacked one at a time as they are placed: a SEG of every slice holds mostly empty frames, and unpacking
    all of them at once took a byte a pixel of every frame beside the masks."""

    def __init__(self, data: np.ndarray, frames: int, rows: int, columns: int) -> None:
        self.data, self.frames, self.shape = data, frames, (rows, columns)
        self.step = rows * columns // 8

    def __len__(self) -> int:
        return self.frames

    def __getitem__(self, index: int) -> np.ndarray | None:
        if not 0 <= index < self.frames:
            raise IndexError(index)
        chunk = self.data[index * self.step:(index + 1) * self.step]
        if not chunk.any():
            return None
        return np.unpackbits(chunk, bitorder="little").view(np.bool_).reshape(self.shape)


def _packed_frames(ds, frames: int, rows: int, columns: int) -> _PackedFrames | None:
    """The frames unpacked one at a time where the pixel data allows (:class:`_PackedFrames`), else None
    (pydicom decodes them all)."""
    syntax = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
    if (int(ds.get("BitsAllocated", 8) or 8) != 1 or syntax is None or syntax.is_compressed
            or not syntax.is_little_endian or (rows * columns) % 8 or "PixelData" not in ds):
        return None
    data = np.frombuffer(ds.PixelData, dtype=np.uint8)
    return _PackedFrames(data, frames, rows, columns) if data.size >= frames * rows * columns // 8 else None


def read_seg(path: str | Path, grid: SeriesGrid) -> DicomObjects:
    """The segments of the SEG at ``path`` on ``grid`` (module doc for every rule and refusal)."""
    path = Path(path)
    ds = read_dataset(path, "DICOM SEG")
    check_series(ds, grid, path, "SEG")
    segments = _segments(ds, path)
    seg_type = str(ds.get("SegmentationType", "BINARY")).upper()
    per_frame = frame_descriptions(ds, path)
    pixels = _frames(ds, path)
    if len(per_frame) != len(pixels):
        raise DataError(f"the SEG has {len(pixels)} frames but {len(per_frame)} per-frame descriptions", path)
    masks = {number: ObjectMask(number, segments[number], grid.shape) for number in segments}
    notes = []
    maximum = float(ds.get("MaximumFractionalValue", 255) or 255)
    checked: set = set()  # the frame planes (orientation, spacing) found to be the series' already
    for index, (frame, values) in enumerate(zip(per_frame, pixels)):
        where = f"frame {index + 1}"
        slice_index = _place(frame, grid, ds, path, where, checked)
        if seg_type == "LABELMAP":
            for number in segments:
                if number > 0 and values is not None:
                    masks[number].add(slice_index, values == number)
            continue
        number = frame.segment
        if number not in masks:
            raise DataError(f"{where} names segment {number}, which the Segment Sequence does not hold "
                            f"({', '.join(map(str, segments))})", path)
        if values is None:  # a 1-bit frame that sets no pixel
            continue
        if seg_type == "FRACTIONAL":
            on = values >= maximum / 2.0
        elif values.dtype == np.bool_:
            on = values
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


def _place(frame: FrameDescription, grid: SeriesGrid, ds, path: Path, where: str, checked: set) -> int:
    """The slice a frame lies on (module doc), or a DataError saying why it lies on none."""
    orientation, spacing, position = frame.orientation, frame.spacing, frame.position
    if orientation is None or spacing is None or position is None or len(orientation) != 6 or len(spacing) != 2 \
            or len(position) != 3:
        raise DataError(f"{where} has no Image Orientation, Pixel Spacing or Image Position (Patient): it cannot be "
                        "placed on the image", path)
    plane = (orientation, spacing[0], spacing[1])
    if plane not in checked:
        grid.check_plane(np.array(plane[0]), plane[1:], int(ds.Rows), int(ds.Columns), f"SEG {where}", path)
        checked.add(plane)
    point = np.array(position)
    z = float(point @ grid.normal)
    slice_index = grid.slice_of(z)
    if slice_index is None:
        raise DataError(f"{where} lies at {z:.4g} mm along the slice normal, on no slice of the image "
                        f"{grid.describe()}", path)
    relative = point - grid.positions[slice_index]
    offset = (relative @ grid.column_direction / grid.pixel_spacing[0],
              relative @ grid.row_direction / grid.pixel_spacing[1])
    if max(abs(offset[0]), abs(offset[1])) > _IN_PLANE_TOLERANCE:
        raise DataError(f"{where} is shifted in-plane by {offset[1]:.3g} columns, {offset[0]:.3g} rows from its "
                        f"slice's origin: frames cover the whole slice here", path)
    uid = frame.source_uid
    named = grid.slice_of_uid.get(uid)
    if named is not None and named != slice_index:
        raise DataError(f"{where} names source slice {named + 1} (SOP Instance {uid}) but lies on slice "
                        f"{slice_index + 1} by its position", path)
    return slice_index


__all__ = ["check_series", "read_seg"]
