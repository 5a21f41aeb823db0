"""Cell Tracking Challenge instance maps: ``img/t<NN>.tif`` with ``gt/man_seg<NN>.tif``.

The Cell Tracking Challenge ships each sequence's frames as ``t<NNN>.tif`` and their manual
segmentations as ``man_seg<NNN>.tif`` (a frame number, the same digits), in a sequence folder ``01/``
with ``01_GT/SEG/``; staged copies use ``img/`` with ``gt/``. Both are read. A segmentation is an
*instance map*: each nucleus (cell) its own value, touching ones touching, so the dataset's target is
``nuclei=instances`` (:class:`~napari_medsam_eval.core.targets.Target` ``instances``): every value one
lesion, never the connected components of the foreground (which merge touching nuclei). A frame
without a segmentation (the challenge segments a subset) is not a case.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..core.case import Case
from ..core.targets import Target, with_keys
from ..io import read_case
from ..io.formats import format_suffix
from .base import CaseRef, DatasetLayout, visible_dirs, visible_files

#: (image folder, segmentation folder) pairs of a staged copy; a sequence ``NN`` uses ``NN`` and ``NN_GT/SEG``
FOLDERS = (("img", "gt"),)
_FRAME = re.compile(r"^t(\d+)$")
_SEGMENTATION = re.compile(r"^man_seg(\d+)$")
_TIF = (".tif", ".tiff")


def _numbered(folder: Path, pattern: re.Pattern) -> dict[int, Path]:
    """``{frame number: file}`` of the TIFFs in ``folder`` whose stem ``pattern`` reads."""
    out = {}
    for path in visible_files(folder) if folder.is_dir() else []:
        match = pattern.match(path.name[: -len(format_suffix(path))] if format_suffix(path) else path.name)
        if match and format_suffix(path) in _TIF:
            out[int(match[1])] = path
    return out


def sequence_folders(root: Path) -> list[tuple[str, Path, Path]]:
    """``(prefix, images, segmentations)`` of every sequence under ``root`` (staged or the challenge's)."""
    found = [("", root / img, root / gt) for img, gt in FOLDERS if (root / img).is_dir() and (root / gt).is_dir()]
    for folder in visible_dirs(root):
        if folder.name.isdigit() and (root / f"{folder.name}_GT" / "SEG").is_dir():
            found.append((f"{folder.name}_", folder, root / f"{folder.name}_GT" / "SEG"))
    return found


class CellTrackingLayout(DatasetLayout):
    """Cell Tracking Challenge frames with their instance segmentations (2D images)."""

    name = "ctc"
    kind = "image"
    summary = "img/t<NN>.tif + gt/man_seg<NN>.tif, or <NN>/t<NNN>.tif + <NN>_GT/SEG/man_seg<NNN>.tif (instance maps)"

    def detect(self, path: str | Path) -> bool:
        root = Path(path)
        return any(set(_numbered(images, _FRAME)) & set(_numbered(segs, _SEGMENTATION))
                   for _prefix, images, segs in sequence_folders(root))

    def list_cases(self, path: str | Path) -> list[CaseRef]:
        root = Path(path)
        refs = []
        for prefix, images, segs in sequence_folders(root):
            frames, labels = _numbered(images, _FRAME), _numbered(segs, _SEGMENTATION)
            refs += [self.ref(root, f"{prefix}{frames[n].name[:-len(format_suffix(frames[n]))]}",
                              {"image": frames[n], "label": labels[n]}) for n in sorted(set(frames) & set(labels))]
        return refs

    def dataset_targets(self, path: str | Path) -> list[Target] | None:
        """Every nucleus one lesion: ``nuclei=instances`` (a ``dataset.json``'s regions first)."""
        return super().dataset_targets(path) or with_keys([Target("nuclei", (), instances=True)])

    def _read(self, ref: CaseRef) -> Case:
        return read_case(ref.paths["image"], ref.paths.get("label"), kind="image", case_id=ref.case_id)
