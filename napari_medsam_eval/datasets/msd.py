"""MSD / nnU-Net raw datasets: ``imagesTr``/``labelsTr`` (and ``imagesTs``/``labelsTs``).

``dataset.json`` (optional here: some copies lack it) gives the modality and
label names. nnU-Net multi-channel images are ``<case>_0000``, ``<case>_0001``
...; only channel ``_0000`` is evaluated (the SAM family takes one channel).
Hidden files (macOS ``._`` copies that MSD tarballs contain) are skipped. An
image without a label file is still listed: loading it fails with a clear
message, so the run records it as failed rather than dropping it silently.

When ``dataset.json`` has a ``training`` list (``[{"image": "./imagesTr/x.nii.gz",
"label": "./labelsTr/x.nii.gz"}, ...]``, paths relative to the dataset root as
MSD writes them), the training cases are exactly its entries (an entry outside the dataset folder,
``../../x.nii.gz`` or an absolute path elsewhere, is refused when the case is read, naming it, unless
the run allows it: ``run --allow-outside``): a listed file
that is missing is still a case, which fails on loading with the reason, and
files of ``imagesTr`` that the list does not name are ignored. An entry naming
``x.nii.gz`` where only nnU-Net's ``x_0000.nii.gz`` exists uses channel 0000.
Cases are listed in file-name order either way. Without a ``training`` list
(nnU-Net v2, some copies) ``imagesTr`` is listed. ``imagesTs`` is always listed
from the folder, and only with a ``labelsTs`` folder.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..core.case import Case
from ..io import read_case
from ..io.msd_info import read_dataset_json
from ..io.formats import SITK_SUFFIXES, format_suffix, missing_message, strip_suffix
from .layouts import find_label_file, label_stem
from ..core.errors import DataError
from .base import CaseRef, DatasetLayout, unique_case_ids, visible_files

_OTHER_CHANNEL = re.compile(r"_(\d{4})$")
#: (images folder, labels folder, split attribute)
_SPLITS = (("imagesTr", "labelsTr", "train"), ("imagesTs", "labelsTs", "test"))
#: image folder name -> its label folder name
LABEL_FOLDERS = {images: labels for images, labels, _ in _SPLITS}


def msd_label_folder(image: str | Path) -> Path | None:
    """``<root>/imagesTr/x.nii.gz`` -> ``<root>/labelsTr`` (``imagesTs`` -> ``labelsTs``), when it exists."""
    folder = Path(image).parent
    labels = LABEL_FOLDERS.get(folder.name)
    return folder.parent / labels if labels and (folder.parent / labels).is_dir() else None


def is_msd_label(path: str | Path) -> bool:
    """A file in an MSD / nnU-Net ``labelsTr``/``labelsTs`` folder (a ground truth, never an image)."""
    return Path(path).parent.name in LABEL_FOLDERS.values()


def _channel_zero_images(folder: Path) -> list[Path]:
    """Image files of ``folder``; with nnU-Net channel suffixes, channel 0000 only."""
    images = [p for p in visible_files(folder) if format_suffix(p) in SITK_SUFFIXES]
    stems = [p.name[: len(p.name) - len(format_suffix(p))] for p in images]
    if any(s.endswith("_0000") for s in stems):
        images = [p for p, s in zip(images, stems)
                  if not _OTHER_CHANNEL.search(s) or s.endswith("_0000")]
    return images


class MSDLayout(DatasetLayout):
    """Medical Segmentation Decathlon / nnU-Net raw layout (3D volumes)."""

    name = "msd"
    kind = "volume"
    summary = "imagesTr/ + labelsTr/ (MSD / nnU-Net), dataset.json with label names"

    def detect(self, path: str | Path) -> bool:
        path = Path(path)
        return (path / "imagesTr").is_dir() and (path / "labelsTr").is_dir()

    def list_cases(self, path: str | Path) -> list[CaseRef]:
        root = Path(path)
        refs: list[CaseRef] = []
        listed = training_list(root)
        for images, labels, split in _SPLITS:
            if split == "train" and listed is not None:
                refs += [self.ref(root, label_stem(image), {"image": image, "label": label}, split=split)
                         for image, label in listed]
                continue
            if not (root / images).is_dir() or not (root / labels).is_dir():
                continue  # imagesTs without labels cannot be scored
            for image in _channel_zero_images(root / images):
                label = find_label_file(image, root / labels)
                refs.append(self.ref(root, label_stem(image), {"image": image, "label": label}, split=split))
        return unique_case_ids(refs, root)

    def _read(self, ref: CaseRef) -> Case:
        outside = [] if ref.allow_outside else ref.outside()
        if outside:
            raise DataError(f"dataset.json lists a file of case {ref.case_id} outside the dataset folder "
                            f"({outside[0]}); pass --allow-outside to read it", Path(ref.root) / "dataset.json")
        image = Path(ref.paths["image"])
        if not image.exists():
            raise DataError(f"image of case {ref.case_id}: {missing_message(image)}", image)
        if "label" not in ref.paths:
            raise DataError(f"no label file for case {ref.case_id} in labelsTr/labelsTs", ref.paths["image"])
        label = Path(ref.paths["label"])
        if not label.exists():
            raise DataError(f"label of case {ref.case_id}: {missing_message(label)}", label)
        return read_case(image, label, case_id=ref.case_id)


def training_list(root: Path) -> list[tuple[Path, Path | None]] | None:
    """(image, label) of every entry of ``dataset.json``'s ``training`` list, in file-name order.

    None when there is no ``dataset.json`` or it has no ``training`` list; a
    file that is not a JSON object, or a list that is not MSD's shape, is a DataError naming the file.
    """
    path = root / "dataset.json"
    info = read_dataset_json(path)  # not JSON, or not an object: a DataError naming it (it concerns every case)
    entries = info.get("training") if info is not None else None
    if entries is None:
        return None
    if not isinstance(entries, list):
        raise DataError("'training' is not a list of {\"image\": ..., \"label\": ...} entries", path)
    pairs: list[tuple[Path, Path | None]] = []
    for number, entry in enumerate(entries, start=1):
        image = _entry_path(root, entry.get("image") if isinstance(entry, dict) else entry)
        if image is None:
            raise DataError(f"'training' entry {number} has no \"image\" path", path)
        pairs.append((_channel_zero(image), _entry_path(root, entry.get("label")) if isinstance(entry, dict)
                      else find_label_file(image, root / "labelsTr")))
    return sorted(pairs, key=lambda pair: pair[0])


def _entry_path(root: Path, value: Any) -> Path | None:
    """``./imagesTr/x.nii.gz`` -> ``<root>/imagesTr/x.nii.gz``; None for no path."""
    if not isinstance(value, str) or not value.strip():
        return None
    return root / Path(value.strip())


def _channel_zero(image: Path) -> Path:
    """nnU-Net v1 lists ``x.nii.gz`` for the files ``x_0000.nii.gz`` ...: channel 0000 when only it exists."""
    if image.exists() or image.is_symlink():
        return image
    suffix = format_suffix(image)
    channel = image.with_name(f"{strip_suffix(image)}_0000{suffix}")
    return channel if channel.exists() else image
