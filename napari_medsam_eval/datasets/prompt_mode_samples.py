"""Samples of the 2D prompt-mode study: one 2D image and its class masks, read lazily.

Three sources, all giving :class:`StudySample` lists:

* a 2D folder ``images/`` + ``masks/`` (images in file-name order, as
  :func:`~.folder2d.image_files` lists them). An image's mask is found as the
  ``folder2d`` layout finds it (:func:`~.folder2d.find_mask`: ``masks/X.*``,
  else ``X_segmentation``/``X_mask``) and is one label map, read with
  Mazurowski et al.'s rule (:func:`label_map_classes`: a {0,255} mask becomes
  one class, ``"foreground"``; otherwise each nonzero value is a class).
  Without one, the image's SAM-Med2D masks ``masks/X_<object>_NNN.png``
  (:func:`~.layouts.sammed2d_mask_files`) are one binary file per instance,
  one class per object name (instances united; ``instances="separate"`` keeps
  each file as its own class ``<object>_NNN``). An image with neither is
  skipped (and listed in ``skipped``).
* volumes (an MSD folder, its labelled ``imagesTr`` cases as the ``msd``
  layout lists them, or explicit (image, label) pairs):
  :func:`volume_slice_samples` turns each case into 2D samples, the middle
  axis-0 slice (``depth // 2`` of the SimpleITK ``(z, y, x)`` array, as the
  reference prompts did for hippocampus) or every labelled slice. Every label
  of the case is a class on each slice (absent on that slice: empty mask, NaN).
* samples made in memory with :meth:`StudySample.from_arrays`.

Masks and images are read as their OpenCV/PIL code reads them
(:func:`~napari_medsam_eval.io.image2d.read_mask_gray`,
:func:`~napari_medsam_eval.io.image2d.read_image_rgb`), not with the mask rules
of :mod:`napari_medsam_eval.io.image2d`.
"""
from __future__ import annotations

import dataclasses

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..core.errors import DataError
from ..core.targets import Target, regions_only
from ..io.formats import strip_suffix
from ..io.image2d import FOREGROUND, read_image_rgb, read_mask_gray
from ..io.sitk_io import array_of, read_sitk_image
from ..io.mazurowski_masks import mazurowski_label_map
from .folder2d import find_mask, image_files
from .layouts import label_stem, sammed2d_mask_files
from .links import files_once
from .msd import MSDLayout
from ..core.errors import InputError

#: how SAM-Med2D instance files of one object become classes
INSTANCE_RULES = ("union", "separate")
#: which axis-0 slices of a volume case become samples
VOLUME_SLICE_RULES = ("middle", "all")
_INSTANCE = re.compile(r"^(?P<object>.+)_(?P<index>\d+)$")

Loader = Callable[[], "tuple[np.ndarray, list[StudyClass]]"]


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
    loader: Loader = field(repr=False)
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


def with_targets(samples: list[StudySample], targets: Sequence[Target] | None) -> list[StudySample]:
    """``samples`` whose classes are ``targets`` (``--targets``, :mod:`napari_medsam_eval.core.targets`): each
    target a class of its own, its mask the union of the sample's classes of its labels, its label its key;
    a target none of whose labels the sample holds is left out (as an absent class). Lesions one by one
    are a benchmark's (``run``): here an OptionError says so (:func:`~napari_medsam_eval.core.targets.regions_only`)."""
    if not regions_only(targets, "the prompt study"):
        return samples

    def classes_of(sample: StudySample) -> Loader:
        def load() -> tuple[np.ndarray, list[StudyClass]]:
            image, classes = sample.loader()
            by_label = {c.label: c.mask for c in classes}
            out = []
            for target in targets:
                masks = [by_label[v] for v in target.labels if v in by_label]
                if masks:
                    out.append(StudyClass(target.name, target.key, np.logical_or.reduce(masks)))
            return image, out
        return load

    return [dataclasses.replace(sample, loader=classes_of(sample)) for sample in samples]


def class_name(names: Mapping[int, str], value: int) -> str:
    """The study's name of label ``value``: the dataset's name for it, else ``"label <value>"``."""
    return names.get(value, f"label {value}")


def study_task_name(dataset: str, cls: str) -> str:
    """A study task (a summary row): the dataset alone for a binary dataset, else ``dataset: class``."""
    return dataset if cls == FOREGROUND else f"{dataset}: {cls}"


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
    return [StudyClass(class_name(names, v), v, values == v) for v in present]


# ----------------------------------------------------------------------------
# 2D folders
# ----------------------------------------------------------------------------

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
        raise InputError(f"instances must be one of {INSTANCE_RULES}, got {instances!r}")
    dataset = dataset or folder.name
    images = files_once(image_files(images_dir), folder)  # an image reached twice through a link counts once
    if not images:
        raise DataError("no images (png/jpg/bmp/tif) in images/", folder)
    samples = []
    for image_path in images:
        loader = _folder_loader(image_path, masks_dir, class_names, binary, instances)
        if loader is None:
            if skipped is not None:
                skipped.append({"dataset": dataset, "image": strip_suffix(image_path), "reason": "no mask file"})
            continue
        samples.append(StudySample(dataset, strip_suffix(image_path), loader, source=str(image_path)))
        if limit is not None and len(samples) >= limit:
            break
    return samples


