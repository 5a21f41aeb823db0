"""Paint to correct in the Segment widget: the brush on the prediction layer as a correction.

A clinician corrects with the brush: on the image's prediction layer (:mod:`._prediction_layer`)
they paint (label value = the object's) or erase on the slice that went wrong, then press
*Correct slice*. The widget compares that slice of the object with the object's last
attempt (what the widget itself wrote there); a difference is the user's edit and becomes a
**painted anchor** (:func:`napari_medsam_eval.propagation.anchors.painted_prompt`): the slice
is kept exactly as painted and the propagation from it starts from the painted mask (its box
for LiteMedSAM; the mask itself for MedSAM2 / SAM2). A painted edit on the slice on screen
wins over a box or points drawn there. Without an earlier attempt of that object, what is
painted on the slice starts the segmentation (it is propagated). *Undo* puts back the object
before the correction, paint included, and drops the painted anchor; the anchor list shows
``slice k: painted (N pixels)``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from napari.layers import Image, Labels

from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.core.anchor_prompts import painted_prompt
from napari_medsam_eval.session.attempts import AttemptHistory
from napari_medsam_eval._widgets.common._layers import find_layer, spatial_shape
from napari_medsam_eval._widgets.common._object_masks import compose, stored_masks
from napari_medsam_eval._widgets.segment._prediction_layer import prediction_layer_name


def painted_anchor(viewer: Any, image: Image, index: int | None, target: int, history: AttemptHistory
                   ) -> Prompt | None:
    """The edit painted on slice ``index`` of ``image``'s prediction layer for object ``target``, as a
    painted anchor; None when that slice is as the widget last wrote it (its last attempt in ``history``)
    or there is no layer."""
    if index is None:  # a 2D image has no anchors
        return None
    layer = find_layer(viewer, prediction_layer_name(image.name), Labels, spatial_shape(image))
    if layer is None:
        return None
    masks = stored_masks(layer)
    now = np.asarray(layer.data[index])
    if masks is None:  # a layer that keeps no masks: its values are its objects
        return _edited_values(now == target, image, index, target, history, layer.data.shape)
    drawn = compose(masks, tuple(layer.data.shape), now.dtype, index)
    own = masks[target][index] if target in masks else np.zeros(now.shape, dtype=bool)
    edited = now != drawn
    painted = (own | (edited & (now == target))) & ~(edited & (drawn == target))
    if not edited.any() or np.array_equal(painted, own):
        return None
    return painted_prompt(target, index, painted, protocol="manual")


def _edited_values(now: np.ndarray, image: Image, index: int, target: int, history: AttemptHistory,
                   shape: tuple[int, ...]) -> Prompt | None:
    """The edit of a layer that keeps no masks: slice ``index`` of ``target`` against its last attempt."""
    last = history.last(image.name, target)
    before = last.mask[index] if last is not None and tuple(last.shape) == tuple(shape) else None
    if before is None and not now.any():
        return None
    if before is not None and np.array_equal(now, before):
        return None
    return painted_prompt(target, index, now, protocol="manual")


__all__ = ["painted_anchor"]
