"""Why a result missed: its error split into named parts that add up exactly to ``1 - DSC``.

Every false-positive (FP) and false-negative (FN) voxel of a binary prediction against a
binary ground truth goes to exactly one part; a part's *share* is its voxel count over
``2 TP + FP + FN``, so the shares add up to ``(FP + FN) / (2 TP + FP + FN) = 1 - DSC``
(up to float rounding). Slices are the first axis (a volume's slices, a video's frames);
a 2D image is one slice.

=================  =================================================================
part               the voxels it holds
=================  =================================================================
``leak``           FP on slices where the ground truth is empty (past the object's
                   ends, or in a gap)
``missed_slices``  FN on slices where the prediction is empty (stopped early, skipped)
``off_target``     FP, on slices with ground truth, in a connected component of the
                   slice's prediction (8-connected in the slice) that touches none of
                   the slice's ground truth (another structure, a lost track)
``over``           the other FP (on slices with both, at the object's border)
``under``          the other FN (on slices with both)
=================  =================================================================

With the parts: the slices where each part lies (as inclusive ranges), the slice where it
is largest, the prompt slice's own DSC, and the *dominant* part (the largest share, or
``ok`` when the DSC is at least :data:`OK_DICE`). Both masks empty: no error, DSC 1 (the
metrics' empty rule), dominant ``ok``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage
from ..core.errors import InputError

#: the parts, in the order ties for the dominant part are broken
PARTS = ("leak", "missed_slices", "off_target", "over", "under")
#: one line per part (docs, tooltips, report legends)
PART_MEANINGS = {
    "leak": "false positives on slices without ground truth (past the object's ends, or in a gap)",
    "missed_slices": "false negatives on slices without prediction (stopped early, or skipped)",
    "off_target": "false positives in a piece of prediction touching no ground truth on its slice",
    "over": "the other false positives: too much at the object's border",
    "under": "the other false negatives: too little inside the object's slices",
}
#: values of :func:`part_overlay`'s map, one per part (0: no error there)
PART_VALUES = {part: value for value, part in enumerate(PARTS, start=1)}
#: the columns of a result row the parts fill (:meth:`ErrorParts.columns`)
PART_COLUMNS = tuple(f"error_{part}" for part in PARTS)
ROW_COLUMNS = (*PART_COLUMNS, "dominant_error", "prompt_slice_dice", "error_slices")
#: a result at or above this DSC is dominated by nothing: ``ok``
OK_DICE = 0.9
#: the dominant part of a result at or above :data:`OK_DICE`
OK = "ok"
#: the connectivity of a slice's pieces of prediction: 8-connected within the slice, never across slices
_IN_SLICE = np.zeros((3, 3, 3), dtype=bool)
_IN_SLICE[1] = True


@dataclass(frozen=True)
class ErrorParts:
    """One result's error split into :data:`PARTS` (see the module doc)."""

    dice: float
    #: each part's voxel count
    voxels: dict[str, int]
    #: each part's share of ``2 TP + FP + FN``: they add up to ``1 - dice``
    shares: dict[str, float]
    #: each part's slices, as inclusive (first, last) ranges
    slices: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: each part's slice with the most of its voxels (None where the part is empty)
    largest_slice: dict[str, int | None] = field(default_factory=dict)
    #: DSC on the prompt slice alone (None when no prompt slice was given)
    prompt_slice_dice: float | None = None

    @property
    def dominant(self) -> str:
        """The part with the largest share (ties in :data:`PARTS` order); ``ok`` at or above :data:`OK_DICE`."""
        if self.dice >= OK_DICE:
            return OK
        return max(PARTS, key=lambda part: (self.shares[part], -PARTS.index(part)))

    def columns(self) -> dict[str, object]:
        """The result row's columns (:data:`ROW_COLUMNS`): ``error_<part>`` shares, ``dominant_error``,
        ``prompt_slice_dice`` (NaN without a prompt slice) and ``error_slices`` (:meth:`where_json`)."""
        row: dict[str, object] = {f"error_{part}": self.shares[part] for part in PARTS}
        row["dominant_error"] = self.dominant
        row["prompt_slice_dice"] = np.nan if self.prompt_slice_dice is None else self.prompt_slice_dice
        row["error_slices"] = self.where_json()
        return row

    def where_json(self) -> str:
        """Where each non-empty part lies, as compact JSON: ``{"leak": {"largest": 9, "ranges": [[8, 10]]}}``."""
        where = {part: {"largest": self.largest_slice.get(part), "ranges": [list(r) for r in self.slices.get(part, [])]}
                 for part in PARTS if self.voxels.get(part)}
        return json.dumps(where, sort_keys=True, separators=(",", ":"))


def parse_where(text: object) -> dict[str, dict[str, object]]:
    """An ``error_slices`` cell read back ({} for a blank or an old row's missing cell)."""
    if not isinstance(text, str) or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def part_name(part: str) -> str:
    """A part's name in words: ``missed_slices`` -> ``missed slices``."""
    return part.replace("_", " ")


def ranges_text(ranges: list) -> str:
    """Inclusive slice ranges in words: ``[[2, 4], [9, 9]]`` -> ``2-4, 9``."""
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)


def parts_text(row: dict, unit: str = "slices") -> str:
    """One line saying why a row missed, from its columns: ``under 0.120 (slices 3-9), over 0.031 (...);
    dominant: under``; the empty parts left out; ``n/a`` when the row has no parts (not scored, or old)."""
    shares = {part: row.get(f"error_{part}") for part in PARTS}
    if any(not isinstance(v, (int, float)) or v != v for v in shares.values()):
        return "n/a"
    where = parse_where(row.get("error_slices"))
    said = [f"{part_name(part)} {shares[part]:.3f}"
            + (f" ({unit} {ranges_text(where[part]['ranges'])})" if where.get(part, {}).get("ranges") else "")
            for part in PARTS if shares[part] > 0]
    return f"{', '.join(said) or 'no error'}; dominant: {part_name(str(row.get('dominant_error') or 'n/a'))}"


