"""Inputs of the 2D prompt-mode study: samples (one image + its class masks), read lazily.

Three sources, all giving :class:`StudySample` lists (file-name order):

* a 2D folder ``images/*.jpg|png`` + ``masks/``; per image stem ``X``:
  ``masks/X.png`` is one label map, read with Mazurowski et al.'s rule
  (:func:`~napari_medsam_eval.protocols.mazurowski_label_map`: a {0,255} mask
  becomes one class, ``"foreground"``; otherwise each nonzero value is a
  class); or the SAM-Med2D layout ``masks/X_<object>_NNN.png``, one binary
  file per instance, one class per object name (instances united; pass
  ``instances="separate"`` to keep each file as its own class ``<object>_NNN``).
  An image with no mask file is skipped (listed in ``StudyResults.skipped``).
* volumes (MSD ``imagesTr``/``labelsTr``, or explicit (image, label) pairs):
  :func:`volume_slice_samples` turns each case into 2D samples, the middle
  axis-0 slice (``depth // 2`` of the SimpleITK ``(z, y, x)`` array, as the
  reference prompts did for hippocampus) or every labelled slice. Every label
  of the case is a class on each slice (absent on that slice: empty mask, NaN).
* samples made in memory with :meth:`StudySample.from_arrays`.

Images are prepared with their intensity rule (:func:`prepare_image`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
from PIL import Image

from ..errors import DataError
from ..protocols import mazurowski_label_map

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
VOLUME_SUFFIXES = (".nii.gz", ".nii", ".nrrd", ".mha", ".mhd")
#: class name of a binary ({0,255} or {0,1}) mask
FOREGROUND = "foreground"
INSTANCE_RULES = ("union", "separate")
VOLUME_SLICE_RULES = ("middle", "all")
_INSTANCE = re.compile(r"^(?P<object>.+)_(?P<index>\d+)$")


@dataclass
class StudyClass:
    """One class of one image: its name, the integer label a Prompt carries, its binary mask."""

    name: str
    label: int
    mask: np.ndarray


@dataclass
class StudySample:
    """One 2D image of a dataset; :meth:`load` reads ``(image, [StudyClass, ...])``."""

    dataset: str
    image_id: str
    loader: Callable[[], tuple[np.ndarray, list[StudyClass]]] = field(repr=False)
    source: str = ""

    def load(self) -> tuple[np.ndarray, list[StudyClass]]:
        image, classes = self.loader()
        image = np.asarray(image)
        for cls in classes:
            if cls.mask.shape != image.shape[:2]:
                raise DataError(f"mask of class {cls.name!r} has shape {cls.mask.shape}, image {image.shape[:2]}",
                                self.source or None)
        return image, classes

    @classmethod
    def from_arrays(cls, dataset: str, image_id: str, image: np.ndarray,
                    masks: Mapping[str, np.ndarray] | np.ndarray, class_names: Mapping[int, str] | None = None
                    ) -> "StudySample":
        """A sample from arrays: ``masks`` is ``{class name: binary mask}`` (labels 1, 2, ...
        in that order) or one label map (classes = its nonzero values, named by ``class_names``)."""
        if isinstance(masks, Mapping):
            classes = [StudyClass(str(n), i, np.asarray(m) != 0) for i, (n, m) in enumerate(masks.items(), start=1)]
        else:
            classes = label_map_classes(np.asarray(masks), class_names, binary=False)
        image = np.asarray(image)
        return cls(dataset, image_id, lambda: (image, classes), source=f"{dataset}/{image_id}")


# ----------------------------------------------------------------------------
# intensity and mask rules
# ----------------------------------------------------------------------------

def prepare_image(image: np.ndarray) -> np.ndarray:
    """Their intensity rule: RGB, each image divided by its maximum, times 255, as uint8.

    ``np.uint8(image / image.max() * 255)`` (truncation, that operation order),
    as ``prompt_gen_and_exec_v2_allmode.py`` l.178-184 after PIL's
    ``convert("RGB")``. Grey images are repeated on 3 channels, an alpha
    channel is dropped. Beyond their code (uint8 PNG/JPG only): non-finite
    values become 0, and data with negative values (CT, MRI slices) are first
    shifted by their minimum. An all-zero image stays zero.
    """
    a = np.asarray(image)
    if a.ndim == 3 and a.shape[-1] == 1:
        a = a[..., 0]
    elif a.ndim == 3 and a.shape[-1] == 4:
        a = a[..., :3]
    if a.ndim == 2:
        a = np.stack([a] * 3, axis=-1)
    if a.ndim != 3 or a.shape[-1] != 3:
        raise DataError(f"a study image must be (H, W) or (H, W, 3), got shape {np.asarray(image).shape}")
    a = a.astype(np.float64)
    a[~np.isfinite(a)] = 0.0
    low = a.min()
    if low < 0:
        a = a - low
    top = a.max()
    if top <= 0:
        return np.zeros(a.shape, np.uint8)
    return np.uint8(a / top * 255)


def label_map_classes(gray: np.ndarray, class_names: Mapping[int, str] | None = None,
                      binary: bool | None = None) -> list[StudyClass]:
    """Classes of one 2D mask image by their reading rule (:func:`mazurowski_label_map`).

    ``binary``: True -> one class (every pixel > 0 after the rule, their binary
    path); False -> one class per nonzero value; None (default) -> binary when
    the raw maximum is 255 or the values are {0, 1}; an all-zero mask then
    gives no class (the runner adds NaN rows for the dataset's classes).
    """
    gray = np.asarray(gray)
    if gray.ndim != 2:
        raise DataError(f"a mask must be 2D, got shape {gray.shape}")
    names = dict(class_names or {})
    values = mazurowski_label_map(gray)
    top = int(values.max()) if values.size else 0
    if binary is None:
        if top == 0:
            return []
        binary = int(gray.max()) == 255 or top == 1
    if binary:
        return [StudyClass(names.get(1, FOREGROUND), 1, values > 0)]
    present = [int(v) for v in np.unique(values) if v != 0]
    return [StudyClass(names.get(v, f"label {v}"), v, values == v) for v in present]


def read_mask_gray(path: Path) -> np.ndarray:
    """A mask file as their ``cv2.imread(path, 0)`` would see it (palette images: the indices)."""
    try:
        with Image.open(path) as img:
            if img.mode in ("P", "I", "I;16", "I;16B", "I;16L", "L", "1"):
                a = np.asarray(img)
            else:
                a = np.asarray(img.convert("L"))
    except (OSError, ValueError) as error:
        raise DataError(f"cannot read mask: {error}", path) from None
    return a.astype(np.uint8) if a.dtype == bool else a


def read_image_rgb(path: Path) -> np.ndarray:
    """An image file as their PIL ``Image.open(path).convert("RGB")`` (16-bit/float kept as values)."""
    try:
        with Image.open(path) as img:
            a = np.asarray(img)
            if a.dtype == np.uint8 or img.mode in ("P", "1", "CMYK", "YCbCr", "LA", "RGBA", "RGB", "L"):
                return np.asarray(img.convert("RGB"))
            return a
    except (OSError, ValueError) as error:
        raise DataError(f"cannot read image: {error}", path) from None


# ----------------------------------------------------------------------------
# 2D folders
# ----------------------------------------------------------------------------

def _files(folder: Path, suffixes: Sequence[str]) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.lower().endswith(tuple(suffixes))
                  and not p.name.startswith("."))


def _stem(path: Path, suffixes: Sequence[str] = IMAGE_SUFFIXES + VOLUME_SUFFIXES) -> str:
    for suffix in sorted(suffixes, key=len, reverse=True):
        if path.name.lower().endswith(suffix):
            return path.name[: -len(suffix)]
    return path.stem


def find_2d_samples(folder: str | Path, *, dataset: str | None = None, class_names: Mapping[int, str] | None = None,
                    binary: bool | None = None, instances: str = "union", limit: int | None = None,
                    skipped: list[dict] | None = None) -> list[StudySample]:
    """Samples of a 2D folder (``images/`` + ``masks/``), in file-name order, the first ``limit``.

    Images without any mask file are left out and appended to ``skipped``
    (``{"dataset", "image", "reason"}``) when given.
    """
    folder = Path(folder)
    images_dir, masks_dir = folder / "images", folder / "masks"
    if not images_dir.is_dir() or not masks_dir.is_dir():
        raise DataError("a 2D study folder needs images/ and masks/ subfolders", folder)
    if instances not in INSTANCE_RULES:
        raise ValueError(f"instances must be one of {INSTANCE_RULES}, got {instances!r}")
    dataset = dataset or folder.name
    images = _files(images_dir, IMAGE_SUFFIXES)
    if not images:
        raise DataError("no images (png/jpg/bmp/tif) in images/", folder)
    stems = {_stem(p): p for p in images}
    by_stem: dict[str, Path] = {}
    per_image: dict[str, list[Path]] = {s: [] for s in stems}
    for mask in _files(masks_dir, IMAGE_SUFFIXES):
        stem = _stem(mask)
        if stem in stems:
            by_stem[stem] = mask
            continue
        # SAM-Med2D: X_<object>_NNN; the longest image stem that prefixes it owns it
        owners = [s for s in stems if stem.startswith(s + "_") and _INSTANCE.match(stem[len(s) + 1:])]
        if owners:
            per_image[max(owners, key=len)].append(mask)
    samples = []
    for stem, image_path in stems.items():
        if stem in by_stem:
            mask_path = by_stem[stem]
            loader = _plain_loader(image_path, mask_path, class_names, binary)
        elif per_image[stem]:
            loader = _instances_loader(image_path, stem, per_image[stem], instances)
        else:
            if skipped is not None:
                skipped.append({"dataset": dataset, "image": stem, "reason": "no mask file"})
            continue
        samples.append(StudySample(dataset, stem, loader, source=str(image_path)))
        if limit is not None and len(samples) >= limit:
            break
    return samples


def _plain_loader(image_path: Path, mask_path: Path, class_names, binary):
    def load():
        return read_image_rgb(image_path), label_map_classes(read_mask_gray(mask_path), class_names, binary)
    return load


def _instances_loader(image_path: Path, stem: str, masks: list[Path], instances: str):
    def load():
        groups: dict[str, np.ndarray] = {}
        for path in masks:
            rest = _stem(path)[len(stem) + 1:]
            match = _INSTANCE.match(rest)
            name = rest if instances == "separate" or match is None else match.group("object")
            binary = mazurowski_label_map(read_mask_gray(path)) > 0
            if name in groups and groups[name].shape != binary.shape:
                raise DataError(f"shape {binary.shape} differs from the other masks of {name!r}", path)
            groups[name] = groups[name] | binary if name in groups else binary
        classes = [StudyClass(name, i, m) for i, (name, m) in enumerate(sorted(groups.items()), start=1)]
        return read_image_rgb(image_path), classes
    return load


# ----------------------------------------------------------------------------
# volumes -> 2D slices
# ----------------------------------------------------------------------------

@lru_cache(maxsize=2)
def _read_volume(path: str) -> np.ndarray:
    import SimpleITK as sitk

    try:
        return sitk.GetArrayFromImage(sitk.ReadImage(path))
    except RuntimeError as error:
        raise DataError(f"cannot read volume: {str(error).strip().splitlines()[-1]}", path) from None


def volume_slice_samples(source: str | Path | Iterable[tuple[str | Path, str | Path]], *, slices: str = "middle",
                         labels: Sequence[int] | None = None, label_names: Mapping[int, str] | None = None,
                         dataset: str | None = None, limit: int | None = None) -> list[StudySample]:
    """2D samples from volume cases: the middle axis-0 slice of each, or every labelled slice.

    ``source``: an MSD-style folder (``imagesTr/`` + ``labelsTr/``; names from
    its ``dataset.json``) or ``(image, label)`` path pairs. ``slices="middle"``:
    index ``depth // 2`` of the SimpleITK ``(z, y, x)`` array; ``"all"``: every
    slice with a nonzero label. Classes: ``labels`` (default: every nonzero
    value of the case's label volume), one per label even when absent on the
    slice (empty -> NaN). ``limit`` counts cases.
    """
    if slices not in VOLUME_SLICE_RULES:
        raise ValueError(f"slices must be one of {VOLUME_SLICE_RULES}, got {slices!r}")
    names = dict(label_names or {})
    if isinstance(source, (str, Path)):
        folder = Path(source)
        dataset = dataset or folder.name
        pairs = msd_pairs(folder)
        if not names:
            names = msd_label_names(folder)
    else:
        pairs = [(Path(a), Path(b)) for a, b in source]
        dataset = dataset or "volumes"
    if limit is not None:
        pairs = pairs[:limit]
    samples = []
    for image_path, label_path in pairs:
        case = _stem(Path(image_path))
        label = _read_volume(str(label_path))
        if label.ndim != 3:
            raise DataError(f"expected a 3D label volume, got shape {label.shape}", label_path)
        wanted = [int(v) for v in (labels if labels is not None else np.unique(label)) if int(v) != 0]
        if slices == "middle":
            indices = [label.shape[0] // 2]
        else:
            indices = [int(z) for z in np.flatnonzero(label.reshape(label.shape[0], -1).any(axis=1))]
        for z in indices:
            samples.append(StudySample(dataset, f"{case}_z{z}", _slice_loader(image_path, label_path, z, wanted, names),
                                       source=f"{image_path}[{z}]"))
    return samples


def _slice_loader(image_path, label_path, z: int, wanted: list[int], names: dict[int, str]):
    def load():
        image = _read_volume(str(image_path))
        if image.ndim != 3:
            raise DataError(f"expected a 3D image volume, got shape {image.shape}", image_path)
        label = _read_volume(str(label_path))[z]
        classes = [StudyClass(names.get(v, f"label {v}"), v, label == v) for v in wanted]
        return image[z], classes
    return load


def msd_pairs(folder: Path) -> list[tuple[Path, Path]]:
    images, labels = folder / "imagesTr", folder / "labelsTr"
    if not images.is_dir() or not labels.is_dir():
        raise DataError("a volume study folder needs imagesTr/ and labelsTr/ subfolders", folder)
    label_files = {_stem(p): p for p in _files(labels, VOLUME_SUFFIXES)}
    pairs = []
    for image in _files(images, VOLUME_SUFFIXES):
        stem = _stem(image)
        key = stem if stem in label_files else re.sub(r"_\d{4}$", "", stem)  # nnU-Net's X_0000 channel files
        if key in label_files:
            pairs.append((image, label_files[key]))
    if not pairs:
        raise DataError("no image in imagesTr/ has a label of the same name in labelsTr/", folder)
    return pairs


def msd_label_names(folder: Path) -> dict[int, str]:
    try:
        labels = json.loads((folder / "dataset.json").read_text())["labels"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(labels, dict):
        return {}
    out = {}
    for key, value in labels.items():  # MSD {"1": "name"}, nnU-Net v2 {"name": 1}
        k, v = (key, value) if str(key).isdigit() else (value, key)
        if str(k).isdigit() and int(k) != 0:
            out[int(k)] = str(v)
    return out


def study_samples(source, *, limit: int | None = None, volume_slices: str = "middle",
                  skipped: list[dict] | None = None, **options) -> list[StudySample]:
    """Samples of one source or a list of them: 2D folder, volume folder, or StudySample objects.

    ``limit`` applies per folder (images for 2D, cases for volumes); ``options``
    go to :func:`find_2d_samples` (``class_names``, ``binary``, ``instances``).
    """
    if isinstance(source, StudySample):
        return [source]
    if isinstance(source, (str, Path)):
        folder = Path(source)
        if (folder / "images").is_dir():
            return find_2d_samples(folder, limit=limit, skipped=skipped, **options)
        if (folder / "imagesTr").is_dir():
            names = options.get("class_names")
            return volume_slice_samples(folder, slices=volume_slices, limit=limit, label_names=names)
        raise DataError("not a study dataset: expected images/ + masks/ (2D) or imagesTr/ + labelsTr/ (volumes)",
                        folder)
    out: list[StudySample] = []
    loose: list[StudySample] = []
    for item in source:
        if isinstance(item, StudySample):
            loose.append(item)
        else:
            out.extend(study_samples(item, limit=limit, volume_slices=volume_slices, skipped=skipped, **options))
    if limit is not None:
        loose = loose[:limit]
    return out + loose
