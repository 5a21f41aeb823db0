"""napari sample data: the synthetic phantoms of :mod:`napari_medsam_eval.datasets.phantoms`, built in memory.

They are the cases ``scripts/make_sample_data.py`` writes to ``sample_data/``
(same generator, same seeds), made here without reading files, so File >
Open Sample works from an installed wheel as well as from a checkout.
"""
from __future__ import annotations

from ._reader import LayerData, case_to_layer_data
from .datasets.phantoms import phantom_ct_case, phantom_video_case


def phantom_ct() -> list[LayerData]:
    """CT-like phantom (windowed uint8, as in the MedSAM npz) with three labelled organs."""
    return case_to_layer_data(phantom_ct_case())


def phantom_video() -> list[LayerData]:
    """24-frame synthetic video with a moving, deforming object and its masks."""
    return case_to_layer_data(phantom_video_case())
