"""Opening one file or folder the way its dataset pairs it (what the napari reader shows).

One path is one of three things, decided by the layout rules of :mod:`.layouts`
and the layout modules (never by pixel values):

- a **ground truth** by itself: a file in MSD/nnU-Net ``labelsTr``/``labelsTs``,
  a SUN-SEG ``GT/<clip>`` folder (or one of its masks), a 2D ``masks/x.png``
  beside ``images/``, a CAMUS ``..._half_sequence_gt.nii.gz``, a DICOM dataset's
  ``<case>/label.nii.gz``. It is read by :func:`~napari_medsam_eval.io.read_label`:
  integer values, 0/255 masks become label 1 (the mask rules of
  :mod:`napari_medsam_eval.io.image2d`).
- an **image**, with the ground truth its layout pairs with it:
  ``imagesTr/x[_0000].nii.gz`` -> ``labelsTr/x.nii.gz``, ``Frame/<clip>`` ->
  ``GT/<clip>``, ``images/x.jpg`` -> ``masks/x.png`` (or SAM-Med2D's per-object
  masks), ``..._half_sequence`` -> ``..._half_sequence_gt``, ``<case>/image/`` ->
  ``<case>/label.nii.gz``; a MedSAM npz holds its own ``gts``. A ground truth that
  cannot be paired (another shape ...) is left out with a :class:`GroundTruthWarning`,
  so the image still opens.
- a **dataset folder** (one :func:`~napari_medsam_eval.datasets.detect_layout`
  recognises): its first case, with its ground truth and label names.
"""
from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..core.case import Case, Spacing, infer_kind
from ..core.errors import DataError, UnknownFormatError
from ..io import detect_format, pair_image_label, read_case, read_label
from ..io.case_builder import spacing_for_kind
from ..io.formats import missing_message
from ..io.video import is_sequence_name
from . import detect_layout, get_layout
from .camus import camus_label_path, is_camus_label
from .dicom import case_label_of, is_case_label
from .folder2d import find_mask, is_mask_file, masks_folder_of
from .layouts import find_label_file, read_sammed2d, sammed2d_mask_files, sunseg_frame_folder, sunseg_mask_folder
from .msd import is_msd_label, msd_label_folder


class GroundTruthWarning(UserWarning):
    """An image's ground truth was found but could not be read or paired; the image opens alone."""


@dataclasses.dataclass(frozen=True)
class Location:
    """Where a path sits in a dataset: the ``layout`` whose names it follows, the dataset ``root``,
    and its ``role`` (``"image"`` or ``"ground_truth"``)."""

    layout: str
    root: Path
    role: str

    def label_names(self) -> dict[int, str]:
        """The dataset's label names (its ``dataset.json``, else the layout's own: SUN-SEG, CAMUS)."""
        return get_layout(self.layout).label_names(self.root)


