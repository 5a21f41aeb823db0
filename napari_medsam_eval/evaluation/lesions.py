"""Lesion by lesion: predicted and true connected components matched, each lesion scored, lesions counted.

A target taken lesion by lesion (:class:`~napari_medsam_eval.core.targets.Target` ``lesions``) is judged
as lesion tasks are (Panoptica; Metrics Reloaded's instance metrics; autoPET's false-positive and
false-negative volumes), besides its DSC over the whole case:

* **Lesions** are the connected components of the target's mask, in the ground truth and in the
  prediction, with full connectivity (26 neighbours in 3D, 8 in 2D; a video's components run across
  frames). Components are numbered in scan order (``scipy.ndimage.label``).
* **Instances** (a target ``NAME=instances`` or ``NAME=V,...:instances``; ``instances=True`` here): the
  lesions are an instance map's values one by one, on both sides: each value is one lesion numbered by its
  value, whatever its connectivity, so touching objects stay apart (Panoptica's instance pairs).
* **Memory**: every lesion is scored in its bounding box (``scipy.ndimage.find_objects``), so the work
  holds the case's label maps and one lesion's crop, never a full-size mask per lesion.
* **Matching** (:class:`LesionRule` ``match``), both as the field defines them:

  - ``"iou"`` (default; Panoptica's naive threshold matching, Metrics Reloaded's "IoU > 0.5" localisation
    with greedy assignment): a true and a predicted lesion match when their IoU is above ``threshold``
    (0.5), one to one, highest IoU first. A lesion the prediction split in two halves, or two lesions it
    merged into one, then usually match nothing: each half (or the merged blob) is a false positive and
    the lesion(s) missed.
  - ``"overlap"`` (BraTS 2023's and autoPET's lesion-wise rule): a true lesion is found when any predicted
    lesion touches it; its DSC is against every predicted lesion touching it; a predicted lesion touching no
    true lesion is a false positive. A split lesion is found once; merged lesions are each found.

* **Counts**: true positives (lesions found), false negatives (missed), false positives (predicted lesions
  matching none); detection F1 ``2 TP / (2 TP + FP + FN)`` (1.0 when there is no lesion and none is
  predicted); lesion DSC: the mean over true lesions of each one's DSC (0 for a missed one).
* **Size** (:class:`LesionRule` ``small_ml`` / ``large_ml``): volumes only, in mL (voxel count x voxel
  volume): small below 1 mL (a sphere about 12 mm across), large from 10 mL (about 27 mm across), medium
  between; recall by size is the share of each size's true lesions found. A video or 2D image has no
  volume: its lesions have no size class (``""``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from array import array
from typing import Any, Callable, Sequence

import numpy as np
from scipy import ndimage
from ..core.errors import InputError
from ..core.reprs import number_words, one_line
from .lesion_maps import components, instance_numbers, lesion_labels

#: the matching rules (:class:`LesionRule` ``match``)
MATCH_RULES = ("iou", "overlap")
#: the size classes, smallest first
SIZES = ("small", "medium", "large")
#: a lesion's status: a true lesion is found or missed, a predicted one matched or a false positive
FOUND, MISSED, MATCHED, FALSE_POSITIVE = "found", "missed", "matched", "false positive"


@dataclass(frozen=True)
class LesionRule:
    """How lesions are matched and sized (the module doc states each rule)."""

    match: str = "iou"
    threshold: float = 0.5
    small_ml: float = 1.0
    large_ml: float = 10.0

    def __post_init__(self) -> None:
        if self.match not in MATCH_RULES:
            raise InputError(f"lesion match must be one of {list(MATCH_RULES)}, got {self.match!r}")
        if not 0.0 <= float(self.threshold) < 1.0:
            raise InputError(f"lesion IoU threshold must be in [0, 1), got {self.threshold!r}")
        if not 0.0 < float(self.small_ml) <= float(self.large_ml):
            raise InputError(f"lesion sizes need 0 < small_ml <= large_ml, got {self.small_ml!r} and {self.large_ml!r}")

    def size_of(self, volume_ml: float | None) -> str:
        """``small`` / ``medium`` / ``large`` for a volume in mL; ``""`` without one (a video, a 2D image)."""
        if volume_ml is None:
            return ""
        return SIZES[0] if volume_ml < self.small_ml else SIZES[2] if volume_ml >= self.large_ml else SIZES[1]

    def describe(self) -> str:
        """The rule in one line, for reports."""
        how = (f"one to one where IoU > {self.threshold:g} (highest first)" if self.match == "iou"
               else "a true lesion is found when any predicted lesion touches it")
        return (f"Lesions are connected components (full connectivity), matched {how}; small < {self.small_ml:g} mL, "
                f"large >= {self.large_ml:g} mL")


@dataclass(slots=True)
class Lesion:
    """One true or predicted lesion: its number, status, size and DSC against its match (slots: a case may
    hold tens of thousands)."""

    source: str  # "true" or "predicted"
    number: int
    status: str
    voxels: int
    volume_ml: float | None
    size: str
    dice: float
    iou: float
    first_slice: int | None
    last_slice: int | None
    #: the slice (frame) where it is largest: where to look at it
    largest_slice: int | None
    #: the numbers of the lesions of the other side it matched
    matched: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in _LESION_FIELDS}
        out["matched"] = list(self.matched)
        out["dice"] = None if not np.isfinite(self.dice) else round(float(self.dice), 4)
        out["iou"] = None if not np.isfinite(self.iou) else round(float(self.iou), 4)
        if self.volume_ml is not None:
            out["volume_ml"] = round(float(self.volume_ml), 4)
        return out


_LESION_FIELDS = tuple(f.name for f in fields(Lesion))


def lesion_json(lesion: Lesion | dict[str, Any]) -> str:
    """One lesion as a results row's ``lesions`` list holds it (sorted keys, no spaces: the row's JSON)."""
    return json.dumps(lesion.to_dict() if isinstance(lesion, Lesion) else lesion, sort_keys=True,
                      separators=(",", ":"))


@dataclass
class LesionTally:
    """The counts of lesions scored and given away (:func:`match_lesions` with ``each``): what a
    :class:`LesionResult` reports without holding tens of thousands of lesions."""

    true: int = 0
    found: int = 0
    missed: int = 0
    false_positives: int = 0
    #: each true lesion's DSC, in order (8 bytes a lesion: the mean as ``np.mean`` of the list takes it)
    true_dice: array = field(default_factory=lambda: array("d"))
    #: true lesions and found ones by size class
    sized: dict[str, list[int]] = field(default_factory=dict)

    def add(self, lesion: Lesion) -> None:
        if lesion.source == "true":
            self.true += 1
            self.found += lesion.status == FOUND
            self.missed += lesion.status == MISSED
            self.true_dice.append(float(lesion.dice))
            counts = self.sized.setdefault(lesion.size, [0, 0])
            counts[0] += 1
            counts[1] += lesion.status == FOUND
        self.false_positives += lesion.status == FALSE_POSITIVE

    @classmethod
    def of(cls, lesions: list[Lesion]) -> "LesionTally":
        tally = cls()
        for lesion in lesions:
            tally.add(lesion)
        return tally


@dataclass
class LesionResult:
    """Every lesion of both sides and the counts (:meth:`columns` gives a row's lesion columns); with a
    ``tally`` the lesions were given away as they were scored (``lesions`` is empty) and it holds the counts."""

    lesions: list[Lesion]
    rule: LesionRule
    tally: LesionTally | None = None

    def _counts(self) -> LesionTally:
        return self.tally if self.tally is not None else LesionTally.of(self.lesions)

    @property
    def true_lesions(self) -> list[Lesion]:
        return [l for l in self.lesions if l.source == "true"]

    @property
    def true_count(self) -> int:
        return self._counts().true

    @property
    def found(self) -> int:
        return self._counts().found

    @property
    def missed(self) -> int:
        return self._counts().missed

    @property
    def false_positives(self) -> int:
        return self._counts().false_positives

    @property
    def f1(self) -> float:
        tp, fp, fn = self.found, self.false_positives, self.missed
        return 1.0 if tp + fp + fn == 0 else 2.0 * tp / (2.0 * tp + fp + fn)

    @property
    def mean_dice(self) -> float:
        dice = self._counts().true_dice
        return float(np.mean(np.frombuffer(dice, dtype=np.float64))) if len(dice) else float("nan")

    def __repr__(self) -> str:
        """One line: the counts, F1, the mean lesion DSC and the rule (``details()``: every lesion)."""
        rule = f"{self.rule.match} {self.rule.threshold:g}" if self.rule.match == "iou" else self.rule.match
        return one_line("LesionResult", [f"{self.found} found", f"{self.missed} missed",
                                         f"{self.false_positives} false positive{'s' * (self.false_positives != 1)}"],
                        {"f1": number_words(self.f1), "lesion_dice": number_words(self.mean_dice), "rule": rule})

    def details(self) -> str:
        """The one line, then every lesion on a line of its own (source, number, status, voxels, DSC)."""
        lines = [repr(self)] + [f"  {l.source} {l.number}: {l.status}, {l.voxels} voxels, DSC {number_words(l.dice)}"
                                for l in self.lesions]
        return "\n".join(lines)

    def recall_by_size(self) -> dict[str, float]:
        """Each size class's share of true lesions found (NaN where there is none of that size)."""
        sized = self._counts().sized
        return {size: sized[size][1] / sized[size][0] if sized.get(size, [0])[0] else float("nan") for size in SIZES}

    def columns(self, as_json: bool = False, cell: Any = None) -> dict[str, Any]:
        """A result row's lesion columns (``lesions`` the JSON-ready list of every lesion; with ``as_json`` its
        JSON text, as a results row stores it, written lesion by lesion without the list of dicts; with
        ``cell``, a list cell that is given each lesion's dict and gives the text:
        :class:`~napari_medsam_eval.benchmark.spilled_cells.ListCell`)."""
        out = {"lesions_true": self.true_count, "lesions_found": self.found, "lesions_missed": self.missed,
               "lesions_false": self.false_positives, "lesion_f1": self.f1, "lesion_dice": self.mean_dice}
        if cell is not None:
            for lesion in self.lesions:
                cell.add(lesion.to_dict())
            out["lesions"] = cell.text()
        elif as_json:  # as benchmark.schema.json_dumps writes the list: sorted keys, no spaces
            out["lesions"] = "[" + ",".join(lesion_json(l) for l in self.lesions) + "]"
        else:
            out["lesions"] = [l.to_dict() for l in self.lesions]
        return out


def _voxel_ml(spacing: Sequence[float], kind: str) -> float | None:
    """One voxel's volume in mL for a volume (spacing in mm, z y x); None for a video or a 2D image."""
    return float(np.prod([float(v) for v in spacing])) / 1000.0 if kind == "volume" else None


def _extent(mask: np.ndarray, kind: str) -> tuple[int | None, int | None, int | None]:
    if kind == "image":
        return None, None, None
    per_slice = mask.reshape(mask.shape[0], -1).sum(axis=1)
    present = np.flatnonzero(per_slice)
    return int(present[0]), int(present[-1]), int(np.argmax(per_slice))


def _dice(a: np.ndarray, b: np.ndarray) -> float:
    total = int(a.sum()) + int(b.sum())
    return 1.0 if total == 0 else 2.0 * int(np.count_nonzero(a & b)) / total


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = int(np.count_nonzero(a | b))
    return 1.0 if union == 0 else int(np.count_nonzero(a & b)) / union


def _overlaps(true_labels: np.ndarray, pred_labels: np.ndarray) -> dict[tuple[int, int], int]:
    """Voxels shared by each (true, predicted) pair of lesions that touch."""
    both = (true_labels > 0) & (pred_labels > 0)
    wide = int(pred_labels.max()) + 1 if pred_labels.size else 1
    pairs, counts = np.unique(true_labels[both].astype(np.int64) * wide + pred_labels[both], return_counts=True)
    return {(int(pair) // wide, int(pair) % wide): int(c) for pair, c in zip(pairs, counts)}


#: voxels counted at a time by :func:`_sizes` (its int64 copy of a chunk: 8 MB)
_COUNT_CHUNK = 1 << 20


def _sizes(labels: np.ndarray, numbers: Sequence[int]) -> np.ndarray:
    """Each number's voxel count (index = number; ``numbers`` ascending), a chunk at a time: ``np.bincount``
    of the whole map would copy it as int64, 8 bytes a voxel, four times a uint16 map."""
    top = (list(numbers) or [0])[-1]
    flat = labels.reshape(-1)
    sizes = np.zeros(top + 1, dtype=np.intp)
    for start in range(0, flat.size, _COUNT_CHUNK):
        sizes += np.bincount(flat[start:start + _COUNT_CHUNK], minlength=top + 1)
    return sizes


def _numbered(mask: np.ndarray, instances: bool) -> tuple[np.ndarray, list[int]]:
    """A side's lesions numbered: its instance map as it is, or its mask's connected components."""
    if instances:
        labels = np.asarray(mask)
        return labels, instance_numbers(labels)
    labels, count = components(mask)
    return labels, list(range(1, count + 1))


def match_lesions(pred: np.ndarray, gt: np.ndarray, spacing: Sequence[float], kind: str,
                  rule: LesionRule = LesionRule(), *, instances: bool = False,
                  each: Callable[[Lesion], None] | None = None) -> LesionResult:
    """Every true and predicted lesion of one case, matched by ``rule`` (module doc); ``spacing`` in array
    order (mm; a video's is its frames' and is only used for volumes' sizes).

    ``pred`` and ``gt`` are masks (their connected components are the lesions), or with ``instances`` two
    instance maps (each non-zero value one lesion, numbered by its value). Each lesion is scored in its
    bounding box: memory is the two numbered maps and one lesion's crop, whatever the lesion count.
    ``each`` is given every lesion as it is scored, which the result then does not keep (it holds their
    counts: :class:`LesionTally`), so a run's memory does not grow with its lesions."""
    pred, gt = np.asarray(pred), np.asarray(gt)
    if pred.shape != gt.shape:
        raise InputError(f"prediction shape {pred.shape} != ground truth shape {gt.shape}")
    true_labels, true_numbers = _numbered(gt, instances)
    pred_labels, pred_numbers = _numbered(pred, instances)
    overlaps = _overlaps(true_labels, pred_labels)
    true_sizes, pred_sizes = _sizes(true_labels, true_numbers), _sizes(pred_labels, pred_numbers)
    if rule.match == "iou":
        matches = _iou_matches(overlaps, true_sizes, pred_sizes, rule.threshold)
    else:
        matches = {pair: 0.0 for pair in overlaps}
    true_of: dict[int, list[int]] = {}  # (matched lesions only)
    pred_of: dict[int, list[int]] = {}
    for t, p in matches:
        true_of.setdefault(t, []).append(p)
        pred_of.setdefault(p, []).append(t)
    voxel_ml = _voxel_ml(spacing, kind)
    true_boxes = ndimage.find_objects(true_labels) if true_numbers else []  # lesion n's box at n - 1
    pred_boxes = ndimage.find_objects(pred_labels) if pred_numbers else []
    kept: list[Lesion] = []
    tally = None if each is None else LesionTally()

    def give(lesion: Lesion) -> None:
        if tally is None:
            kept.append(lesion)
        else:
            tally.add(lesion)
            each(lesion)
    for t in true_numbers:
        matched = true_of.get(t, [])
        box = _union_box([true_boxes[t - 1]] + [pred_boxes[p - 1] for p in matched])
        give(_lesion("true", t, true_labels[box] == t, np.isin(pred_labels[box], matched), matched,
                     voxel_ml, kind, rule, box))
    for p in pred_numbers:
        matched = pred_of.get(p, [])
        box = _union_box([pred_boxes[p - 1]] + [true_boxes[t - 1] for t in matched])
        give(_lesion("predicted", p, pred_labels[box] == p, np.isin(true_labels[box], matched), matched,
                     voxel_ml, kind, rule, box))
    return LesionResult(kept, rule, tally)


def _union_box(boxes: list[tuple[slice, ...]]) -> tuple[slice, ...]:
    """The smallest box holding every box (``find_objects`` slices)."""
    return tuple(slice(min(b[axis].start for b in boxes), max(b[axis].stop for b in boxes))
                 for axis in range(len(boxes[0])))


def _iou_matches(overlaps: dict[tuple[int, int], int], true_sizes: np.ndarray, pred_sizes: np.ndarray,
                 threshold: float) -> dict[tuple[int, int], float]:
    """One-to-one pairs with IoU above ``threshold``, highest IoU first (ties: lower numbers first)."""
    scored = []
    for (t, p), shared in overlaps.items():
        iou = shared / (int(true_sizes[t]) + int(pred_sizes[p]) - shared)
        if iou > threshold:
            scored.append((-iou, t, p))
    used_true: set[int] = set()
    used_pred: set[int] = set()
    matches = {}
    for negative, t, p in sorted(scored):
        if t not in used_true and p not in used_pred:
            used_true.add(t)
            used_pred.add(p)
            matches[(t, p)] = -negative
    return matches


def _lesion(source: str, number: int, mask: np.ndarray, other: np.ndarray, matched: list[int],
            voxel_ml: float | None, kind: str, rule: LesionRule, box: tuple[slice, ...]) -> Lesion:
    """One lesion from its mask and its matches' (both cropped to ``box``)."""
    voxels = int(mask.sum())
    volume = None if voxel_ml is None else voxels * voxel_ml
    first, last, largest = _extent(mask, kind)
    if kind != "image":
        first, last, largest = (v + box[0].start for v in (first, last, largest))
    if matched:
        status, dice, iou = (FOUND if source == "true" else MATCHED), _dice(mask, other), _iou(mask, other)
    else:
        status, dice, iou = (MISSED if source == "true" else FALSE_POSITIVE), 0.0, 0.0
    return Lesion(source, number, status, voxels, volume, rule.size_of(volume), dice, iou, first, last, largest,
                  sorted(matched))


__all__ = ["FALSE_POSITIVE", "FOUND", "Lesion", "MATCHED", "LesionResult", "LesionTally", "LesionRule", "MATCH_RULES", "MISSED", "SIZES",
           "lesion_json", "match_lesions"]
