"""Dataset folder conventions: where a case's label lives, and what a dataset says about it.

- MSD / nnU-Net: ``imagesTr/<case>[_0000].nii.gz`` <-> ``labelsTr/<case>.nii.gz``,
  with ``dataset.json`` (``modality``, ``labels``) beside them.
- 2D image/mask folders (Kvasir-SEG, HAM10000): ``images/<stem>.jpg`` <-> ``masks/<stem>.png``.
- SUN-SEG videos: ``Frame/<case>/`` <-> ``GT/<case>/``.
- SAM-Med2D: ``images/<stem>.png`` with one mask per object ``masks/<stem>_<object>_<nnn>.png``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..core.case import Case
from ..io.formats import (IMAGE2D_SUFFIXES, NPZ_SUFFIXES, SITK_SUFFIXES, format_suffix, image_files_in,
                          is_broken_link, listed_file, natural_sort_key, strip_suffix)
from ..io.image2d import read_image_with_masks
from ..io.msd_info import msd_dataset_info  # noqa: F401 - the layouts read it here too

_LABEL_SUFFIXES = SITK_SUFFIXES + NPZ_SUFFIXES + IMAGE2D_SUFFIXES
_NNUNET_CHANNEL = "_0000"
_SUNSEG_MASK_DIRS = ("GT", "gt", "Mask", "masks", "Masks")


def label_stem(image_path: str | Path) -> str:
    """The stem a label file shares with an image (nnU-Net's ``_0000`` channel suffix removed)."""
    stem = strip_suffix(image_path)
    return stem[: -len(_NNUNET_CHANNEL)] if stem.endswith(_NNUNET_CHANNEL) else stem


def find_label_file(image_path: str | Path, label_dir: str | Path) -> Path | None:
    """The file in ``label_dir`` with the image's stem (any label format), or None.

    A broken symbolic link with that stem is returned too: reading it then says so.
    """
    label_dir = Path(label_dir)
    if not label_dir.is_dir():
        return None
    wanted = label_stem(image_path)
    matches = [p for p in label_dir.iterdir()
               if listed_file(p) and format_suffix(p) in _LABEL_SUFFIXES and strip_suffix(p) == wanted]
    return sorted(matches)[0] if matches else None


def pair_folder(image_dir: str | Path, label_dir: str | Path, suffixes: Sequence[str] = _LABEL_SUFFIXES
                ) -> list[tuple[Path, Path | None]]:
    """Every image in ``image_dir`` (naturally sorted) with its label in ``label_dir`` (or None)."""
    images = sorted((p for p in Path(image_dir).iterdir() if listed_file(p) and format_suffix(p) in suffixes),
                    key=natural_sort_key)
    return [(image, find_label_file(image, label_dir)) for image in images]


def sunseg_mask_folder(frame_folder: str | Path) -> Path | None:
    """``.../Frame/<case>`` -> ``.../GT/<case>`` when that folder exists, else None."""
    frame_folder = Path(frame_folder)
    if frame_folder.parent.name.lower() != "frame":
        return None
    for name in _SUNSEG_MASK_DIRS:
        candidate = frame_folder.parent.parent / name / frame_folder.name
        if candidate.is_dir() or is_broken_link(candidate):
            return candidate
    return None


def sunseg_frame_folder(mask_folder: str | Path) -> Path | None:
    """``.../GT/<case>`` -> ``.../Frame/<case>`` when that folder exists, else None (the inverse of
    :func:`sunseg_mask_folder`: a folder it returns is a SUN-SEG ground-truth clip)."""
    mask_folder = Path(mask_folder)
    if mask_folder.parent.name not in _SUNSEG_MASK_DIRS:
        return None
    frames = [d for d in mask_folder.parent.parent.iterdir() if d.name.lower() == "frame"] \
        if mask_folder.parent.parent.is_dir() else []
    for frame in frames:
        if (frame / mask_folder.name).is_dir() and sunseg_mask_folder(frame / mask_folder.name) == mask_folder:
            return frame / mask_folder.name
    return None


def sammed2d_mask_files(image_path: str | Path, mask_dir: str | Path | None = None) -> list[Path]:
    """Per-object masks of a SAM-Med2D image: ``<mask_dir>/<image stem>_*.png``, naturally sorted.

    ``mask_dir`` defaults to the ``masks`` folder beside the image's folder. A
    mask is left out when a longer image stem in the images folder also
    matches it (``s01_1_...`` must not take ``s01_12``'s masks).
    """
    image_path = Path(image_path)
    mask_dir = Path(mask_dir) if mask_dir is not None else image_path.parent.parent / "masks"
    if not mask_dir.is_dir():
        return []
    stem = strip_suffix(image_path)
    longer = [strip_suffix(p) for p in image_files_in(image_path.parent)
              if strip_suffix(p).startswith(stem + "_")]
    masks = [p for p in image_files_in(mask_dir) if strip_suffix(p).startswith(stem + "_")
             and not any(strip_suffix(p).startswith(other + "_") for other in longer)]
    return masks


def read_sammed2d(image_path: str | Path, mask_paths: Sequence[str | Path] | None = None,
                  *, case_id: str | None = None, modality: str | None = None) -> Case:
    """A SAM-Med2D image with its per-object masks merged into one label map.

    Label ``i + 1`` is the ``i``-th mask (natural order of the file names), and
    ``label_names`` are the object names from the file names (``liver``,
    ``hip_left_000`` ...): see :func:`~.image2d.read_image_with_masks`.
    """
    masks = list(mask_paths) if mask_paths is not None else sammed2d_mask_files(image_path)
    return read_image_with_masks(image_path, masks, case_id=case_id, modality=modality)
