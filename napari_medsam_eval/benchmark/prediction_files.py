"""A case's saved predictions (``run --save-predictions``): which files, named how, holding what.

Each target keeps its own mask: where the case's label map cannot hold every target (a later target
overlapping an earlier one, a region of several labels), the target gets a file of its own, and its
row names that file, so every row's file reproduces the row (``medsam-eval score`` with the run's
``--targets``). Nothing is dropped silently.

The format (``run --prediction-format``, :data:`PREDICTION_FORMATS`): ``nifti`` (the default: ``.nii.gz``,
``.npz`` beside an npz source, ``.png`` for 2D images) or ``dicom-seg`` (a DICOM SEG on the case's own DICOM
series, each target a segment named by the target, the model and protocol recorded in it:
:mod:`napari_medsam_eval.io.dicom_seg_write`; a case not read from a DICOM series is refused by name).
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Iterable

import numpy as np

from ..core.case import Case
from ..core.errors import OptionError
from ..core.targets import Target

PREDICTIONS_DIR = "predictions"
#: the most bytes a prediction's file name keeps of its case id (the rest: ``.label<value>``, the suffix, a hash)
STEM_BYTES = 200


#: the most bytes a prediction's file name keeps of a target's name
NAME_BYTES = 40


def safe_file_stem(case_id: str, most: int = STEM_BYTES) -> str:
    """A case id (or a target's name) usable as a file name (``/`` and odd characters -> ``_``), cut to ``most``
    characters with a short hash of the whole when longer: its files' names (``<stem>.label<value>.nii.gz``,
    ``<stem>.<target>.nii.gz``) always fit in a file name."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", case_id).strip("._") or "case"
    if len(stem) <= most:
        return stem
    digest = hashlib.sha256(case_id.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{stem[:most - 9]}-{digest}"


#: ``run --prediction-format``'s choices (the first the default)
PREDICTION_FORMATS = ("nifti", "dicom-seg")


def check_prediction_format(name: str) -> str:
    """``name`` when it is one of :data:`PREDICTION_FORMATS`, else an OptionError listing them."""
    if name not in PREDICTION_FORMATS:
        raise OptionError(f"prediction_format must be one of {', '.join(PREDICTION_FORMATS)}, got {name!r}")
    return name


def prediction_suffix(case: Case, prediction_format: str = "nifti") -> str:
    """``.dcm`` (a DICOM SEG) for the ``dicom-seg`` format; else ``.npz`` beside an npz source, ``.png`` for 2D
    images, ``.nii.gz`` for the rest."""
    if check_prediction_format(prediction_format) == "dicom-seg":
        return ".dcm"
    if case.kind == "image":
        return ".png"
    source = str(case.metadata.get("image_path", ""))
    return ".npz" if source.lower().endswith(".npz") else ".nii.gz"


def prediction_files(targets: list[Target], predictions: dict[int, np.ndarray], shape: tuple[int, ...], stem: str,
                     suffix: str) -> dict[int | None, tuple[Path, np.ndarray]]:
    """The files of a case's predictions: key None, the case's label map holding each target of one label
    under its value (a later target wins where two overlap); a target that lost voxels there gets a file
    of its own (``<case>.label<value>``), and so does every target of several labels or sharing its label
    with an earlier target (``<case>.<name>``, its mask written as its first label value, so that
    ``score --targets`` with the run's targets reproduces its row). Nothing is dropped silently."""
    in_map = [t for t in targets if t.key == t.value and t.key in predictions]
    top = max([t.labels[0] for t in targets if t.key in predictions] + [0])
    dtype = np.uint16 if top > 255 else np.uint8
    combined = np.zeros(shape, dtype=dtype)
    for target in sorted(in_map, key=lambda t: t.key):
        combined[predictions[target.key]] = target.key
    files: dict[int | None, tuple[Path, np.ndarray]] = {}
    if in_map:
        files[None] = (Path(PREDICTIONS_DIR) / f"{stem}{suffix}", combined)
    for target in targets:
        mask = predictions.get(target.key)
        if mask is None:
            continue
        if target in in_map and np.any(mask & (combined != target.key)):  # overwritten where a later one overlaps
            files[target.key] = (Path(PREDICTIONS_DIR) / f"{stem}.label{target.key}{suffix}",
                                 mask.astype(dtype) * target.key)
        elif target not in in_map:
            files[target.key] = (Path(PREDICTIONS_DIR) / f"{stem}.{safe_file_stem(target.name, NAME_BYTES)}{suffix}",
                                 mask.astype(dtype) * target.labels[0])
    return files


def file_names(targets: list[Target], key: int | None, predicted: Iterable[int] | None = None) -> dict[int, str]:
    """The names of the label values in :func:`prediction_files`' file ``key``: in the case's label map (key
    None) each predicted target of one label (its key in ``predicted``, default all) by its value, in a
    target's own file that target by the value it is written as; a DICOM SEG names its segments so (a target
    predicted empty still a named, empty segment; a target without a prediction none)."""
    if key is None:
        keys = None if predicted is None else set(predicted)
        return {t.key: t.name for t in targets if t.key == t.value and (keys is None or t.key in keys)}
    target = next((t for t in targets if t.key == key), None)
    if target is None:
        return {}
    value = target.key if target.key == target.value or not target.labels else target.labels[0]
    return {value: target.name}


__all__ = ["PREDICTIONS_DIR", "PREDICTION_FORMATS", "check_prediction_format", "file_names", "prediction_files",
           "prediction_suffix", "safe_file_stem"]
