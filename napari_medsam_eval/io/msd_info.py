"""What an MSD / nnU-Net ``dataset.json`` beside a case's image folder says of its modality and labels."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.targets import dataset_json_targets
from .npz_io import MODALITY_PREFIXES


def msd_dataset_info(image_path: str | Path) -> dict[str, Any]:
    """``modality``, ``label_names`` and (nnU-Net v2 regions) ``targets`` from an MSD ``dataset.json`` next to
    ``imagesTr``/``imagesTs``.

    Returns ``{}`` when there is none or it cannot be parsed: it only enriches a case.
    """
    folder = Path(image_path).parent
    if not folder.name.lower().startswith("images"):
        return {}
    try:
        info = json.loads((folder.parent / "dataset.json").read_text())
    except (OSError, ValueError):
        return {}
    result: dict[str, Any] = {}
    modality = (info.get("modality") or info.get("channel_names") or {}).get("0")
    if isinstance(modality, str):
        result["modality"] = MODALITY_PREFIXES.get(modality.lower(), modality)
    labels = info.get("labels") or {}
    names = _label_names(labels)
    if names:
        result["label_names"] = names
    try:
        targets = dataset_json_targets(labels)
    except ValueError:  # a region list this package cannot read: the labels are still named
        targets = None
    if targets:
        result["targets"] = targets
    return result


def _label_names(labels: dict) -> dict[int, str]:
    """MSD maps value -> name (``{"1": "anterior"}``); nnU-Net v2 maps name -> value."""
    names: dict[int, str] = {}
    for key, value in labels.items():
        if str(key).isdigit() and isinstance(value, str):
            names[int(key)] = value
        elif isinstance(value, int):
            names[value] = str(key)
    names.pop(0, None)
    return names
