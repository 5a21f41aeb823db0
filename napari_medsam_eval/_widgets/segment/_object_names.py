"""The Segment widget's words for objects: the labels a ground truth holds, an object's name, its region.

An object is numbered by a label value; its name comes from the ground truth's ``label_names``; it may
be a *region* of several ground-truth labels (``1,3``: the liver with the tumour inside it), written in
the object's region field (:func:`parse_region`). No Qt.
"""
from __future__ import annotations

import weakref
from typing import Any

from napari.layers import Labels

from napari_medsam_eval.core.case import present_label_values
from napari_medsam_eval.core.errors import InputError

_PRESENT: "weakref.WeakKeyDictionary[Labels, tuple[Any, list[int]]]" = weakref.WeakKeyDictionary()


def present_labels(layer: Labels | None) -> list[int]:
    """The label values (> 0) in a ground-truth layer, ascending (cached while its data are the same)."""
    if layer is None:
        return []
    cached = _PRESENT.get(layer)
    if cached is not None and cached[0] is layer.data:
        return list(cached[1])
    values = present_label_values(layer.data)
    _PRESENT[layer] = (layer.data, values)
    return values


def object_name(layer: Labels | None, value: int, labels: tuple[int, ...] | None = None) -> str:
    """The ground truth's name of label ``value`` (``label_names`` metadata), else ``label N``; for an object
    that is a region of other ``labels``, ``labels 1, 3 (liver + lesion)``."""
    names = (layer.metadata.get("label_names") or {}) if layer is not None else {}
    names = names if isinstance(names, dict) else {}
    labels = tuple(labels or (value,))
    named = [names.get(v, names.get(str(v))) for v in labels]
    if labels != (value,):
        words = f"labels {', '.join(str(v) for v in labels)}" if len(labels) > 1 else f"label {labels[0]}"
        return f"{words} ({' + '.join(str(n) for n in named)})" if all(named) else words
    return f"label {value} ({named[0]})" if named[0] else f"label {value}"


def parse_region(text: str) -> tuple[int, ...] | None:
    """The region field's label values (``"1,3"`` -> ``(1, 3)``), None when empty (the object's own label);
    a ValueError naming the field for anything else."""
    parts = [p for p in str(text or "").replace(";", ",").replace(" ", ",").split(",") if p]
    if not parts:
        return None
    if not all(p.isdigit() and int(p) > 0 for p in parts):
        raise InputError(f"region {text!r}: write the ground-truth label values it unites, e.g. 1,3 "
                         "(whole numbers above 0), or leave it empty for the object's own label")
    return tuple(sorted({int(p) for p in parts}))


__all__ = ["object_name", "parse_region", "present_labels"]
