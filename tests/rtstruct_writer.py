"""Writing an RTSTRUCT of masks on a DICOM series with pydicom, for the RTSTRUCT reader's tests.

Each object's contours on each slice are scikit-image's iso-contours at level 0.5 of its mask (they run
between the pixel centres in and out of it, holes included), mapped to patient coordinates through each
slice's Image Position (Patient), the series' orientation and pixel spacing (DICOM PS3.3 C.7.6.2.1.1).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.sequence import Sequence
from pydicom.uid import ExplicitVRLittleEndian, generate_uid
from skimage import measure

RTSTRUCT_CLASS = "1.2.840.10008.5.1.4.1.1.481.3"


def _item(**values) -> Dataset:
    item = Dataset()
    for key, value in values.items():
        setattr(item, key, value)
    return item


def write_rtstruct(files: list[Path], masks: dict[str, np.ndarray], path: Path) -> Path:
    """An RTSTRUCT at ``path`` of ``masks`` (name -> bool (z, y, x) in the order of ``files``)."""
    headers = [pydicom.dcmread(str(f), stop_before_pixels=True) for f in files]
    first = headers[0]
    orientation = np.array([float(v) for v in first.ImageOrientationPatient])
    row_spacing, column_spacing = (float(v) for v in first.PixelSpacing)
    frame = str(first.get("FrameOfReferenceUID", "") or generate_uid())
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.MediaStorageSOPClassUID = RTSTRUCT_CLASS
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.SOPClassUID, ds.SOPInstanceUID = RTSTRUCT_CLASS, ds.file_meta.MediaStorageSOPInstanceUID
    ds.Modality, ds.SeriesInstanceUID, ds.StructureSetLabel = "RTSTRUCT", generate_uid(), "test"
    ds.StudyInstanceUID = str(first.StudyInstanceUID)
    images = Sequence([_item(ReferencedSOPClassUID=h.SOPClassUID, ReferencedSOPInstanceUID=h.SOPInstanceUID)
                       for h in headers])
    series = _item(SeriesInstanceUID=str(first.SeriesInstanceUID), ContourImageSequence=images)
    study = _item(ReferencedSOPClassUID="1.2.840.10008.3.1.2.3.1", ReferencedSOPInstanceUID=ds.StudyInstanceUID,
                  RTReferencedSeriesSequence=Sequence([series]))
    ds.ReferencedFrameOfReferenceSequence = Sequence([_item(FrameOfReferenceUID=frame,
                                                            RTReferencedStudySequence=Sequence([study]))])
    rois, contours = [], []
    for number, (name, mask) in enumerate(masks.items(), start=1):
        rois.append(_item(ROINumber=number, ReferencedFrameOfReferenceUID=frame, ROIName=name,
                          ROIGenerationAlgorithm="MANUAL"))
        items = []
        for index, header in enumerate(headers):
            padded = np.pad(mask[index].astype(float), 1)  # a contour closes at the image's edge too
            for line in measure.find_contours(padded, 0.5):
                rows, columns = line[:, 0] - 1, line[:, 1] - 1
                origin = np.array([float(v) for v in header.ImagePositionPatient])
                points = (origin + np.outer(columns * column_spacing, orientation[:3])
                          + np.outer(rows * row_spacing, orientation[3:]))
                items.append(_item(ContourGeometricType="CLOSED_PLANAR", NumberOfContourPoints=len(points) - 1,
                                   ContourData=[f"{v:.6f}" for v in points[:-1].ravel()],
                                   ContourImageSequence=Sequence([_item(
                                       ReferencedSOPClassUID=header.SOPClassUID,
                                       ReferencedSOPInstanceUID=header.SOPInstanceUID)])))
        contours.append(_item(ReferencedROINumber=number, ContourSequence=Sequence(items)))
    ds.StructureSetROISequence, ds.ROIContourSequence = Sequence(rois), Sequence(contours)
    ds.RTROIObservationsSequence = Sequence([_item(ObservationNumber=n, ReferencedROINumber=n,
                                                   RTROIInterpretedType="ORGAN", ROIInterpreter="")
                                             for n in range(1, len(rois) + 1)])
    ds.save_as(str(path), enforce_file_format=True)
    return path
