"""Dataset layouts: which cases a dataset folder holds, and the tasks they make.

>>> layout = detect_layout("../shared/data/hippocampus_mri")    # or get_layout("msd")
>>> refs = layout.list_cases("../shared/data/hippocampus_mri")  # cheap: no pixels read
>>> case = layout.load(refs[0])                                 # a Case with label names
>>> layout.targets(refs[0], case)                               # [1, 2]

=============  ===========================================================  =======
name           folder                                                       kind
=============  ===========================================================  =======
``npz``        MedSAM/CVPR ``*.npz`` (``imgs``, ``gts``, ``spacing``)        volume
``msd``        ``imagesTr/`` + ``labelsTr/`` (+ ``dataset.json``)             volume
``camus``      ``patientXXXX/..._{2CH,4CH}_half_sequence[_gt].nii.gz``       video
``sunseg``     ``Frame/<case>/`` + ``GT/<case>/`` (flat or Test*Dataset/...)  video
``folder2d``   ``images/`` + ``masks/``, one mask per image                  image
``sammed2d``   ``images/`` + ``masks/<stem>_<object>_<n>.png``               image
``dicom``      ``<case>/image/`` (DICOM series) + ``<case>/label.nii.gz``     volume
``ctc``        ``img/t<NN>.tif`` + ``gt/man_seg<NN>.tif`` (instance maps)     image
=============  ===========================================================  =======

A task is ``"<dataset folder name>/<label name>"``; see :mod:`.base`.

:mod:`.prompt_mode_samples` gives the 2D prompt-mode study its samples (one 2D image with
its class masks, from 2D folders or volume slices), found with these layouts.
"""
from __future__ import annotations

from pathlib import Path

from ..core.errors import DataError
from ..io.formats import missing_message
from ..core.targets import label_name
from .base import CaseRef, DatasetLayout, task_name
from .camus import CAMUS_LABELS, CAMUSLayout
from .ctc import CellTrackingLayout
from .dicom import DicomSeriesLayout
from .folder2d import ImageMaskFolderLayout
from .links import DatasetWarning
from .msd import MSDLayout
from .npz import MedSAMNpzLayout, npz_label_names, npz_target_token
from .sammed2d import SAMMed2DLayout
from .prompt_mode_samples import (StudyClass, StudySample, find_2d_samples, label_map_classes, study_samples,
                      study_task_name, volume_slice_samples)
from .sunseg import SunSegLayout
from ..core.errors import InputError

#: every layout by name, in the order detection reports them
LAYOUTS: dict[str, DatasetLayout] = {
    layout.name: layout
    for layout in (MedSAMNpzLayout(), MSDLayout(), CAMUSLayout(), SunSegLayout(), ImageMaskFolderLayout(),
                   SAMMed2DLayout(), DicomSeriesLayout(), CellTrackingLayout())
}
#: other names people use for a layout
ALIASES = {"nnunet": "msd", "medsam": "npz", "cvpr": "npz", "sun-seg": "sunseg", "sun_seg": "sunseg",
           "images-masks": "folder2d", "2d": "folder2d", "sam-med2d": "sammed2d", "dicom-series": "dicom",
           "dicom_series": "dicom"}


def available_layouts() -> list[str]:
    return list(LAYOUTS)


def get_layout(name: str) -> DatasetLayout:
    """The layout called ``name`` (or one of its aliases); ValueError listing the names otherwise."""
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    try:
        return LAYOUTS[key]
    except KeyError:
        raise InputError(f"unknown dataset layout {name!r}; known: {', '.join(LAYOUTS)}") from None


def detect_layout(path: str | Path) -> DatasetLayout:
    """The one layout ``path`` is in; a :class:`DataError` when none or several match.

    The message lists the candidates (or every layout with its expected folder
    structure), so the user can pick one with ``layout=``/``--layout``.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(missing_message(path, "dataset folder"), path)
    if not path.is_dir():
        raise DataError("a dataset is a folder; give the folder holding the cases", path)
    matches = [layout for layout in LAYOUTS.values() if layout.detect(path)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(f"{m.name} ({m.summary})" for m in matches)
        raise DataError(f"the folder matches several dataset layouts: {names}; choose one with --layout", path)
    known = "; ".join(f"{m.name}: {m.summary}" for m in LAYOUTS.values())
    raise DataError(f"no known dataset layout; expected one of - {known}", path)


def resolve_layout(path: str | Path, layout: str | DatasetLayout | None = None) -> DatasetLayout:
    """``layout`` by name or instance, else :func:`detect_layout`."""
    if isinstance(layout, DatasetLayout):
        return layout
    return get_layout(layout) if layout else detect_layout(path)


__all__ = [
    "ALIASES",
    "CAMUSLayout",
    "CAMUS_LABELS",
    "CellTrackingLayout",
    "CaseRef",
    "DatasetLayout",
    "DatasetWarning",
    "DicomSeriesLayout",
    "ImageMaskFolderLayout",
    "LAYOUTS",
    "MSDLayout",
    "MedSAMNpzLayout",
    "SAMMed2DLayout",
    "StudyClass",
    "StudySample",
    "SunSegLayout",
    "available_layouts",
    "detect_layout",
    "find_2d_samples",
    "get_layout",
    "label_map_classes",
    "label_name",
    "npz_label_names",
    "npz_target_token",
    "resolve_layout",
    "study_samples",
    "study_task_name",
    "task_name",
    "volume_slice_samples",
]
