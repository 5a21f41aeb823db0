"""napari reader: any file or folder the core reads, as image (+ ground-truth labels) layers.

Thin: :func:`napari_medsam_eval.io.read_case` does the work; this module only
turns a Case into napari layer data with ``scale`` from the spacing. It
returns None (never raises) for paths it cannot read, as npe2 expects.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .case import Case
from .errors import MedsamEvalError
from .io import detect_format, read_case

LayerData = tuple[Any, dict[str, Any], str]


def case_to_layer_data(case: Case) -> list[LayerData]:
    """Image layer (and Labels layer when the case has ground truth) for napari."""
    scale = list(case.spacing.values)
    image_kwargs = {"name": case.case_id, "scale": scale, "rgb": case.has_channels,
                    "metadata": {"case_id": case.case_id, "kind": case.kind, "modality": case.modality}}
    layers: list[LayerData] = [(case.image, image_kwargs, "image")]
    if case.label is not None:
        layers.append((case.label, {"name": f"{case.case_id} ground truth", "scale": scale,
                                    "metadata": {"label_names": case.label_names, "role": "ground_truth"}}, "labels"))
    return layers


def napari_get_reader(path: str | list[str]) -> Callable[[str], list[LayerData]] | None:
    """Return a reader for ``path`` when the core knows its format, else None."""
    if isinstance(path, list):
        if len(path) != 1:
            return None
        path = path[0]
    try:
        detect_format(Path(path))
    except (MedsamEvalError, OSError):
        return None
    return read_layers


def read_layers(path: str | list[str]) -> list[LayerData]:
    if isinstance(path, list):
        path = path[0]
    return case_to_layer_data(read_case(path))
