"""MedSAM / CVPR-challenge npz folders: one ``<Modality>_<Target>_....npz`` per case.

The challenge names files ``CT_Lesion_000001_....npz``, ``MR_LiverTumor_...``,
``3DBox_CT_0566.npz``: a modality prefix, then the cohort/target. Label names
come from that target token (``"lesion"`` for label 1, ``"lesion_2"`` for label
2 ...), so cases of one cohort share their task names; a file without a
recognisable token gets ``"label_<n>"``. A ``dataset.json`` at the root
overrides the names. Cases may sit in sub-folders (one per cohort); the
sub-folder is kept as the attribute ``group``.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..core.case import Case
from ..io import read_medsam_npz
from ..io.formats import strip_suffix
from ..io.npz_io import MODALITY_PREFIXES
from .base import CaseRef, DatasetLayout, unique_case_ids, visible_dirs, visible_files

#: leading file-name tokens that say how the file was made, not what it shows
_SKIP_TOKENS = {"3dbox", "2dbox", "3d", "2d", "box"}


def npz_target_token(name: str) -> str | None:
    """The cohort/target token of a challenge file name (``CT_Lesion_0001`` -> ``"lesion"``)."""
    tokens = strip_suffix(Path(name)).split("_")
    index = 0
    while index < len(tokens) and tokens[index].lower() in _SKIP_TOKENS:
        index += 1
    if index >= len(tokens) or tokens[index].lower() not in MODALITY_PREFIXES:
        return None
    index += 1
    if index < len(tokens) and re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", tokens[index]):
        return tokens[index].lower()
    return None


def npz_label_names(name: str, values: list[int]) -> dict[int, str]:
    """Label names from the file name's target token (see the module doc)."""
    token = npz_target_token(name)
    if token is None:
        return {}
    return {v: token if v == 1 else f"{token}_{v}" for v in values}


def _npz_files(folder: Path) -> list[Path]:
    return [p for p in visible_files(folder) if p.name.lower().endswith(".npz")]


class MedSAMNpzLayout(DatasetLayout):
    """A folder of MedSAM/CVPR npz files (``imgs``, ``gts``, ``spacing`` x-y-z ...)."""

    name = "npz"
    kind = "mixed"
    summary = "a folder of MedSAM/CVPR .npz files (imgs, gts, spacing), optionally one sub-folder per cohort"

    def detect(self, path: str | Path) -> bool:
        path = Path(path)
        if not path.is_dir() or (path / "imagesTr").is_dir():
            return False
        return bool(_npz_files(path)) or any(_npz_files(sub) for sub in visible_dirs(path))

    def list_cases(self, path: str | Path) -> list[CaseRef]:
        root = Path(path)
        refs = [self.ref(root, strip_suffix(f), {"image": f}, kind="volume") for f in _npz_files(root)]
        for sub in visible_dirs(root):
            refs += [self.ref(root, f"{sub.name}/{strip_suffix(f)}", {"image": f}, kind="volume", group=sub.name)
                     for f in _npz_files(sub)]
        return unique_case_ids(refs, root)

    def _read(self, ref: CaseRef) -> Case:
        case = read_medsam_npz(ref.paths["image"], case_id=ref.case_id)
        names = npz_label_names(ref.paths["image"], case.label_values())
        if names:
            case.metadata["label_names"] = {**names, **case.label_names}
        return case
