"""Whether a path an output would take lies in a dataset: what no writer of ours may touch.

:func:`dataset_holding` says where, in words, for the refusal of
:func:`napari_medsam_eval.core.ownership.check_may_write` (refused even with
``--overwrite``). A path is in a dataset when

* it or one of the folders above it (links resolved) is a dataset root: a folder
  holding a ``dataset.json``, or one a layout of ours detects (MSD / nnU-Net
  ``imagesTr/`` + ``labelsTr/``, ``images/`` + ``masks/``, SUN-SEG ``Frame/`` +
  ``GT/``, CAMUS patients, DICOM series cases);
* it is an existing file a layout names a ground truth or an image by itself
  (``labelsTr/x.nii.gz``, ``masks/x.png`` beside ``images/``, a CAMUS ``_gt``
  sequence: :func:`~.ground_truth_pairing.locate`), or a MedSAM npz case (a
  ``.npz`` holding ``imgs``: an image with its ground truth, never a mask of ours).

The npz layout is the exception among the roots: it detects any folder with
``.npz`` files in it or one level down, our own ``segment --out x.npz`` outputs
included, so a folder of npz files is judged file by file (the last rule).
A SUN-SEG root is checked at its own level only: walking up from the output
reaches the folder whose ``Frame/`` it is.
"""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

from . import LAYOUTS
from .sunseg import frame_folders

#: the file that makes a folder a dataset, whatever its layout (MSD, nnU-Net, our own)
DATASET_JSON = "dataset.json"
#: layouts not asked about the folders above an output (the module notes)
NOT_ROOT_DETECTORS = ("npz",)


def _root_layout(folder: Path) -> str | None:
    """Why ``folder`` is a dataset root (``"it holds dataset.json"``, ``"the msd layout: ..."``), or None."""
    try:
        if (folder / DATASET_JSON).is_file():
            return f"it holds {DATASET_JSON}"
        if not folder.is_dir():
            return None
        for layout in LAYOUTS.values():
            if layout.name in NOT_ROOT_DETECTORS:
                continue
            found = bool(frame_folders(folder, depth=0)) if layout.name == "sunseg" else layout.detect(folder)
            if found:
                return f"the {layout.name} layout: {layout.summary}"
    except OSError:  # a folder we may not list is no dataset we can name
        return None
    return None


def _is_npz_case(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name in ("imgs.npy", "imgs") for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def dataset_holding(path: str | os.PathLike[str]) -> str | None:
    """Where ``path`` lies in a dataset, as the words after ``--out`` in a refusal; None when it does not."""
    from .ground_truth_pairing import locate

    given = Path(os.path.expanduser(os.fspath(path)))
    real = Path(os.path.realpath(given.parent)) / given.name  # the file itself may be a link: it is replaced
    for folder in (real, *real.parents):
        why = _root_layout(folder)
        if why is not None:
            return f"lies inside the dataset folder {folder} ({why})"
    if real.is_file() and not real.is_symlink():
        location = locate(real)
        if location is not None:
            role = "ground truth" if location.role == "ground_truth" else "image"
            return f"is a{'n' if role == 'image' else ''} {role} of the {location.layout} dataset {location.root}"
        if real.name.lower().endswith(".npz") and _is_npz_case(real):
            return "is a MedSAM npz case (it holds imgs: an image, not a mask)"
    return None


__all__ = ["DATASET_JSON", "dataset_holding"]
