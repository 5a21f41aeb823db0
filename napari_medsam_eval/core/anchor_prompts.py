"""Anchor prompts that are not a box or points: *absent* ("the target is not on this slice") and
*painted* (a mask the user, or the simulated user, painted on one slice).

An absent prompt (:func:`absent_prompt`) empties its slice and stops a walk there.

A clinician corrects with the brush far more often than by drawing a new box. A *painted*
prompt (:func:`painted_prompt`) carries the painted mask of one slice (full size, bool) and
``info["painted"]``; it is an anchor like a box (:mod:`..propagation.anchors`), with two differences:

* **its slice is kept exactly as painted**: the model is not asked on that slice (the walk
  takes the painted mask as the prompted slice's answer, :func:`painted_answer`), and a model
  with its own memory has its output on painted slices replaced by the paint;
* **propagation from it uses the painted mask**: a walk (LiteMedSAM and the other box-trained
  or single-slice models) prompts the next slice with the painted mask's tight box widened
  by the rules' margin, exactly as it does from a model's mask; a model that takes mask
  prompts and has a memory (MedSAM2 / SAM2) gets the painted mask itself (``add_new_mask``).

A painted slice with nothing on it says the target is absent there (the user erased it):
:func:`painted_prompt` then makes an *absent* anchor that remembers it was painted.

A foundation of the package (it needs only :mod:`.prompt`): the protocols make these prompts,
the propagation (:mod:`..propagation.anchors`, the walk) reads them. No Qt, no napari.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .prompt import Prompt
from .errors import InputError

#: prompt.info key of an anchor whose mask was painted (kept voxel for voxel)
PAINTED = "painted"
#: prompt.info key of an anchor saying the target is absent from its slice
ABSENT = "absent"


def absent_prompt(target_label: int, slice_index: int, protocol: str = "manual") -> Prompt:
    """An anchor saying the target is not on ``slice_index`` (the user erased it there)."""
    return Prompt(int(target_label), slice_index=int(slice_index), protocol=protocol, info={ABSENT: True})


def is_absent(prompt: Prompt) -> bool:
    """Whether ``prompt`` says the target is absent from its slice (erased, or painted empty)."""
    return bool(prompt.info.get(ABSENT))


def painted_prompt(target_label: int, slice_index: int, mask: np.ndarray, protocol: str = "manual",
                   **info: Any) -> Prompt:
    """An anchor whose mask is ``mask`` as painted on ``slice_index`` ; nothing painted
    there (the user erased the target) is an absent anchor that remembers it was painted."""
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise InputError(f"a painted mask is one slice (2D), got shape {tuple(mask.shape)}")
    mask = mask != 0
    details = {**info, PAINTED: True}
    if not mask.any():
        return Prompt(int(target_label), slice_index=int(slice_index), protocol=protocol, info={**details, ABSENT: True})
    return Prompt(int(target_label), slice_index=int(slice_index), mask=mask, protocol=protocol, info=details)


def is_painted(prompt: Prompt) -> bool:
    """Whether ``prompt`` is a painted slice (present or erased)."""
    return bool(prompt.info.get(PAINTED))


def check_painted_mask(mask: Any, shape_hw: tuple[int, ...]) -> np.ndarray:
    """``mask`` as a bool (H, W) array of the slice's shape, or a ValueError that says what is wrong."""
    array = np.asarray(mask)
    if array.ndim != 2:
        raise InputError(f"a painted mask is one slice (2D), got shape {tuple(array.shape)}")
    if tuple(array.shape) != tuple(int(v) for v in shape_hw):
        raise InputError(f"a painted mask of shape {tuple(array.shape)} does not fit slices of shape "
                         f"{tuple(int(v) for v in shape_hw)}")
    return array != 0 if array.dtype != bool else array.copy()


def painted_answer(prompt: Prompt, shape_hw: tuple[int, ...]) -> np.ndarray | None:
    """The prompted slice's answer when ``prompt`` is painted (its mask, checked), else None (ask the model)."""
    if not is_painted(prompt) or prompt.mask is None:
        return None
    return check_painted_mask(prompt.mask, shape_hw)


def painted_slices(anchors: dict[int, Prompt] | list[Prompt]) -> dict[int, np.ndarray]:
    """Slice -> painted mask of every present painted anchor."""
    prompts = anchors.values() if isinstance(anchors, dict) else anchors
    return {int(p.slice_index): np.asarray(p.mask, bool) for p in prompts
            if is_painted(p) and p.mask is not None and p.slice_index is not None}


__all__ = ["ABSENT", "PAINTED", "absent_prompt", "check_painted_mask", "is_absent", "is_painted", "painted_answer",
           "painted_prompt", "painted_slices"]
