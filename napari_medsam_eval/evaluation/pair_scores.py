"""The scores of one prediction-truth pair as an object: what ``api.score_pair`` returns.

:func:`~.metrics.score_pair` gives a result row's columns (a dict of floats and JSON text, as a run's table
stores them); :class:`PairScores` is the same numbers for a person at a prompt: named fields, voxel counts as
ints, ``error_slices`` as a dict, a one-line repr. It is still a dict of the row's keys (a ``dict`` subclass),
so ``scores["dice"]``, ``scores.items()`` and ``pd.DataFrame({name: scores, ...})`` (one column per pair) work
as they did. Besides the row's keys it knows its ``target`` (the :class:`~napari_medsam_eval.core.targets.Target`
scored, None when the caller gave a bare truth mask) and its metric ``convention``.

:func:`pair_scores` is what ``api.score_pair`` does: the truth taken from a case and a target (the target's
labels, never a key), the kind and spacing from the case, the metrics by a convention, and a
:class:`EmptyTruthWarning` when the truth is empty but the prediction is not (a key taken for a label).
"""
from __future__ import annotations

import json
import math
import warnings
from typing import Any, Mapping

import numpy as np

from ..core.errors import InputError, InputTypeError
from ..core.reprs import number_words, one_line
from ..core.targets import Target
from .error_parts import PART_COLUMNS, PART_MEANINGS, PARTS

#: every field, in the order of a result row, with what it means
FIELDS: dict[str, str] = {
    "dice": "Dice similarity coefficient over the whole case (NaN when both masks are empty)",
    "iou": "intersection over union",
    "nsd": "normalised surface distance at the tolerance (mm)",
    "hd95": "95th percentile Hausdorff distance (mm)",
    "gt_voxels": "foreground voxels of the truth (int)",
    "pred_voxels": "foreground voxels of the prediction (int)",
    **{column: f"share of the error: {PART_MEANINGS[part]}" for part, column in zip(PARTS, PART_COLUMNS)},
    "dominant_error": "the largest error part (``ok`` at DSC >= 0.9, ``\"\"``: not scored)",
    "prompt_slice_dice": "DSC on the prompt slice alone (NaN without a prompt slice)",
    "error_slices": "where each non-empty part lies: {part: {'largest': slice, 'ranges': [[first, last], ...]}}",
}
_INTS = ("gt_voxels", "pred_voxels")
_FLOATS = ("dice", "iou", "nsd", "hd95", "prompt_slice_dice", *PART_COLUMNS)


