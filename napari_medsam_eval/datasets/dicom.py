"""DICOM series datasets: one folder per case, the series in ``image/``, the label beside it.

::

    <root>/<case>/image/*.dcm          one DICOM series (files may lack the .dcm suffix)
    <root>/<case>/label.nii.gz         its ground truth (.nii, .nrrd, .mha, .mhd too),
                                       or <root>/<case>/label/ holding a DICOM label series,
                                       or <root>/<case>/<any name>.dcm: a DICOM SEG or RTSTRUCT of the series
    [<root>/dataset.json]              optional, MSD style: label names ("labels": {"1": "liver"})

A clinical study exported from a PACS or a planning system fits as it is: each case folder holds the
image series in ``image/`` and its SEG (``seg.dcm``) or RTSTRUCT (``RS.<uid>.dcm``) beside it. Each segment
(by its Segment Label) or ROI (by its ROI Name) is then a target of the case, nested and overlapping ones
each with its own mask (:mod:`napari_medsam_eval.io.dicom_objects`); ``--targets`` is not needed.

Every visible sub-folder of the root is a case (id = its name), so a case
folder lacking its series or its label is listed and fails on loading with the
reason instead of disappearing from the count. The series is read by
:func:`napari_medsam_eval.io.dicom.read_dicom_series` (slices sorted along the
normal, gaps refused) and the label is checked against its geometry.

Detection is by names only and needs every one of the first few case folders
to have an ``image/`` folder and a ``label`` file or folder, and the first
``image/`` folder to hold a DICOM file, so a folder of DICOM series without
labels or any other layout is never taken for this one.
"""
from __future__ import annotations

from pathlib import Path

from ..core.case import Case
from ..core.errors import DataError
from ..core.targets import Target
from ..io import read_case
from ..io.dicom_objects import ground_truth_kind
from ..io.formats import SITK_SUFFIXES, format_suffix, is_dicom_file, listed_file, missing_message, strip_suffix
from .base import CaseRef, DatasetLayout, unique_case_ids, visible_dirs, visible_files

IMAGE_FOLDER = "image"
LABEL_NAME = "label"
#: case folders looked at by :meth:`DicomSeriesLayout.detect`
_SAMPLE = 3
#: files of the first ``image/`` folder sniffed for the DICOM marker
_SNIFF = 5


def label_candidates(case_folder: Path) -> list[Path]:
    """``label.<suffix>`` files (any single-file volume format), ``.dcm`` files (a SEG or RTSTRUCT: checked when
    read) and a ``label/`` folder of ``case_folder``."""
    files = [p for p in visible_files(case_folder) if listed_file(p) and (
        (strip_suffix(p) == LABEL_NAME and format_suffix(p) in SITK_SUFFIXES) or format_suffix(p) == ".dcm")]
    folder = case_folder / LABEL_NAME
    return files + ([folder] if folder.is_dir() else [])


def case_label_of(image_folder: str | Path) -> Path | None:
    """``<case>/image/`` -> its one ``<case>/label.*`` (None when absent or ambiguous)."""
    image_folder = Path(image_folder)
    if image_folder.name != IMAGE_FOLDER or not image_folder.is_dir():
        return None
    found = label_candidates(image_folder.parent)
    return found[0] if len(found) == 1 else None


def is_case_label(path: str | Path) -> bool:
    """``<case>/label.nii.gz`` (or a ``label/`` DICOM folder) beside ``<case>/image/``: a ground truth."""
    path = Path(path)
    return (path.parent / IMAGE_FOLDER).is_dir() and path in label_candidates(path.parent)


def _has_dicom(folder: Path) -> bool:
    return any(is_dicom_file(p) for p in visible_files(folder)[:_SNIFF])


class DicomSeriesLayout(DatasetLayout):
    """A folder of cases, each a DICOM series folder ``image/`` with ``label.nii.gz`` beside it."""

    name = "dicom"
    kind = "volume"
    summary = ("<case>/image/ (a DICOM series) + <case>/label.nii.gz (or label/ DICOM, or a SEG or RTSTRUCT .dcm), "
               "one folder per case")

    def detect(self, path: str | Path) -> bool:
        cases = visible_dirs(Path(path))[:_SAMPLE]
        if not cases or not all((c / IMAGE_FOLDER).is_dir() and label_candidates(c) for c in cases):
            return False
        return _has_dicom(cases[0] / IMAGE_FOLDER)

    def list_cases(self, path: str | Path) -> list[CaseRef]:
        root = Path(path)
        refs = []
        for folder in visible_dirs(root, broken_links=True):
            labels = label_candidates(folder) if folder.is_dir() else []
            paths = {"image": folder / IMAGE_FOLDER}
            if len(labels) == 1:
                paths["label"] = labels[0]
            refs.append(self.ref(root, folder.name, paths))
        return unique_case_ids(refs, root)

    def _read(self, ref: CaseRef) -> Case:
        image = Path(ref.paths["image"])
        folder = image.parent
        if not folder.exists():
            raise DataError(f"case {ref.case_id}: {missing_message(folder, 'case folder')}", folder)
        if not image.is_dir():
            raise DataError(f"case {ref.case_id} has no {IMAGE_FOLDER}/ folder holding its DICOM series", folder)
        if "label" not in ref.paths:
            found = label_candidates(folder)
            problem = (f"several label files ({', '.join(p.name for p in found)}); keep one" if found else
                       f"no label file ({LABEL_NAME}.nii.gz, .nrrd, .mha, a {LABEL_NAME}/ DICOM folder or a "
                       "SEG or RTSTRUCT .dcm)")
            raise DataError(f"case {ref.case_id}: {problem}", folder)
        label = Path(ref.paths["label"])
        if format_suffix(label) == ".dcm" and strip_suffix(label) != LABEL_NAME and not ground_truth_kind(label):
            raise DataError(f"case {ref.case_id}: {label.name} is not a DICOM SEG or RTSTRUCT (a case folder holds "
                            f"its series in {IMAGE_FOLDER}/ and one ground truth beside it)", label)
        return read_case(image, label, kind="volume", case_id=ref.case_id)

    def targets(self, ref: CaseRef, case: Case, requested: list[Target] | None = None) -> list[Target]:
        """A SEG's segments or an RTSTRUCT's ROIs (each its own mask) unless ``--targets`` names others; the
        base rules for a label map."""
        objects = case.metadata.get("targets")
        if objects and not requested:
            return list(objects)
        return super().targets(ref, case, requested)
