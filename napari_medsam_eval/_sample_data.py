"""napari sample data: the synthetic phantoms of :mod:`napari_medsam_eval.datasets.phantoms`, built in memory.

They are the cases ``scripts/make_sample_data.py`` writes to ``sample_data/``
(same generator, same seeds), made here without reading files, so File >
Open Sample works from an installed wheel as well as from a checkout.

napari calls these on its GUI thread; the imports, the phantom and napari's first-layer set-up run on a
thread meanwhile (:func:`._meanwhile.meanwhile`), so the viewer stays live and its activity
indicator says what is being built; chosen from the menu, the ground truth lands a turn after the image
(:func:`._meanwhile.in_turns`). This module imports nothing heavy itself.
"""
from __future__ import annotations

from ._reader import PLUGIN_NAME, LayerData, case_to_layer_data


def _built(kind: str) -> list[LayerData]:
    """The layer data of the ``kind`` phantom ("ct" or "video"), napari's layer kinds warmed (any thread)."""
    from ._meanwhile import warm_layer_kinds
    from .datasets.phantoms import phantom_ct_case, phantom_video_case

    layers = case_to_layer_data(phantom_ct_case() if kind == "ct" else phantom_video_case())
    warm_layer_kinds()
    return layers


def phantom_ct() -> list[LayerData]:
    """CT-like phantom (windowed uint8, as in the MedSAM npz) with three labelled organs."""
    from ._meanwhile import in_turns, meanwhile

    return in_turns(meanwhile(lambda: _built("ct"), "building the CT phantom"), sample=(PLUGIN_NAME, "phantom_ct"))


def phantom_video() -> list[LayerData]:
    """24-frame synthetic video with a moving, deforming object and its masks."""
    from ._meanwhile import in_turns, meanwhile

    return in_turns(meanwhile(lambda: _built("video"), "building the video phantom"),
                    sample=(PLUGIN_NAME, "phantom_video"))
