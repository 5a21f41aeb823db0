"""Layers the docks take out of the viewer, without napari's full garbage collection at each removal.

napari collects garbage in full whenever a layer is removed (``VispyCanvas._clean_and_update_scenegraph``:
a fix for a Windows OpenGL driver fault, so that the layer's GPU resources go at once). With napari, our docks
and their libraries loaded that collection walks some 360,000 objects: 170-200 ms of frozen viewer on this
machine each time a dock replaces a row's or a comparison's layers (``benchmarks/responsiveness.py``, the first
pair of two runs). :func:`remove_layers` removes layers with the objects that existed before set aside from
that collection (``gc.freeze`` for the length of the removal, ``gc.unfreeze`` after): it still frees what the
removal itself left behind, and the removed layers' own cycles go at Python's next full collection. On
Windows napari's immediate collection is kept, as its fix asks.
"""
from __future__ import annotations

import gc
import sys
from contextlib import contextmanager
from typing import Any, Iterable, Iterator


@contextmanager
def _only_new_objects_collected() -> Iterator[None]:
    if sys.platform == "win32":
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def remove_layers(viewer: Any, layers: Iterable[Any]) -> None:
    """Take ``layers`` (those still in ``viewer``) out of ``viewer`` in one batched update."""
    present = [layer for layer in layers if layer in viewer.layers]
    if not present:
        return
    with _only_new_objects_collected(), viewer.layers.batched_update():
        for layer in present:
            viewer.layers.remove(layer)


__all__ = ["remove_layers"]
