"""Dataset-scale figures: checked on a small subset by ``make test``, at the docs' scale by ``make reproduce``.

A figure test is parametrised by :func:`scales`: its small scale runs in ``make test``
(the behaviour it guards, on a few cases chosen to cover what broke before); its
full scale carries the ``reproduce`` mark, which ``make test`` deselects and
``make reproduce`` selects. At the full scale the test checks each figure with
the ``figure`` fixture (conftest.py) against :data:`STATED`: the value one page of
the docs states, in the line the entry names (``tests/test_docs.py`` checks that
the line says it). The run prints every figure beside its stated value at the
end, and a figure that misses fails its test.

A stated value is written as the docs write it ("0.869", "40"): a measured number
matches when it rounds to the stated one at the stated number of decimals. A row of
a table ("0.802 | 0.806 | 0.821") is matched by a sequence of numbers, each in turn.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
#: what make reproduce selects and make test leaves out
REPRODUCE = pytest.mark.reproduce


def scales(name: str, small, full, *, small_id: str, full_id: str):
    """Parametrise a test's ``name`` argument: ``small`` for make test, ``full`` (marked reproduce) for make reproduce."""
    return pytest.mark.parametrize(name, [pytest.param(small, id=small_id),
                                          pytest.param(full, id=full_id, marks=[REPRODUCE, pytest.mark.slow])])


@dataclass(frozen=True)
class Stated:
    """One figure as a docs page states it: the page, a fragment of the line it is in, the value as written."""

    what: str
    page: str
    line: str
    text: str

    @property
    def decimals(self) -> int:
        first = self.text.split(" | ")[0]
        return len(first.split(".")[1]) if "." in first else 0

    def written(self, measured: float | list[float]) -> str:
        """``measured`` written as the docs write this figure (at its decimals; a row joined by `` | ``)."""
        values = measured if isinstance(measured, (list, tuple)) else [measured]
        return " | ".join(f"{float(value):.{self.decimals}f}" for value in values)

    def matches(self, measured: float | list[float]) -> bool:
        """``measured`` written at the stated number of decimals is the stated text."""
        return self.written(measured) == self.text

    def stated_in(self) -> bool:
        """A line of the page holds both the fragment and the value."""
        lines = (DOCS / self.page).read_text().splitlines()
        return any(self.line in line and self.text in line for line in lines)


#: every figure make reproduce checks, by key
STATED: dict[str, Stated] = {
    "kidney": Stated("CT phantom kidney DSC (make demo's box, default rules)", "propagation.md",
                     "| `make demo` phantom kidney | 0.599 |", "0.869"),
    "video_phantom": Stated("video phantom DSC (make demo's run)", "propagation.md",
                            "| `make demo` phantom video | 0.820 |", "0.970"),
    "deeplesion_lesions_found": Stated("DeepLesion 6 cases, lesions found (IoU > 0.5)", "targets.md",
                                       "| deeplesion_ct_npz, 6 cases, LiteMedSAM | 6 |", "5"),
    "deeplesion_lesion_f1": Stated("DeepLesion 6 cases, detection F1", "targets.md",
                                   "| deeplesion_ct_npz, 6 cases, LiteMedSAM | 6 |", "0.833"),
    "deeplesion_median": Stated("DeepLesion 6 cases, median DSC", "propagation.md",
                                "| deeplesion_ct_npz, 6 cases (median; 000001) |", "0.803"),
    "deeplesion_000001": Stated("DeepLesion CT_Lesion_000001 DSC", "propagation.md",
                                "| deeplesion_ct_npz, 6 cases (median; 000001) |", "0.890"),
    "hippocampus20_anterior": Stated("hippocampus first 20, anterior median DSC", "propagation.md",
                                     "| hippocampus_mri, first 20 (anterior / posterior) |", "0.447"),
    "hippocampus20_posterior": Stated("hippocampus first 20, posterior median DSC", "propagation.md",
                                      "| hippocampus_mri, first 20 (anterior / posterior) |", "0.300"),
    "colonoscopy_median": Stated("CVC-ClinicDB 10 clips, median DSC", "propagation.md",
                                 "| cvc_clinicdb_video, 10 clips |", "0.735"),
    "corrections_box": Stated("DeepLesion corrections protocol (box), median DSC after 0..5 corrections",
                              "corrections.md", "| deeplesion_ct_npz/lesion | box | 6 |",
                              "0.802 | 0.806 | 0.821 | 0.834 | 0.842 | 0.841"),
    "corrections_paint": Stated("DeepLesion corrections protocol (paint), median DSC after 0..5 corrections",
                                "corrections.md", "| deeplesion_ct_npz/lesion | paint | 6 |",
                                "0.802 | 0.835 | 0.869 | 0.905 | 0.931 | 0.956"),
    "precision_deeplesion_bf16": Stated("DeepLesion 6 cases at bf16, median DSC", "precision.md",
                                        "| | bf16 | 0.8000 | 0.0021 |", "0.8000"),
    "precision_deeplesion_int8": Stated("DeepLesion 6 cases at int8 (v2, bf16 rest), median DSC", "precision.md",
                                        "| | int8 v2 | 0.8006 | 0.0107 |", "0.8006"),
    "cvpr25_deeplesion_dsc_auc": Stated("DeepLesion 6 cases, cvpr25-interactive with LiteMedSAM, mean DSC-AUC",
                                        "protocols.md", "cvpr25-interactive`, all 6 cases): DSC-AUC", "3.082"),
    "cvpr25_deeplesion_final_dsc": Stated("DeepLesion 6 cases, cvpr25-interactive with LiteMedSAM, mean final DSC",
                                          "protocols.md", "cvpr25-interactive`, all 6 cases): DSC-AUC", "0.768"),
    "explain_deeplesion_extent": Stated("DeepLesion 6 cases explained, median DSC with the true extent",
                                        "propagation.md", "| deeplesion_ct_npz/lesion | 6 | 0.803 | 0.915 |", "0.806"),
    "explain_deeplesion_box": Stated("DeepLesion 6 cases explained, median DSC with the true box on every slice",
                                     "propagation.md", "| deeplesion_ct_npz/lesion | 6 | 0.803 | 0.915 |", "0.849"),
    "official_pairs": Stated("official-script mode, hippocampus first 20: (case, label) pairs equal to the script",
                             "propagation.md", "| official-script mode, hippocampus first 20", "40"),
}


def stated(key: str) -> Stated:
    return STATED[key]


def subset(source: Path, dest: Path, names: list[str], frames: int | None = None) -> Path:
    """A copy of the dataset folder ``source`` in ``dest`` holding only the cases ``names``, in its layout:
    MSD (``imagesTr``/``labelsTr``, ``dataset.json``), frame folders (``Frame``/``GT``; only the first ``frames``
    frames of each clip where given) or flat ``.npz`` files."""
    root = dest / source.name
    root.mkdir(parents=True)
    if (source / "imagesTr").is_dir():
        shutil.copy(source / "dataset.json", root)
        for folder in ("imagesTr", "labelsTr"):
            (root / folder).mkdir()
            for name in names:
                shutil.copy(source / folder / f"{name}.nii.gz", root / folder)
    elif (source / "Frame").is_dir():
        for folder in ("Frame", "GT"):
            for name in names:
                (root / folder / name).mkdir(parents=True)
                for frame in sorted((source / folder / name).iterdir())[:frames]:
                    shutil.copy(frame, root / folder / name)
    else:
        for name in names:
            shutil.copy(source / f"{name}.npz", root)
    return root
