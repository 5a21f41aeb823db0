"""Layers a dock no longer uses: removed in one batch, or kept hidden and empty for the next view to reuse.

napari collects garbage in full whenever layers are removed (``VispyCanvas._clean_and_update_scenegraph``, a
fix for a Windows OpenGL driver fault: the layers' GPU resources go at once). With napari, our docks and their
libraries loaded that walks some 360,000 objects: 170-230 ms of frozen viewer on this machine for each batch of
removals. So a dock removes layers in one batch (:func:`remove_layers`), and where the next view will want a
layer of the same role again (an opened row's "why" or prompt layer when a pair of two runs is opened in its
place) it retires it instead (:func:`retire_layers`): hidden, emptied (nothing of the last case shows, even if
made visible) and named for what it held; the next row fills it again.

Setting the objects that existed before aside for napari's collection (``gc.freeze``) was tried and dropped:
the collector then took the few objects left as its long-lived total and ran a full collection of everything
again a moment later, wherever the user was.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

#: metadata key of a retired layer (its role then, where it had one: other docks no longer see it)
RETIRED_KEY = "retired"
#: what a retired layer held, in the docks' words, by its role (others: the role with spaces)
HELD_WORDS = {"error_parts": "why", "overlay": "TP/FP/FN", "ab_overlay": "A vs B", "prediction_b": "prediction B",
              "prompt_boxes": "prompt box", "prompt_points": "prompt points"}


def remove_layers(viewer: Any, layers: Iterable[Any]) -> None:
    """Take ``layers`` (those still in ``viewer``) out of ``viewer`` in one batched update."""
    present = [layer for layer in layers if layer in viewer.layers]
    if not present:
        return
    with viewer.layers.batched_update():
        for layer in present:
            viewer.layers.remove(layer)


def retire_layers(layers: Iterable[Any], label: str) -> None:
    """Hide and empty ``layers``, named "unused: <what it held>", their role set aside (``label``: the metadata
    key naming what each held, e.g. an opened row's role); a retired layer is left as it is."""
    for layer in layers:
        if layer.metadata.get(RETIRED_KEY) is not None:
            continue
        role = str(layer.metadata.get(label, "layer"))
        held = HELD_WORDS.get(role, role.replace("_", " "))
        layer.metadata[RETIRED_KEY] = layer.metadata.pop("role", role)
        layer.visible = False
        layer.data = _empty(layer)
        layer.name = f"unused: {held}"


def _empty(layer: Any) -> Any:
    kind = type(layer).__name__
    if kind == "Shapes":
        return []
    if kind == "Points":
        return np.empty((0, layer.ndim))
    return np.zeros((1,) * layer.ndim, dtype=np.asarray(layer.data).dtype)


__all__ = ["HELD_WORDS", "RETIRED_KEY", "remove_layers", "retire_layers"]