def short_parts_text(parts: ErrorParts, most: int = 3) -> str:
    """A line that fits a narrow dock: the ``most`` largest parts' shares, the first (the dominant) marked as
    the main one (``under 0.120 (main), over 0.031``; at or above :data:`OK_DICE`, ``ok; over 0.031``), each
    part named once."""
    largest = sorted((p for p in PARTS if parts.shares[p] > 0), key=lambda p: -parts.shares[p])[:most]
    said = [f"{part_name(p)} {parts.shares[p]:.3f}" + (" (main)" if p == parts.dominant else "") for p in largest]
    if parts.dominant not in largest:  # ok (DSC >= 0.9), or no error at all
        said.insert(0, part_name(parts.dominant) + (";" if said else ""))
    return ", ".join(said).replace(";,", ";") or "no error"


def _as_slices(mask: np.ndarray) -> np.ndarray:
    array = np.asarray(mask).astype(bool, copy=False)
    if array.ndim == 2:
        return array[None]
    if array.ndim != 3:
        raise InputError(f"masks must be 2D or 3D, got {array.ndim} dimensions")
    return array


def slice_ranges(indices: np.ndarray) -> list[tuple[int, int]]:
    """Sorted slice indices as inclusive (first, last) runs: ``[2, 3, 4, 9]`` -> ``[(2, 4), (9, 9)]``."""
    if len(indices) == 0:
        return []
    breaks = np.flatnonzero(np.diff(indices) > 1)
    starts = np.concatenate([[indices[0]], indices[breaks + 1]])
    ends = np.concatenate([indices[breaks], [indices[-1]]])
    return [(int(a), int(b)) for a, b in zip(starts, ends)]


def _off_target(pred: np.ndarray, gt: np.ndarray, both: np.ndarray) -> np.ndarray:
    """FP voxels on slices with ground truth (``both``: slices holding both) in pieces touching no truth."""
    pieces, count = ndimage.label(pred & both[:, None, None], structure=_IN_SLICE)
    if count == 0:
        return np.zeros_like(pred)
    touching = np.zeros(count + 1, dtype=bool)
    touching[np.unique(pieces[pred & gt])] = True
    return ~touching[pieces] & (pieces > 0)


def part_masks(pred: np.ndarray, gt: np.ndarray) -> dict[str, np.ndarray]:
    """Each part's voxels (boolean masks of ``pred``'s shape; ``pred`` and ``gt`` boolean, slices first)."""
    pred_on = pred.reshape(len(pred), -1).any(axis=1)
    gt_on = gt.reshape(len(gt), -1).any(axis=1)
    fp, fn = pred & ~gt, gt & ~pred
    leak = fp & ~gt_on[:, None, None]
    missed = fn & ~pred_on[:, None, None]
    off = _off_target(pred, gt, pred_on & gt_on) & fp
    return {"leak": leak, "missed_slices": missed, "off_target": off,
            "over": fp & ~leak & ~off, "under": fn & ~missed}


def _slice_dice(pred: np.ndarray, gt: np.ndarray) -> float:
    total = np.count_nonzero(pred) + np.count_nonzero(gt)
    return 1.0 if total == 0 else float(2.0 * np.count_nonzero(pred & gt) / total)


def error_parts(pred: np.ndarray, gt: np.ndarray, prompt_slice: int | None = None) -> ErrorParts:
    """Split ``pred`` against ``gt`` (binary, one shape, 2D or 3D with slices on axis 0) into :data:`PARTS`."""
    p, g = _as_slices(pred), _as_slices(gt)
    if p.shape != g.shape:
        raise InputError(f"prediction shape {np.shape(pred)} differs from ground truth shape {np.shape(gt)}")
    tp = int(np.count_nonzero(p & g))
    masks = part_masks(p, g)
    per_slice = {part: np.count_nonzero(mask.reshape(len(mask), -1), axis=1) for part, mask in masks.items()}
    voxels = {part: int(counts.sum()) for part, counts in per_slice.items()}
    denominator = 2 * tp + sum(voxels.values())
    shares = {part: (count / denominator if denominator else 0.0) for part, count in voxels.items()}
    prompt_dice = None
    if prompt_slice is not None:
        if not 0 <= prompt_slice < len(p):
            raise InputError(f"prompt slice {prompt_slice} is outside the {len(p)} slices")
        prompt_dice = _slice_dice(p[prompt_slice], g[prompt_slice])
    return ErrorParts(
        dice=1.0 if denominator == 0 else 2 * tp / denominator,
        voxels=voxels,
        shares=shares,
        slices={part: slice_ranges(np.flatnonzero(counts)) for part, counts in per_slice.items()},
        largest_slice={part: (int(np.argmax(counts)) if counts.any() else None) for part, counts in per_slice.items()},
        prompt_slice_dice=prompt_dice,
    )


def part_overlay(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """A map of ``pred``'s shape holding each error voxel's part (:data:`PART_VALUES`; 0 where nothing is wrong)."""
    p, g = _as_slices(pred), _as_slices(gt)
    if p.shape != g.shape:
        raise InputError(f"prediction shape {np.shape(pred)} differs from ground truth shape {np.shape(gt)}")
    overlay = np.zeros(p.shape, dtype=np.uint8)
    for part, mask in part_masks(p, g).items():
        overlay[mask] = PART_VALUES[part]
    return overlay.reshape(np.shape(pred))
