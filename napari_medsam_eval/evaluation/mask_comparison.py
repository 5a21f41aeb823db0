"""Prediction against ground truth for one target: the TP/FP/FN map and per-slice Dice.

The failure analysis the Compare widget shows: :func:`compare_masks` gives a
TP/FP/FN map, the Dice of the whole mask and of every slice, and the slices
ranked worst first. (Run A against run B is :mod:`napari_medsam_eval.report.paired`.)

Which slice to show (the viewer goes there when a row or a pair of runs opens, or an
image is chosen): :func:`largest_error_slice`, :func:`most_different_slice` and
:func:`middle_slice`. The first two count on the slices that hold the target first,
so a prediction filling whole slices away from it does not send the view off the target.
"""
from __future__ import annotations

from dataclasses import dataclass

from typing import Sequence

import numpy as np

from .error_parts import ErrorParts, error_parts
from .metrics import compute_dice, compute_per_slice_dice
from ..core.errors import InputError

#: values of the overlay map made by :func:`compare_masks`
OVERLAY_TN, OVERLAY_TP, OVERLAY_FP, OVERLAY_FN = 0, 1, 2, 3
#: their names, for legends
OVERLAY_NAMES = {OVERLAY_TP: "TP", OVERLAY_FP: "FP", OVERLAY_FN: "FN"}


@dataclass
class Comparison:
    """A prediction against the ground truth, for one target.

    ``overlay`` holds :data:`OVERLAY_TP` / :data:`OVERLAY_FP` /
    :data:`OVERLAY_FN` (0 elsewhere); ``dice`` is
    :func:`~napari_medsam_eval.evaluation.metrics.compute_dice` of the whole mask;
    ``per_slice`` is :func:`~napari_medsam_eval.evaluation.metrics.compute_per_slice_dice`
    along the first axis (NaN where both are empty; one value for a 2D mask).
    """

    overlay: np.ndarray
    dice: float
    per_slice: np.ndarray
    counts: dict[str, int]
    #: why it missed: the error split into parts (:mod:`.error_parts`); None for other than 2D or 3D masks
    parts: ErrorParts | None = None

    def slice_dice(self, index: int) -> float:
        return float(self.per_slice[int(index)])

    def worst_slices(self) -> np.ndarray:
        """Slices where prediction or ground truth is non-empty, lowest Dice first (ties by index)."""
        valid = np.flatnonzero(~np.isnan(self.per_slice))
        order = np.lexsort((valid, self.per_slice[valid]))
        return valid[order]


def binary_target(labels: np.ndarray, target_label: int | Sequence[int] | None, *,
                  binary_fallback: bool = False) -> np.ndarray:
    """``labels == target_label``, or where ``labels`` holds any of several values (a region's
    :attr:`~napari_medsam_eval.core.targets.Target.labels`); every nonzero voxel for ``target_label`` None
    or a bool map.

    ``binary_fallback`` (for predictions): a 0/1 map without ``target_label``
    counts its 1s, so a plain binary prediction compares with any target.
    """
    labels = np.asarray(labels)
    if target_label is None or labels.dtype == bool:
        return labels.astype(bool, copy=False)
    values = [int(v) for v in target_label] if isinstance(target_label, (list, tuple)) else [int(target_label)]
    mask = labels == values[0] if len(values) == 1 else np.isin(labels, values)
    if binary_fallback and not mask.any() and labels.size and int(labels.max(initial=0)) <= 1:
        return labels != 0
    return mask


def compare_masks(pred: np.ndarray, gt: np.ndarray) -> Comparison:
    """TP/FP/FN map, whole-mask Dice and per-slice Dice of two binary masks of one shape."""
    p = np.asarray(pred).astype(bool, copy=False)
    g = np.asarray(gt).astype(bool, copy=False)
    if p.shape != g.shape:
        raise InputError(f"prediction shape {p.shape} differs from ground truth shape {g.shape}")
    overlay = np.zeros(p.shape, dtype=np.uint8)
    overlay[p & g] = OVERLAY_TP
    overlay[p & ~g] = OVERLAY_FP
    overlay[~p & g] = OVERLAY_FN
    dice = compute_dice(p, g)
    if p.ndim >= 3:
        per_slice = compute_per_slice_dice(p, g, axis=0)
    else:
        per_slice = np.array([dice if (p.any() or g.any()) else np.nan])
    counts = {name: int(np.count_nonzero(overlay == value)) for value, name in OVERLAY_NAMES.items()}
    return Comparison(overlay, dice, per_slice, counts, error_parts(p, g) if p.ndim in (2, 3) else None)


