"""What a protocol asks to be done to a propagated mask, and how a native propagation is seeded.

MedSAM2's scripts differ in two steps around the model (github.com/bowang-lab/MedSAM2 at
332f30d): ``medsam2_infer_3D_CT.py`` keeps only the largest 3D connected component of the
merged forward + reverse result (``getLargestCC``: ``skimage.measure.label`` with its default,
full connectivity, i.e. 26-connected in 3D); ``medsam2_infer_CT_lesion_npz_recist.py`` seeds
both passes with the mask the box gives on the key slice (``add_new_mask``) and keeps every
component. A protocol writes its choice into the prompt's ``info`` under the keys below, so the
choice travels with the prompt (and is recorded with it) to whatever segments it: the
benchmark, ``medsam-eval segment``, the session.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from .errors import InputError

#: prompt.info key: keep only the largest connected component of a propagated volume
LARGEST_COMPONENT = "largest_component"
#: prompt.info key: what seeds a native (memory) propagation, one of :data:`SEEDS`
SEED = "native_seed"
#: "box": the prompt itself on the key slice; "mask": the mask that prompt gives there
SEEDS = ("box", "mask")


def wants_largest_component(info: dict[str, Any]) -> bool:
    """Whether a prompt's ``info`` asks for the largest-component step."""
    return bool(info.get(LARGEST_COMPONENT, False))


def seed_of(info: dict[str, Any]) -> str:
    """A prompt's native-propagation seed (``"box"`` when not set); ValueError for an unknown one."""
    seed = info.get(SEED, "box")
    if seed not in SEEDS:
        raise InputError(f"prompt info {SEED!r} must be one of {SEEDS}, got {seed!r}")
    return seed


def largest_component(mask: np.ndarray) -> np.ndarray:
    """The largest connected component of a bool mask, full connectivity (26 in 3D, 8 in 2D).

    As MedSAM2's ``getLargestCC``: components are numbered in raster order and, when two are
    equally large, the first one is kept. An empty mask is returned as it is.
    """
    from scipy import ndimage

    mask = np.asarray(mask, dtype=bool)
    if not mask.any():
        return mask
    # in the mask's bounding box (the same components, in the same raster order): a small object's step
    # costs its box, not the volume (thousands of lesions, each propagated on its own)
    box = _bounding_box(mask)
    labels, count = ndimage.label(mask[box], structure=np.ones((3,) * mask.ndim, dtype=bool))
    if count == 1:
        return mask
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    kept = np.zeros_like(mask)
    kept[box] = labels == int(np.argmax(sizes))
    return kept


def _bounding_box(mask: np.ndarray) -> tuple[slice, ...]:
    """The smallest box holding a non-empty bool mask: its first axis found on the whole mask (contiguous,
    fast), the others on those slices only."""
    def span(hit: np.ndarray) -> slice:
        return slice(int(np.argmax(hit)), len(hit) - int(np.argmax(hit[::-1])))
    first = span(mask.reshape(mask.shape[0], -1).any(axis=1))
    inner = mask[first]
    return (first,) + tuple(span(inner.any(axis=tuple(a for a in range(mask.ndim) if a != axis)))
                            for axis in range(1, mask.ndim))
