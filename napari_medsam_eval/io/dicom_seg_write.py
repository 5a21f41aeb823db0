"""Predictions written as DICOM Segmentation objects (SEG), with highdicom, on their DICOM series.

A SEG is what 3D Slicer, OHIF, MONAI Label and a PACS exchange: it references its image series (Study,
Series and SOP Instance UIDs, the Frame of Reference) and places each frame by the source slice's
Image Position (Patient), so it is written only where the case was read from a DICOM series (its
``Case.metadata``: ``dicom_series_folder``, else the folder it was read from, and ``dicom_series_id``);
any other source is refused (:data:`NEEDS_SOURCE`).

What is written (BINARY segmentation, uncompressed, as dcmqi and Slicer write it):

- one segment per object or target, numbered 1, 2, ... (the standard's and highdicom's rule), named
  by its Segment Label; segments may overlap (a lesion inside its liver: each keeps its whole mask);
- one frame per source slice for every segment, empty frames included: a reader that builds its
  volume from the frames' positions (dcmqi's ``segimage2itkimage``, so 3D Slicer) then gets the
  source series' own grid (origin, spacing, direction), not a box around the mask;
- the algorithm: type AUTOMATIC, the model as algorithm name, this package's version as its version,
  the protocol and the label value as algorithm parameters, and ``"<model>, protocol <protocol>"`` as
  the Segment Description.

This module builds the SEG (:func:`seg_dataset`) and says whether a file holds the segments
(:func:`seg_holds`); :func:`.writers.write_mask` and :func:`.writers.write_dicom_seg` write it as they
write every mask: to a temporary name beside the target, read back with highdicom (every segment equal
to its mask on every source slice, its label as given), and only then in place of the target.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..core.case import Case
from ..core.errors import DataError, InputError
from ..core.palette import OKABE_ITO

#: the refusal for a case that was not read from a DICOM series
NEEDS_SOURCE = "a DICOM SEG needs a DICOM series source; write .nii.gz instead"
#: the suffix a DICOM SEG is written with
SEG_SUFFIX = ".dcm"
#: Segment Description and Segment Label are LO: at most 64 characters
_LO = 64
#: DICOM tags named in messages
_TAGS = {"FrameOfReferenceUID": "(0020,0052)", "ImagePositionPatient": "(0020,0032)",
         "ImageOrientationPatient": "(0020,0037)", "PixelSpacing": "(0028,0030)"}


@dataclass(frozen=True)
class SegSegment:
    """One segment to write: its Segment Label, its whole mask (bool, the series' ``(z, y, x)``) and the
    label value it stands for (recorded as an algorithm parameter; 0 when none)."""

    name: str
    mask: np.ndarray
    value: int = 0


@dataclass(frozen=True)
class SegAlgorithm:
    """Who made the segments: the model (algorithm name) and the protocol that prompted it."""

    model: str = "medsam-eval"
    protocol: str | None = None

    def description(self) -> str:
        words = self.model if not self.protocol else f"{self.model}, protocol {self.protocol}"
        return words[:_LO]


def dicom_source(reference: Case, path: str | Path | None = None) -> tuple[Path, str]:
    """The folder and SeriesInstanceUID of the DICOM series ``reference`` was read from, else a DataError
    naming ``path`` and what a SEG needs (:data:`NEEDS_SOURCE`)."""
    metadata = reference.metadata
    series_id = metadata.get("dicom_series_id")
    folder = metadata.get("dicom_series_folder")
    if folder is None and series_id is not None and metadata.get("image_path"):
        folder = metadata["image_path"] if Path(metadata["image_path"]).is_dir() else None
    if folder is None or series_id is None or reference.kind != "volume":
        source = metadata.get("image_path") or reference.case_id
        raise DataError(f"{NEEDS_SOURCE} (the case {source} is a {reference.kind} not read from a DICOM series)",
                        path)
    return Path(folder), str(series_id)


def source_headers(reference: Case, path: str | Path | None = None) -> list[Any]:
    """The source series' headers (pydicom, no pixel data) in the order the case's slices have, checked to
    describe the case's grid (slice count, rows, columns) and to carry what a SEG references."""
    import pydicom

    from .dicom import dicom_series_files

    folder, series_id = dicom_source(reference, path)
    files, _ = dicom_series_files(folder, series_id)
    headers = [pydicom.dcmread(f, stop_before_pixels=True) for f in files]
    frames = sum(int(h.get("NumberOfFrames", 1) or 1) for h in headers)
    z, rows, columns = reference.spatial_shape
    first = headers[0]
    if frames != z or (first.get("Rows"), first.get("Columns")) != (rows, columns):
        raise DataError(f"the DICOM series {series_id} has {frames} slices of {first.get('Rows')} x "
                        f"{first.get('Columns')}, the mask {z} of {rows} x {columns}: not this series' grid", folder)
    if len(headers) > 1:
        for name, tag in _TAGS.items():
            lacking = [Path(f).name for f, h in zip(files, headers) if not h.get(name)]
            if lacking:
                raise DataError(f"DICOM slice {lacking[0]} has no {name} {tag}: a SEG cannot be placed on its "
                                "series", folder)
        _fill_slice_thickness(headers)
    for header in headers:  # an empty Specific Character Set (0008,0005) means the default one (ASCII)
        if "SpecificCharacterSet" in header and not header.SpecificCharacterSet:
            del header.SpecificCharacterSet
    return headers


def _fill_slice_thickness(headers: list[Any]) -> None:
    """Slice Thickness (0018,0050) where a slice leaves it empty (it may: type 2), as the step between slice
    positions along the normal; only in these in-memory headers (highdicom needs it for the pixel measures)."""
    if all(h.get("SliceThickness") for h in headers):
        return
    cosines = np.array([float(v) for v in headers[0].ImageOrientationPatient])
    normal = np.cross(cosines[:3], cosines[3:6])
    positions = np.array([[float(v) for v in h.ImagePositionPatient] for h in headers]) @ normal
    step = float(np.median(np.abs(np.diff(positions))))
    for header in headers:
        if not header.get("SliceThickness"):
            header.SliceThickness = round(step, 6)


def segments_of_labels(labels: np.ndarray, names: dict[int, str] | None = None,
                       known: dict[int, str] | None = None) -> list[SegSegment]:
    """One segment per label value of ``labels`` (ascending) and per value ``names`` lists (empty if absent from
    the map: a target predicted empty is still written, named), each named by ``names``, else by ``known``
    (the case's label names), else ``label <value>``."""
    names, known = dict(names or {}), dict(known or {})
    values = sorted({int(v) for v in np.unique(labels) if v != 0} | {int(v) for v in names})
    return [SegSegment(names.get(v) or known.get(v) or f"label {v}", labels == v, v) for v in values]


def check_segments(segments: Sequence[SegSegment], shape: tuple[int, ...], path: str | Path) -> None:
    """Refuse what a SEG cannot hold: no segment, a mask of another shape, an empty or too long name."""
    if not segments:
        raise InputError(f"{path}: nothing to write: a DICOM SEG needs at least one segment (the mask is empty "
                         "and no target is named)")
    for segment in segments:
        if np.shape(segment.mask) != tuple(shape):
            raise InputError(f"{path}: segment {segment.name!r} has shape {np.shape(segment.mask)}, "
                             f"the series {tuple(shape)}")
        if not segment.name.strip() or len(segment.name) > _LO or "\\" in segment.name:
            raise InputError(f"{path}: segment name {segment.name!r}: a Segment Label is 1 to {_LO} characters, "
                             "without a backslash")


def seg_dataset(segments: Sequence[SegSegment], headers: list[Any], algorithm: SegAlgorithm,
                every_slice: bool = True) -> Any:
    """The highdicom Segmentation of ``segments`` on the series of ``headers``; ``every_slice=False`` leaves out
    the empty frames (as 3D Slicer writes: smaller, but dcmqi then reads a volume spanning only the frames)."""
    import highdicom as hd
    from pydicom.sr.codedict import codes

    from .. import __version__

    descriptions = []
    for number, segment in enumerate(segments, start=1):
        colour = OKABE_ITO[1 + (number - 1) % (len(OKABE_ITO) - 1)]  # no black
        rgb = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
        parameters = {"protocol": algorithm.protocol or "none", "label value": str(segment.value)}
        description = hd.seg.SegmentDescription(
            segment_number=number, segment_label=segment.name,
            segmented_property_category=codes.SCT.Tissue, segmented_property_type=codes.SCT.Tissue,
            algorithm_type=hd.seg.SegmentAlgorithmTypeValues.AUTOMATIC,
            algorithm_identification=hd.AlgorithmIdentificationSequence(
                name=algorithm.model[:_LO], family=codes.cid7162.ArtificialIntelligence, version=__version__[:_LO],
                parameters=parameters),
            display_color=hd.color.CIELabColor.from_rgb(*rgb))
        description.SegmentDescription = algorithm.description()  # (0062,0006)
        descriptions.append(description)
    pixels = _pixel_array(segments)
    with warnings.catch_warnings():  # highdicom's doubts about the source's own patient name: not ours to fix
        warnings.filterwarnings("ignore", message=".*person name.*", category=UserWarning)
        return _segmentation(hd, headers, pixels, descriptions, algorithm, every_slice)


def _segmentation(hd: Any, headers: list[Any], pixels: np.ndarray, descriptions: list[Any],
                  algorithm: SegAlgorithm, every_slice: bool) -> Any:
    from .. import __version__

    return hd.seg.Segmentation(
        source_images=headers, pixel_array=pixels, segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
        segment_descriptions=descriptions, series_instance_uid=hd.UID(), series_number=900,
        sop_instance_uid=hd.UID(), instance_number=1, manufacturer="napari-medsam-eval",
        manufacturer_model_name=algorithm.model[:_LO], software_versions=__version__,
        device_serial_number="none", content_label="PREDICTION", content_description=algorithm.description(),
        series_description=f"medsam-eval prediction: {algorithm.description()}"[:_LO],
        omit_empty_frames=not every_slice)


def _pixel_array(segments: Sequence[SegSegment]) -> np.ndarray:
    """A label map of segment numbers where no two segments overlap (one byte a voxel), else the
    ``(z, y, x, segment)`` stack of masks."""
    count = np.zeros(segments[0].mask.shape, dtype=np.uint8)
    for segment in segments:
        count += np.asarray(segment.mask, dtype=bool)
        if count.max(initial=0) > 1:
            return np.stack([np.asarray(s.mask, dtype=bool) for s in segments], axis=-1)
    labels = np.zeros(count.shape, dtype=np.uint8 if len(segments) < 256 else np.uint16)
    for number, segment in enumerate(segments, start=1):
        labels[np.asarray(segment.mask, dtype=bool)] = number
    return labels


def seg_holds(file: str | Path, segments: Sequence[SegSegment], headers: list[Any]) -> bool:
    """Whether the SEG ``file``, read by highdicom, holds ``segments``: their labels in order, and each
    segment's frames on the source slices equal to its mask (a slice without a frame counted empty)."""
    import highdicom as hd

    seg = hd.seg.segread(str(file))
    labels = [str(item.SegmentLabel) for item in seg.SegmentSequence]
    if labels != [s.name for s in segments]:
        return False
    uids = [str(h.SOPInstanceUID) for h in headers]
    if len(headers) == 1 and int(headers[0].get("NumberOfFrames", 1) or 1) > 1:
        return all(np.array_equal(seg.get_pixels_by_source_frame(
            uids[0], list(range(1, len(segment.mask) + 1)), segment_numbers=[n],
            assert_missing_frames_are_empty=True)[..., 0] > 0, segment.mask) for n, segment in enumerate(segments, 1))
    return all(np.array_equal(seg.get_pixels_by_source_instance(
        uids, segment_numbers=[n], assert_missing_frames_are_empty=True)[..., 0] > 0, segment.mask)
        for n, segment in enumerate(segments, start=1))


__all__ = ["NEEDS_SOURCE", "SEG_SUFFIX", "SegAlgorithm", "SegSegment", "check_segments", "dicom_source",
           "segments_of_labels", "seg_dataset", "seg_holds", "source_headers"]
