"""Reading any supported input into a :class:`Case`: dispatch, labels and pairing.

=====================================  ==========================================
input                                  read as
=====================================  ==========================================
``.nii[.gz]``, ``.nrrd``, ``.mha/.mhd``  2D -> image, 3D -> volume (``*_sequence`` -> video)
folder of DICOM files                  volume (one series; ``series_id`` picks one), with the one
                                       SEG or RTSTRUCT of the series in the folder as its label
MedSAM ``.npz``                        volume or 2D image, with its ``gts`` label
``.png/.jpg/.tif/.bmp``                2D image
folder of PNG/JPEG frames              video
``.mp4/.avi/.mov/.mkv/.webm``          video
=====================================  ==========================================

``kind`` overrides the guess where the data allow it (a 3D NIfTI that is a
video: ``kind="video"``). Labels are read by :func:`read_label` and checked
against the image by :func:`pair_image_label` (shape always, geometry when both
files carry one; tolerances in :mod:`.validation`). A DICOM SEG or RTSTRUCT label
is placed on the image's series (:mod:`.dicom_objects`): its segments or ROIs
become the case's label and ``targets``.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from ..core.case import Case, CaseKind
from ..core.errors import DataError, UnknownFormatError
from .dicom import read_dicom_case, read_dicom_label
from .dicom_objects import folder_ground_truth, ground_truth_kind, object_label_file
from .formats import detect_format
from .image2d import read_image2d, read_mask2d
from .msd_info import msd_dataset_info
from .npz_io import guess_modality, read_medsam_npz, read_npz_label
from .sitk_io import read_sitk_case, read_sitk_label
from .validation import check_geometry, check_same_shape, to_label_array
from .video import is_sequence_name, read_frame_folder, read_mask_folder, read_video_file


@dataclasses.dataclass
class LabelFile:
    """A label map read from a file, before it is paired with its image.

    ``geometry`` holds ITK-order ``spacing``/``origin``/``direction`` when the
    file has a header (NIfTI, npz ...), and is empty for PNG masks. ``info``
    goes into the case's metadata (``label_names``, ``mask_encoding`` ...).
    """

    array: np.ndarray
    path: Path
    geometry: dict[str, Any] = dataclasses.field(default_factory=dict)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)


def read_image(path: str | Path, *, kind: CaseKind | None = None, modality: str | None = None,
               case_id: str | None = None, series_id: str | None = None, folder_label: bool = True) -> Case:
    """Read an image file or folder as a Case (with its label only if the file embeds one: npz, or, with
    ``folder_label``, a DICOM series folder holding the series' one SEG or RTSTRUCT)."""
    fmt = detect_format(path)
    options = dict(kind=kind, modality=modality, case_id=case_id)
    if fmt == "sitk" and ground_truth_kind(path):
        raise DataError(f"is a DICOM {ground_truth_kind(path)} (a ground truth, not an image): open its image series "
                        "folder, with the object in it or given as the label (--label)", path)
    if fmt == "sitk":
        if kind is None and is_sequence_name(path):
            options["kind"] = "video"
        case = read_sitk_case(path, **options)
    elif fmt == "dicom_folder":
        case = read_dicom_case(path, series_id=series_id, **options)
        found = folder_ground_truth(case) if folder_label else None
        if found is not None:
            case = pair_image_label(case, read_label(found, reference=case))
    elif fmt == "npz":
        case = read_medsam_npz(path, **options)
    elif fmt == "image2d":
        case = read_image2d(path, **options)
    elif fmt == "video_file":
        case = read_video_file(path, **options)
    else:
        case = read_frame_folder(path, **options)
    return _enrich(case, Path(path))


def _enrich(case: Case, path: Path) -> Case:
    """Modality and label names from the dataset layout or file name, where not already known."""
    dataset = msd_dataset_info(path)
    if case.modality is None:
        case.modality = dataset.get("modality") or guess_modality(path)
    if "label_names" in dataset and "label_names" not in case.metadata:
        case.metadata["label_names"] = dataset["label_names"]
    return case


def read_label(path: str | Path, reference: Case | None = None) -> LabelFile:
    """Read a label file or mask folder; ``reference`` (the image case) lets masks match frames.

    The values are validated and cast by :func:`.validation.to_label_array`.
    """
    path = Path(path)
    fmt = detect_format(path)
    geometry: dict[str, Any] = {}
    info: dict[str, Any] = {}
    if fmt == "sitk" and ground_truth_kind(path):
        array, geometry, info = object_label_file(path, reference)
    elif fmt == "sitk":
        array, geometry = read_sitk_label(path)
    elif fmt == "dicom_folder":
        array, geometry = read_dicom_label(path)
    elif fmt == "npz":
        array, geometry = read_npz_label(path)
    elif fmt == "image2d":
        array, info = read_mask2d(path)
    elif fmt == "frame_folder":
        frame_names = reference.metadata.get("frame_names") if reference is not None else None
        array, info = read_mask_folder(path, frame_names)
    else:
        raise UnknownFormatError("masks in a (lossy) video file are not supported; "
                                 "use a folder of PNG masks or a NIfTI file", path)
    return LabelFile(to_label_array(array, path), path, geometry, info)


def _image_geometry(case: Case) -> dict[str, Any]:
    """The image's header geometry, only where its file had one (never invented unit spacing)."""
    return {key: case.metadata.get(name) for key, name in
            (("spacing", "spacing_xyz"), ("origin", "origin"), ("direction", "direction"))}


def pair_image_label(case: Case, label: LabelFile | np.ndarray, *, label_path: str | Path | None = None) -> Case:
    """A copy of ``case`` with ``label`` attached, after shape and geometry checks.

    Raises :class:`GeometryMismatchError` on a shape mismatch or a geometry
    difference beyond tolerance; an embedded label (npz ``gts``) is replaced
    and ``metadata['replaced_embedded_label']`` set.
    """
    if not isinstance(label, LabelFile):
        label = LabelFile(to_label_array(label, label_path), Path(label_path) if label_path else Path("<array>"))
    image_path = case.metadata.get("image_path")
    check_same_shape(label.array.shape, case.spatial_shape, label.path, image_path)
    if label.geometry:
        check_geometry(_image_geometry(case), label.geometry, label.path, image_path)
    metadata = {**case.metadata, **{k: v for k, v in label.info.items() if k != "label_names"}}
    if "label_names" not in case.metadata and "label_names" in label.info:
        metadata["label_names"] = label.info["label_names"]
    if case.label is not None:
        metadata["replaced_embedded_label"] = True
    metadata["label_path"] = str(label.path)
    try:
        return dataclasses.replace(case, label=label.array, metadata=metadata)
    except (ValueError, TypeError) as error:
        raise DataError(str(error), label.path) from None


def read_case(image_path: str | Path, label_path: str | Path | None = None, *, kind: CaseKind | None = None,
              modality: str | None = None, case_id: str | None = None, series_id: str | None = None) -> Case:
    """Read an image (file or folder) and, if given, its label into one validated Case.

    ``kind`` overrides the guessed kind where the data allow it; ``series_id``
    picks one series in a DICOM folder holding several. A MedSAM npz brings its
    own ``gts`` label; ``label_path`` replaces it.
    """
    case = read_image(image_path, kind=kind, modality=modality, case_id=case_id, series_id=series_id,
                      folder_label=label_path is None)
    if label_path is None:
        return case
    return pair_image_label(case, read_label(label_path, reference=case))
