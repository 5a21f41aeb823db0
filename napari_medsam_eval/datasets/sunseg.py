"""SUN-SEG polyp videos: ``Frame/<case>/*.jpg`` with ``GT/<case>/*.png``.

Flat (``<root>/Frame``, ``<root>/GT``: how ``cvc_clinicdb_video`` is laid out)
or nested as the SUN-SEG release is::

    TestEasyDataset/Seen/Frame/<case>/...   TestEasyDataset/Seen/GT/<case>/...
    TestEasyDataset/Unseen/...              TestHardDataset/{Seen,Unseen}/...
    TrainDataset/Frame/...

The folders above ``Frame`` become case attributes: ``difficulty`` (``easy`` /
``hard`` from ``TestEasyDataset`` / ``TestHardDataset``), ``split``
(``seen`` / ``unseen``, or ``train`` for ``TrainDataset``) and ``group`` (the
relative folder, e.g. ``TestEasyDataset/Seen``). Case ids are the clip folder
names; a name occurring in two groups is prefixed with its group. Masks are
binary (0/255), label 1 = ``polyp``.
"""
from __future__ import annotations

from pathlib import Path

from ..core.case import Case
from ..io import read_case
from .layouts import sunseg_mask_folder
from .base import CaseRef, DatasetLayout, unique_case_ids, visible_dirs
from .links import count_once

#: how deep below the root a ``Frame`` folder is looked for
_MAX_DEPTH = 3
_DIFFICULTY = {"testeasydataset": "easy", "testharddataset": "hard"}
_SPLIT = {"seen": "seen", "unseen": "unseen", "traindataset": "train", "train": "train"}


def frame_folders(root: Path, depth: int = _MAX_DEPTH) -> list[Path]:
    """Every ``Frame`` folder at most ``depth`` levels below ``root`` that has a mask sibling."""
    found: list[Path] = []
    level = [root]
    for _ in range(depth + 1):
        next_level: list[Path] = []
        for folder in level:
            frame = folder / "Frame"
            if frame.is_dir() and any(sunseg_mask_folder(c) for c in visible_dirs(frame)[:1]):
                found.append(frame)
                continue
            next_level += [d for d in visible_dirs(folder) if d.name not in ("Frame", "GT")]
        level = next_level
    return sorted(found)


def group_attributes(root: Path, frame: Path) -> dict[str, str]:
    """``difficulty``/``split``/``group`` from the folders between ``root`` and ``frame``."""
    parts = frame.parent.relative_to(root).parts
    attributes: dict[str, str] = {}
    for part in parts:
        key = part.lower()
        if key in _DIFFICULTY:
            attributes["difficulty"] = _DIFFICULTY[key]
        if key in _SPLIT:
            attributes["split"] = _SPLIT[key]
    if parts:
        attributes["group"] = "/".join(parts)
    return attributes


class SunSegLayout(DatasetLayout):
    """SUN-SEG (and other Frame/GT) polyp video clips."""

    name = "sunseg"
    kind = "video"
    summary = "Frame/<case>/*.jpg + GT/<case>/*.png, flat or under TestEasyDataset|TestHardDataset/{Seen,Unseen}"
    default_label_names = {1: "polyp"}

    def detect(self, path: str | Path) -> bool:
        path = Path(path)
        return path.is_dir() and bool(frame_folders(path))

    def list_cases(self, path: str | Path) -> list[CaseRef]:
        root = Path(path)
        refs = []
        for frame in frame_folders(root):
            attributes = group_attributes(root, frame)
            for clip in visible_dirs(frame, broken_links=True):  # a dangling clip link fails on loading
                refs.append(self.ref(root, clip.name, {"image": clip, "label": sunseg_mask_folder(clip)},
                                     **attributes))
        refs = count_once(refs, root)  # before naming: a clip reached twice through a link is no name clash
        counts: dict[str, int] = {}
        for ref in refs:
            counts[ref.case_id] = counts.get(ref.case_id, 0) + 1
        for ref in refs:
            if counts[ref.case_id] > 1:
                ref.case_id = f"{ref.attributes.get('group', '')}/{ref.case_id}".lstrip("/")
        return unique_case_ids(refs, root)

    def _read(self, ref: CaseRef) -> Case:
        return read_case(ref.paths["image"], ref.paths.get("label"), kind="video", case_id=ref.case_id)