class PairScores(dict):
    """Dice, IoU, NSD, HD95, the voxel counts and why it missed (the error parts, adding up to ``1 - dice``), for
    one binary prediction against its truth (:func:`napari_medsam_eval.api.score_pair`). Each value is a field
    (``scores.dice``) and a key (``scores["dice"]``); :meth:`to_dict` gives a plain dict.

    Example::

        scores = api.score_pair(result.mask, case.label == 2, case.kind, case.spacing, prompt_slice=22)
        scores                # PairScores(dice=0.8947, iou=0.8095, nsd=0.9823, hd95=1.131, ..., mostly over)
        scores.dice, scores.dominant_error, scores.error_slices["over"]["ranges"]
    """

    __slots__ = ("target", "convention")

    def __init__(self, values: Mapping[str, Any] = {}, /, **fields: Any) -> None:  # noqa: B006 - not mutated
        """The fields as given (:meth:`from_row` types a scorer's columns)."""
        super().__init__(values, **fields)
        self.target: Target | None = None
        self.convention = "medsam-eval"

    @classmethod
    def from_row(cls, row: Mapping[str, Any], target: Target | None = None,
                 convention: str = "medsam-eval") -> "PairScores":
        """From :func:`~.metrics.score_pair`'s columns (``error_slices`` JSON text or a dict), typed: voxel counts
        as ints, scores as floats, ``error_slices`` as a dict; ``target`` and ``convention`` as given."""
        values = {name: row[name] for name in FIELDS if name in row}
        where = values.get("error_slices", {})
        values["error_slices"] = json.loads(where) if isinstance(where, str) and where.strip() else dict(where or {})
        values.update({name: int(values[name]) for name in _INTS if name in values})
        values.update({name: float(values[name]) for name in _FLOATS if name in values})
        values.setdefault("prompt_slice_dice", math.nan)
        values["dominant_error"] = str(values.get("dominant_error", ""))
        scores = cls(values)
        scores.target, scores.convention = target, str(convention)
        return scores

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (``error_slices`` a dict too): for ``json.dumps`` or a table row."""
        return dict(self)

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"PairScores has no field {name!r} (fields: {', '.join(self)})") from None

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self))

    def __repr__(self) -> str:
        """``PairScores(dice=0.8947, iou=0.8095, nsd=0.9823, hd95=1.131, pred 1938 / truth 1938 voxels, mostly
        over)``: one line."""
        shown = ["dice", "iou", "nsd", "hd95"]
        if not math.isnan(self.get("prompt_slice_dice", math.nan)):
            shown.append("prompt_slice_dice")
        words = [] if self.target is None else [f"target={self.target.describe()}"]
        words += [f"{name}={number_words(self[name])}" for name in shown if name in self]
        words.append(f"pred {self.get('pred_voxels')} / truth {self.get('gt_voxels')} voxels")
        dominant = self.get("dominant_error", "")
        if dominant:
            words.append("ok" if dominant == "ok" else f"mostly {dominant}")
        if self.convention != "medsam-eval":
            words.append(f"as {self.convention}")
        return one_line("PairScores", words)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython prints a dict subclass as a dict
        printer.text(repr(self))


PairScores.__doc__ = (PairScores.__doc__ or "") + "\n    Fields::\n\n" + "".join(
    f"        {name:<20} {meaning}\n" for name, meaning in FIELDS.items())


class EmptyTruthWarning(UserWarning):
    """The truth is empty where the prediction is not: the prediction scores DSC 0 against nothing, which is
    seldom what was meant (a region's key taken for a label value, a target the case does not hold)."""


def truth_of(pred: Any, gt: Any = None, *, case: Any = None, target: Any = None) -> tuple[np.ndarray, Any, Any]:
    """The prediction's mask, its truth and its target (None where not known), from what ``api.score_pair``
    was given: ``pred`` a mask or a result (its ``mask``; its ``prompt.target`` when no ``target`` is given);
    ``gt`` a bool mask, a label map with ``target``, or None with ``case`` and ``target`` (the target's mask
    of ``case.label``). An :class:`InputTypeError` says what is missing."""
    if not isinstance(pred, np.ndarray) and hasattr(pred, "mask"):
        if target is None:
            target = getattr(getattr(pred, "prompt", None), "target", None)
        pred = pred.mask
    names = getattr(case, "label_names", None) or {}
    if target is not None:
        target = Target.of(target, names)
    if gt is None:
        if case is None or target is None:
            raise InputTypeError("score_pair needs the truth: score_pair(pred, case=case, target=prompt.target) "
                                 "(or target=\"liver=1,3\", a label value), or a truth mask "
                                 "score_pair(pred, gt, kind, spacing)")
        if getattr(case, "label", None) is None:
            raise InputError(f"case {getattr(case, 'case_id', '')!r} has no label map to take "
                             f"{target.describe()} from")
        return np.asarray(pred), target.mask(case.label), target
    gt = np.asarray(gt)
    if target is not None and gt.dtype != bool:
        gt = target.mask(gt)  # a label map: the target's labels
    return np.asarray(pred), gt, target


def warn_empty_truth(pred: np.ndarray, gt: np.ndarray, target: Target | None, case: Any = None,
                     stacklevel: int = 3) -> None:
    """An :class:`EmptyTruthWarning` when ``gt`` is empty and ``pred`` is not, naming the target and the labels
    ``case`` holds (or how to score a target, when the truth was a bare mask)."""
    if gt.any() or not pred.any():
        return
    voxels = int(np.count_nonzero(pred))
    label = getattr(case, "label", None)
    if target is not None:
        what = f"the truth of target {target.describe()} is empty"
    else:
        what = "the truth mask is empty"
    if label is not None:
        from ..core.case import present_label_values

        held = ", ".join(str(v) for v in present_label_values(label)) or "none"
        where = f"; case {getattr(case, 'case_id', '')!r} holds labels {held}"
    else:
        where = ("; a region's prompt carries a key, not a label (case.label == prompt.target_label is empty): "
                 "score its target with score_pair(pred, case=case, target=prompt.target)")
    warnings.warn(f"{what} while the prediction has {voxels} voxels: DSC 0 against nothing{where}",
                  EmptyTruthWarning, stacklevel=stacklevel)


def pair_scores(pred: np.ndarray, gt: np.ndarray, kind: str, spacing: Any, tolerance_mm: float,
                prompt_slice: int | None = None, convention: str = "medsam-eval",
                target: Target | None = None) -> PairScores:
    """:func:`~.metrics.score_pair`'s row as a :class:`PairScores` (binary, same-shape masks; ``spacing`` in
    array order), DSC, IoU, NSD and HD95 by ``convention`` (:mod:`.conventions`; the error parts stay this
    tool's, which add up to ``1 - dice`` of the default convention)."""
    from .conventions import CONVENTIONS, convention_scores
    from .metrics import score_pair

    if convention not in CONVENTIONS:
        raise InputError(f"convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    if convention != CONVENTIONS[0] and kind == "video":
        raise InputError(f"convention {convention!r}: a video is scored frame by frame here; the conventions are "
                         "for images and volumes")
    row = score_pair(pred, gt, kind, spacing, tolerance_mm, prompt_slice)
    if convention != CONVENTIONS[0]:
        row = {**row, **convention_scores(pred, gt, tuple(spacing), tolerance_mm, convention)}
    return PairScores.from_row(row, target=target, convention=convention)


def check_kind_spacing(kind: Any, spacing: Any) -> None:
    """An :class:`InputTypeError` for a kind that is not text or a spacing that is (the two given swapped)."""
    if isinstance(spacing, str) or (kind is not None and not isinstance(kind, str)):
        raise InputTypeError(f"score_pair takes kind then spacing (score_pair(pred, gt, case.kind, case.spacing)), "
                             f"got kind={kind!r:.60} and spacing={spacing!r:.60}; or give case=case")


def score_truth(pred: Any, gt: Any = None, kind: str | None = None, spacing: Any = None, *, case: Any = None,
                target: Any = None, tolerance_mm: float | None = None, prompt_slice: int | None = None,
                convention: str = "medsam-eval") -> PairScores:
    """:func:`napari_medsam_eval.api.score_pair`'s work (its docstring says what each argument may be): the truth
    of ``target`` in ``case`` (or ``gt``), kind and spacing from the case where not given, the empty-truth
    warning, then :func:`pair_scores`."""
    from .metrics import array_spacing, binary_mask
    from .surface_distance import LITEMEDSAM_NSD_TOLERANCE_MM, as_mask_pair

    check_kind_spacing(kind, spacing)
    pred, gt, target = truth_of(pred, gt, case=case, target=target)
    kind = kind if kind is not None else getattr(case, "kind", None)
    spacing = spacing if spacing is not None else getattr(case, "spacing", None)
    if kind is None or spacing is None:
        raise InputTypeError("score_pair needs the kind and spacing of the masks: give case=case, or "
                             "score_pair(pred, gt, case.kind, case.spacing)")
    pred, gt = as_mask_pair(binary_mask(pred, "prediction"), binary_mask(gt, "ground truth"))
    warn_empty_truth(pred, gt, target, case)
    values = array_spacing(spacing, kind, pred.ndim)
    tolerance = LITEMEDSAM_NSD_TOLERANCE_MM if tolerance_mm is None else tolerance_mm
    return pair_scores(pred, gt, kind, values, tolerance, prompt_slice, convention, target)
