"""The cheaper precision a first-look test uses: what this CPU computes, so the suite passes on every machine.

bf16 where OpenVINO's CPU plugin computes bf16 (AVX-512 BF16 or AMX); elsewhere bf16 is refused (it would
run fp32 under a bf16 label), and int8 is used instead, calibrated on the 5 SAM-Med2D CT slices (a quick
quantization, and a set no first-look test evaluates).
"""
from __future__ import annotations

from pathlib import Path

from napari_medsam_eval.models.litemedsam_precision import CALIBRATION_ENV, cpu_has_bf16


def cheaper_precision(shared_data: Path) -> dict[str, str]:
    """LiteMedSAM's model options for the cheaper precision here."""
    if cpu_has_bf16():
        return {"precision": "bf16"}
    return {"precision": "int8", "calibration": str(shared_data / "sammed2d_ct_2d")}


def use_cheaper_precision(shared_data: Path, monkeypatch) -> str:
    """The cheaper precision's name, with its calibration set where a GUI builds it (``$MEDSAM_EVAL_CALIBRATION``)."""
    options = cheaper_precision(shared_data)
    if "calibration" in options:
        monkeypatch.setenv(CALIBRATION_ENV, options["calibration"])
    return options["precision"]
