"""The view follows the work: the image worked on, in view, on the slice that matters.

:func:`bring_into_view` shows one image: it is made visible, the other images and the
layers that go with them are hidden (so none is drawn over it), the camera fits it and the
dims go to one of its slices, through the image's own transform (:func:`._layers.go_to_index`
works in world coordinates, so scale and translate are respected). Choosing an image in the
Segment widget, opening a benchmark row and opening a pair of runs call it; which slice is
decided in the core (:func:`~napari_medsam_eval.evaluation.mask_comparison.largest_error_slice`,
:func:`~napari_medsam_eval.evaluation.mask_comparison.most_different_slice`,
:func:`~napari_medsam_eval.evaluation.mask_comparison.middle_slice`).

A layer goes with an image when its ``metadata['image']`` names it (prompt layers,
predictions) or its name is the image's name and more (``<image> ground truth``); the
others are left as they are. Layers hidden here come back when their image is shown again.
"""
from __future__ import annotations

import weakref
from typing import Any, Iterable

from napari.layers import Image, Layer

from napari_medsam_eval._widgets.common._layers import go_to_index

#: the layers :func:`bring_into_view` hid (shown again when their image is brought into view)
_HIDDEN: "weakref.WeakSet[Layer]" = weakref.WeakSet()


def owner(layer: Layer, images: Iterable[str]) -> str | None:
    """The name of the image ``layer`` goes with (among ``images``), else None; an image goes with itself."""
    names = set(images)
    meta = layer.metadata if isinstance(layer.metadata, dict) else {}
    if isinstance(meta.get("image"), str) and meta["image"] in names:
        return meta["image"]
    if isinstance(layer, Image):
        return layer.name
    prefixes = [name for name in names if layer.name.startswith(f"{name} ")]
    return max(prefixes, key=len) if prefixes else None


def bring_into_view(viewer: Any, image: Image, index: int | None, keep: Iterable[Layer | None] = ()) -> None:
    """Show ``image`` on slice ``index`` (None: the dims stay), the camera fitted to it; hide the other
    images and what goes with them, except ``keep`` (the layers in use with ``image``)."""
    kept = {id(layer) for layer in keep if layer is not None} | {id(image)}
    names = [layer.name for layer in viewer.layers if isinstance(layer, Image)]
    for layer in list(viewer.layers):
        mine = id(layer) in kept or owner(layer, names) == image.name
        if mine and (layer is image or layer in _HIDDEN):
            _HIDDEN.discard(layer)
            layer.visible = True
        elif not mine and owner(layer, names) is not None and layer.visible:
            layer.visible = False
            _HIDDEN.add(layer)
    if index is not None:
        go_to_index(viewer, image, int(index))
    try:
        viewer.reset_view(layers=[image])
    except TypeError:  # napari before reset_view(layers=...): fit every layer
        viewer.reset_view()


__all__ = ["bring_into_view", "owner"]
