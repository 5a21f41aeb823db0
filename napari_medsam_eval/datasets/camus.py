"""CAMUS echocardiography, NIfTI release: one video per patient and view.

::

    [database_nifti/]patient0001/patient0001_2CH_half_sequence.nii.gz
                                 patient0001_2CH_half_sequence_gt.nii.gz
                                 patient0001_4CH_half_sequence[_gt].nii.gz
                                 Info_2CH.cfg, Info_4CH.cfg   (ED, ES, ImageQuality ...)
    [database_split/subgroup_{training,validation,testing}.txt]

A case is ``patient0001_2CH`` (video ``T, Y, X``, read by the io layer as a
sequence because of its name), with attributes ``patient``, ``view``, and,
where the release has them, ``image_quality`` (from ``Info_<view>.cfg``) and
``split`` (from ``database_split``). Labels: 1 LV endocardium (the cavity),
2 myocardium, 3 left atrium. The ``_ED``/``_ES`` single frames are not cases.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..core.case import Case
from ..io import read_case
from .base import CaseRef, DatasetLayout, unique_case_ids, visible_dirs

_PATIENT = re.compile(r"^patient\d+$", re.IGNORECASE)
_SEQUENCE = re.compile(r"^(patient\d+)_(2CH|4CH)_half_sequence\.nii(\.gz)?$", re.IGNORECASE)
_SEQUENCE_GT = re.compile(r"^(patient\d+)_(2CH|4CH)_half_sequence_gt\.nii(\.gz)?$", re.IGNORECASE)
_SPLIT_FILES = {"training": "train", "validation": "validation", "testing": "test"}

CAMUS_LABELS = {1: "lv_endocardium", 2: "myocardium", 3: "left_atrium"}


def camus_label_path(image: str | Path) -> Path:
    """``..._half_sequence.nii.gz`` -> ``..._half_sequence_gt.nii.gz`` (its ground truth, beside it)."""
    image = Path(image)
    return image.with_name(image.name.replace("_half_sequence.", "_half_sequence_gt."))


def is_camus_label(path: str | Path) -> bool:
    """A CAMUS ground-truth sequence (``..._half_sequence_gt.nii.gz``)."""
    return _SEQUENCE_GT.match(Path(path).name) is not None


def _patients_folder(root: Path) -> Path:
    nested = root / "database_nifti"
    return nested if nested.is_dir() else root


def _sequences(patient: Path) -> list[tuple[Path, re.Match]]:
    try:
        files = sorted(patient.iterdir())
    except OSError:
        return []
    return [(f, m) for f in files if (m := _SEQUENCE.match(f.name))]


def read_info_cfg(path: Path) -> dict[str, str]:
    """``key: value`` lines of a CAMUS ``Info_<view>.cfg`` ({} when absent or unreadable)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, sep, v in (line.partition(":") for line in lines)
            if sep and k.strip()}


def read_splits(root: Path) -> dict[str, str]:
    """patient name -> split, from ``database_split/subgroup_*.txt`` ({} without it)."""
    folder = root / "database_split"
    splits: dict[str, str] = {}
    for name, split in _SPLIT_FILES.items():
        try:
            text = (folder / f"subgroup_{name}.txt").read_text()
        except OSError:
            continue
        for patient in text.split():
            splits[patient.strip().lower()] = split
    return splits


class CAMUSLayout(DatasetLayout):
    """CAMUS half sequences (2CH and 4CH) with their ground-truth sequences."""

    name = "camus"
    kind = "video"
    summary = "patientXXXX/patientXXXX_{2CH,4CH}_half_sequence[_gt].nii.gz (CAMUS NIfTI release)"
    default_label_names = CAMUS_LABELS

    def detect(self, path: str | Path) -> bool:
        folder = _patients_folder(Path(path))
        return any(_PATIENT.match(p.name) and _sequences(p) for p in visible_dirs(folder))

    def list_cases(self, path: str | Path) -> list[CaseRef]:
        root = Path(path)
        splits = read_splits(root)
        refs: list[CaseRef] = []
        for patient in visible_dirs(_patients_folder(root)):
            if not _PATIENT.match(patient.name):
                continue
            for image, match in _sequences(patient):
                name, view = match.group(1), match.group(2).upper()
                label = camus_label_path(image)
                info = read_info_cfg(patient / f"Info_{view}.cfg")
                refs.append(self.ref(
                    root, f"{name}_{view}", {"image": image, "label": label},
                    patient=name, view=view, image_quality=info.get("ImageQuality"),
                    split=splits.get(name.lower()),
                ))
        return unique_case_ids(refs, root)

    def _read(self, ref: CaseRef) -> Case:
        return read_case(ref.paths["image"], ref.paths["label"], kind="video", case_id=ref.case_id)
