"""napari sample data: the synthetic cases in ``sample_data/`` (made by scripts/make_sample_data.py)."""
from __future__ import annotations

from pathlib import Path

from ._reader import LayerData, case_to_layer_data
from .io import read_case

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_data"


def _sample(*parts: str) -> Path:
    path = SAMPLE_DIR.joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(f"{path}: sample data missing; run scripts/make_sample_data.py")
    return path


def phantom_ct() -> list[LayerData]:
    """CT-like phantom (windowed uint8, MedSAM npz) with three labelled organs."""
    return case_to_layer_data(read_case(_sample("CT_phantom_abdomen.npz")))


def phantom_video() -> list[LayerData]:
    """24-frame synthetic video with a moving, deforming object and its masks."""
    return case_to_layer_data(read_case(_sample("phantom_video", "Frame", "clip01"), _sample("phantom_video", "GT", "clip01")))
