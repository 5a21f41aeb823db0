"""Where each frame of a multi-frame DICOM object (a SEG) lies and what it shows: its per-frame functional groups.

:func:`frame_descriptions` gives, per frame, its Image Position (Patient), Image Orientation (Patient) and Pixel
Spacing and its Referenced Segment Number (each its own or the shared functional group's: a SEG of one segment
may name it once for all frames, as highdicom writes it) and the SOP Instance UID of
its source image (Derivation Image Sequence > Source Image Sequence, first items).

Read from the file's raw bytes (:mod:`.dicom_raw`: pydicom built six datasets a frame, 0.17 s for the 600 frames of
a 3-segment SEG of 200 slices); a file the walk does not read goes through pydicom's datasets.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .dicom_raw import Unparsed, numbers, read_raw, text, unsigned_short

_PER_FRAME, _SHARED = 0x52009230, 0x52009229
#: what is read of a frame's functional groups: (sequence tag, ..., attribute tag) -> name
_WANTED = {(0x00209113, 0x00200032): "position", (0x00209116, 0x00200037): "orientation",
           (0x00289110, 0x00280030): "spacing", (0x0062000A, 0x0062000B): "segment",
           (0x00089124, 0x00082112, 0x00081155): "source_uid"}


@dataclass
class FrameDescription:
    """One frame's placement and segment (None where the file has none)."""

    position: tuple[float, ...] | None
    orientation: tuple[float, ...] | None
    spacing: tuple[float, ...] | None
    segment: int | None
    source_uid: str


def frame_descriptions(ds: Any, path: str | Path) -> list[FrameDescription]:
    """Each frame's description (module doc) of the object ``ds`` read from ``path``: from the file's raw bytes
    where they allow, else from pydicom's datasets."""
    try:
        return _from_raw(Path(path))
    except Unparsed:
        return _from_datasets(ds)


def _from_raw(path: Path) -> list[FrameDescription]:
    found = read_raw(path, {(_PER_FRAME,): ("frames", _WANTED), (_SHARED,): ("shared", _WANTED)})
    shared = found.get("shared", [{}])[0]
    out = []
    for own in found.get("frames", []):
        placed = {name: numbers(own.get(name, shared.get(name))) for name in ("position", "orientation", "spacing")}
        out.append(FrameDescription(**placed, segment=unsigned_short(own.get("segment", shared.get("segment"))),
                                    source_uid=text(own.get("source_uid"))))
    return out


def _from_datasets(ds: Any) -> list[FrameDescription]:
    shared = _first(ds, "SharedFunctionalGroupsSequence")
    out = []
    for frame in ds.get("PerFrameFunctionalGroupsSequence", []):
        def value(sequence: str, attribute: str, groups=(frame, shared)) -> Any:
            for group in groups:
                item = _first(group, sequence)
                if item is not None and attribute in item:
                    return item.get(attribute)
            return None

        segment = value("SegmentIdentificationSequence", "ReferencedSegmentNumber")
        source = _first(_first(frame, "DerivationImageSequence"), "SourceImageSequence")
        out.append(FrameDescription(
            *(_as_floats(value(s, a)) for s, a in (("PlanePositionSequence", "ImagePositionPatient"),
                                                   ("PlaneOrientationSequence", "ImageOrientationPatient"),
                                                   ("PixelMeasuresSequence", "PixelSpacing"))),
            segment=int(segment) if segment is not None else None,
            source_uid=str(source.get("ReferencedSOPInstanceUID", "")) if source is not None else ""))
    return out


def _first(dataset: Any, sequence: str) -> Any:
    value = dataset.get(sequence) if dataset is not None else None
    return value[0] if value else None


def _as_floats(value: Any) -> tuple[float, ...] | None:
    if value is None:
        return None
    try:
        return tuple(float(v) for v in value)
    except (TypeError, ValueError):
        return None


__all__ = ["FrameDescription", "frame_descriptions"]
