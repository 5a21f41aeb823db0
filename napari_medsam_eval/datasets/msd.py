"""MSD / nnU-Net raw datasets: ``imagesTr``/``labelsTr`` (and ``imagesTs``/``labelsTs``).

``dataset.json`` (optional here: some copies lack it) gives the modality and
label names. nnU-Net multi-channel images are ``<case>_0000``, ``<case>_0001``
...; only channel ``_0000`` is evaluated (the SAM family takes one channel).
Hidden files (macOS ``._`` copies that MSD tarballs contain) are skipped. An
image without a label file is still listed: loading it fails with a clear
message, so the run records it as failed rather than dropping it silently.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..case import Case
from ..io import read_case
from ..io.formats import SITK_SUFFIXES, format_suffix
from .layouts import find_label_file, label_stem
from ..errors import DataError
from .base import CaseRef, DatasetLayout, unique_case_ids, visible_files

_OTHER_CHANNEL = re.compile(r"_(\d{4})$")
#: (images folder, labels folder, split attribute)
_SPLITS = (("imagesTr", "labelsTr", "train"), ("imagesTs", "labelsTs", "test"))


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
        for images, labels, split in _SPLITS:
            if not (root / images).is_dir() or not (root / labels).is_dir():
                continue  # imagesTs without labels cannot be scored
            for image in _channel_zero_images(root / images):
                label = find_label_file(image, root / labels)
                refs.append(self.ref(root, label_stem(image), {"image": image, "label": label}, split=split))
        return unique_case_ids(refs, root)

    def _read(self, ref: CaseRef) -> Case:
        if "label" not in ref.paths:
            raise DataError(f"no label file for case {ref.case_id} in labelsTr/labelsTs", ref.paths["image"])
        return read_case(ref.paths["image"], ref.paths["label"], case_id=ref.case_id)