#: values of :func:`ab_overlay`'s map (two predictions of one target: run A's, run B's)
AB_NONE, AB_A_ONLY, AB_B_ONLY, AB_BOTH = 0, 1, 2, 3
#: their names, for legends
AB_NAMES = {AB_A_ONLY: "A only", AB_B_ONLY: "B only", AB_BOTH: "both"}

def ab_overlay(pred_a: np.ndarray, pred_b: np.ndarray) -> np.ndarray:
    """uint8 map: :data:`AB_A_ONLY` where only A segmented, :data:`AB_B_ONLY` only B, :data:`AB_BOTH` both."""
    a = np.asarray(pred_a).astype(bool, copy=False)
    b = np.asarray(pred_b).astype(bool, copy=False)
    if a.shape != b.shape:
        raise InputError(f"prediction A has shape {a.shape}, prediction B {b.shape}")
    return (a.astype(np.uint8) * AB_A_ONLY + b.astype(np.uint8) * AB_B_ONLY)  # 1 + 2 = 3 = both


def middle_slice(mask: np.ndarray) -> int | None:
    """The middle one (the median) of the slices (first axis) holding ``mask``; None when it is empty or 2D."""
    mask = np.asarray(mask)
    if mask.ndim < 3:
        return None
    held = np.flatnonzero(mask.reshape(mask.shape[0], -1).any(axis=1))
    return int(held[len(held) // 2]) if held.size else None


def _slice_of_most(counts: np.ndarray, truth: np.ndarray | None) -> int | None:
    """The slice with the largest of ``counts`` (None when all are 0): among the slices holding ``truth``
    when any count there is above 0, else among all; ties go to the one nearest the truth's
    :func:`middle_slice` (without a truth: the first)."""
    middle = None if truth is None else middle_slice(truth)
    if middle is not None:
        held = truth.reshape(truth.shape[0], -1).any(axis=1)
        within = np.where(held, counts, 0)
        if within.any():
            counts = within
    if not counts.any():
        return None
    ties = np.flatnonzero(counts == counts.max())
    return int(ties[0] if middle is None else ties[np.argmin(np.abs(ties - middle))])


def _binary_pair(first: np.ndarray, second: np.ndarray, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(first).astype(bool, copy=False)
    b = np.asarray(second).astype(bool, copy=False)
    if a.shape != b.shape:
        raise InputError(f"{names[0]} has shape {a.shape}, {names[1]} {b.shape}")
    return a, b


def most_different_slice(pred_a: np.ndarray, pred_b: np.ndarray, truth: np.ndarray | None = None) -> int | None:
    """The slice (first axis) with the most voxels in exactly one of A and B.

    With the target's ground truth ``truth``: among the slices holding the
    target when A and B differ on any of them, ties nearest its middle slice;
    without: the first of ties. Where A and B agree everywhere: the slice with
    the most foreground of either; None when both are empty or the masks are 2D.
    """
    a, b = _binary_pair(pred_a, pred_b, ("prediction A", "prediction B"))
    if a.ndim < 3:
        return None
    t = None if truth is None else _binary_pair(truth, a, ("the ground truth", "the predictions"))[0]
    axes = tuple(range(1, a.ndim))
    for counts in ((a ^ b).sum(axis=axes), (a | b).sum(axis=axes)):
        found = _slice_of_most(counts, t)
        if found is not None:
            return found
    return None


def largest_error_slice(pred: np.ndarray, truth: np.ndarray) -> int | None:
    """The slice (first axis) with the most FP + FN voxels of ``pred`` against ``truth`` (one target).

    Among the slices holding the target when there is an error on any of them
    (else among all), ties nearest the target's middle slice; without any
    error, the target's :func:`middle_slice` (the prediction's when the truth is
    empty); None for 2D masks or both empty.
    """
    p, g = _binary_pair(pred, truth, ("prediction", "ground truth"))
    if p.ndim < 3:
        return None
    found = _slice_of_most((p ^ g).sum(axis=tuple(range(1, p.ndim))), g)
    if found is not None:
        return found
    middle = middle_slice(g)
    return middle if middle is not None else middle_slice(p)


__all__ = [
    "AB_A_ONLY",
    "AB_BOTH",
    "AB_B_ONLY",
    "AB_NAMES",
    "AB_NONE",
    "Comparison",
    "OVERLAY_FN",
    "OVERLAY_FP",
    "OVERLAY_NAMES",
    "OVERLAY_TN",
    "OVERLAY_TP",
    "binary_target",
    "ab_overlay",
    "compare_masks",
    "largest_error_slice",
    "middle_slice",
    "most_different_slice",
]