def _folder_loader(image_path: Path, masks_dir: Path, class_names: Mapping[int, str] | None,
                   binary: bool | None, instances: str) -> Loader | None:
    """The image's one label map, else its SAM-Med2D instance files; None without either."""
    mask_path = find_mask(image_path, masks_dir)
    if mask_path is not None:
        return lambda: (read_image_rgb(image_path), label_map_classes(read_mask_gray(mask_path), class_names, binary))
    masks = sammed2d_mask_files(image_path, masks_dir)
    if masks:
        return lambda: (read_image_rgb(image_path), instance_classes(image_path, masks, instances))
    return None


def instance_classes(image_path: Path, masks: Sequence[Path], instances: str = "union") -> list[StudyClass]:
    """Classes of SAM-Med2D instance files ``<image stem>_<object>_NNN``, labels 1, 2, ... by name.

    ``instances="union"``: one class per object (its files united);
    ``"separate"``: one class per file, named ``<object>_NNN``.
    """
    stem = strip_suffix(image_path)
    groups: dict[str, np.ndarray] = {}
    for path in masks:
        rest = strip_suffix(path)[len(stem) + 1:]
        match = _INSTANCE.match(rest)
        name = rest if instances == "separate" or match is None else match.group("object")
        mask = mazurowski_label_map(read_mask_gray(path)) > 0
        if name in groups and groups[name].shape != mask.shape:
            raise DataError(f"shape {mask.shape} differs from the other masks of {name!r}", path)
        groups[name] = groups[name] | mask if name in groups else mask
    return [StudyClass(name, i, m) for i, (name, m) in enumerate(sorted(groups.items()), start=1)]


# ----------------------------------------------------------------------------
# volumes -> 2D slices
# ----------------------------------------------------------------------------

@lru_cache(maxsize=2)
def _read_volume(path: str) -> np.ndarray:
    """The voxel array of a volume file (``(z, y, x)``), the last two kept: each case's image and label."""
    return array_of(read_sitk_image(path), path)


def msd_pairs(folder: str | Path) -> list[tuple[Path, Path]]:
    """``(image, label)`` of every labelled training case of an MSD folder, as the ``msd`` layout lists them."""
    folder = Path(folder)
    if not (folder / "imagesTr").is_dir() or not (folder / "labelsTr").is_dir():
        raise DataError("a volume study folder needs imagesTr/ and labelsTr/ subfolders", folder)
    pairs = [(Path(ref.paths["image"]), Path(ref.paths["label"])) for ref in MSDLayout().list_cases(folder)
             if ref.attributes.get("split") == "train" and "label" in ref.paths]
    if not pairs:
        raise DataError("no image in imagesTr/ has a label of the same name in labelsTr/", folder)
    return pairs


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
        raise InputError(f"slices must be one of {VOLUME_SLICE_RULES}, got {slices!r}")
    names = dict(label_names or {})
    if isinstance(source, (str, Path)):
        folder = Path(source)
        dataset = dataset or folder.name
        pairs = msd_pairs(folder)
        names = names or MSDLayout().label_names(folder)
    else:
        pairs = [(Path(a), Path(b)) for a, b in source]
        dataset = dataset or "volumes"
    samples = []
    for image_path, label_path in pairs[:limit]:
        samples.extend(_case_slices(dataset, image_path, label_path, slices, labels, names))
    return samples


def _case_slices(dataset: str, image_path: Path, label_path: Path, slices: str, labels: Sequence[int] | None,
                 names: dict[int, str]) -> list[StudySample]:
    label = _read_volume(str(label_path))
    if label.ndim != 3:
        raise DataError(f"expected a 3D label volume, got shape {label.shape}", label_path)
    wanted = [int(v) for v in (labels if labels is not None else np.unique(label)) if int(v) != 0]
    if slices == "middle":
        indices = [label.shape[0] // 2]
    else:
        indices = [int(z) for z in np.flatnonzero(label.reshape(label.shape[0], -1).any(axis=1))]
    case = label_stem(image_path)
    return [StudySample(dataset, f"{case}_z{z}", _slice_loader(image_path, label_path, z, wanted, names),
                        source=f"{image_path}[{z}]") for z in indices]


def _slice_loader(image_path: Path, label_path: Path, z: int, wanted: list[int], names: dict[int, str]) -> Loader:
    def load() -> tuple[np.ndarray, list[StudyClass]]:
        image = _read_volume(str(image_path))
        if image.ndim != 3:
            raise DataError(f"expected a 3D image volume, got shape {image.shape}", image_path)
        label = _read_volume(str(label_path))[z]
        return image[z], [StudyClass(class_name(names, v), v, label == v) for v in wanted]
    return load


# ----------------------------------------------------------------------------
# any source
# ----------------------------------------------------------------------------

def study_samples(source: Any, *, limit: int | None = None, volume_slices: str = "middle",
                  skipped: list[dict] | None = None, **options: Any) -> list[StudySample]:
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
    return out + loose[:limit]