@dataclasses.dataclass
class GroundTruthFile:
    """A ground truth opened by itself: its label map, on the grid its file describes."""

    label: np.ndarray
    spacing: Spacing
    kind: str
    path: Path
    #: ITK-order ``spacing_xyz``/``origin``/``direction`` of the file (empty for PNG masks)
    geometry: dict[str, Any] = dataclasses.field(default_factory=dict)
    label_names: dict[int, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Opened:
    """What :func:`open_path` found: ``case`` (an image, with its ground truth when paired) or
    ``ground_truth`` alone; for a dataset folder, ``layout`` and ``n_cases`` say which."""

    case: Case | None = None
    ground_truth: GroundTruthFile | None = None
    layout: str | None = None
    n_cases: int | None = None


def locate(path: str | Path) -> Location | None:
    """The dataset layout whose naming ``path`` follows, and its role there (None: no layout's)."""
    path = Path(path)
    parent, grandparent = path.parent, path.parent.parent
    rules = (
        ("msd", lambda: is_msd_label(path), lambda: msd_label_folder(path) is not None, grandparent),
        ("sunseg", lambda: sunseg_frame_folder(path) is not None,
         lambda: path.is_dir() and sunseg_mask_folder(path) is not None, grandparent),
        ("sunseg", lambda: path.is_file() and sunseg_frame_folder(parent) is not None, lambda: False,
         grandparent.parent),
        ("folder2d", lambda: is_mask_file(path), lambda: masks_folder_of(path) is not None, grandparent),
        ("camus", lambda: is_camus_label(path),
         lambda: is_sequence_name(path) and camus_label_path(path) != path and camus_label_path(path).exists(),
         grandparent),
        ("dicom", lambda: is_case_label(path), lambda: case_label_of(path) is not None, grandparent),
    )
    for layout, is_label, is_image, root in rules:
        if is_label():
            return Location(layout, root, "ground_truth")
        if is_image():
            return Location(layout, root, "image")
    return None


def is_ground_truth(path: str | Path) -> bool:
    """Whether ``path`` is a ground-truth file or folder by its dataset's layout (names only)."""
    location = locate(path)
    return location is not None and location.role == "ground_truth"


def ground_truth_of(image: str | Path) -> Path | list[Path] | None:
    """The ground truth the image's layout pairs with it: a file or folder, SAM-Med2D's list of
    per-object masks, or None (no layout applies, or the label is missing)."""
    image = Path(image)
    location = locate(image)
    if location is None or location.role != "image":
        return None
    if location.layout == "msd":
        return find_label_file(image, msd_label_folder(image))
    if location.layout == "sunseg":
        return sunseg_mask_folder(image)
    if location.layout == "folder2d":
        masks = masks_folder_of(image)
        return find_mask(image, masks) or sammed2d_mask_files(image, masks) or None
    if location.layout == "camus":
        return camus_label_path(image)
    return case_label_of(image)


def read_with_ground_truth(path: str | Path) -> Case:
    """The image at ``path`` with the ground truth its layout pairs with it (see the module doc)."""
    found = ground_truth_of(path)
    if isinstance(found, list):
        return read_sammed2d(path, found)
    case = read_case(path)
    if found is None:
        return case
    try:
        case = pair_image_label(case, read_label(found, reference=case))
    except DataError as error:
        warnings.warn(f"ground truth not opened: {error}", GroundTruthWarning, stacklevel=2)
        return case
    names = locate(path).label_names()  # type: ignore[union-attr]  # found implies a location
    if names:
        case.metadata["label_names"] = {**case.label_names, **names}
    return case


def read_ground_truth(path: str | Path) -> GroundTruthFile:
    """A ground-truth file or folder by itself, with the spacing of its own header."""
    path = Path(path)
    label = read_label(path)
    is_video = (path.is_dir() and detect_format(path) == "frame_folder") or is_sequence_name(path)
    kind = "video" if is_video else infer_kind(label.array.shape)
    geometry = {("spacing_xyz" if key == "spacing" else key): value for key, value in label.geometry.items()}
    location = locate(path)
    names = {**(label.info.get("label_names") or {}), **(location.label_names() if location else {})}
    return GroundTruthFile(label=label.array, spacing=spacing_for_kind(kind, label.geometry.get("spacing")),
                           kind=kind, path=path, geometry=geometry, label_names=names)


def open_path(path: str | Path) -> Opened:
    """Open ``path`` as a ground truth, an image with its ground truth, or a dataset's first case.

    Raises :class:`DataError` naming the path and the problem when none applies.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(missing_message(path, "file or folder"), path)
    if is_ground_truth(path):
        return Opened(ground_truth=read_ground_truth(path))
    if path.is_dir():
        try:
            detect_format(path)
        except UnknownFormatError as error:
            return _first_case(path, error)
    return Opened(case=read_with_ground_truth(path))


def _first_case(folder: Path, not_images: UnknownFormatError) -> Opened:
    """A dataset folder's first case; a folder that is no dataset either says both problems."""
    try:
        layout = detect_layout(folder)
    except DataError as error:
        raise DataError(f"{not_images.problem}, and it is not a dataset folder: {error.problem}", folder) from None
    refs = layout.list_cases(folder)
    if not refs:
        raise DataError(f"{layout.name} dataset folder holds no case", folder)
    return Opened(case=layout.load(refs[0]), layout=layout.name, n_cases=len(refs))
