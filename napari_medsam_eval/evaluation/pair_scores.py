"""The scores of one prediction-truth pair as an object: what ``api.score_pair`` returns.

:func:`~.metrics.score_pair` gives a result row's columns (a dict of floats and JSON text, as a run's table
stores them); :class:`PairScores` is the same numbers for a person at a prompt: named fields, voxel counts as
ints, ``error_slices`` as a dict, a one-line repr. It is still a dict of the row's keys (a ``dict`` subclass),
so ``scores["dice"]``, ``scores.items()`` and ``pd.DataFrame({name: scores, ...})`` (one column per pair) work
as they did.
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping

from ..core.reprs import number_words, one_line
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

    __slots__ = ()

    def __init__(self, values: Mapping[str, Any] = {}, /, **fields: Any) -> None:  # noqa: B006 - not mutated
        """The fields as given (:meth:`from_row` types a scorer's columns)."""
        super().__init__(values, **fields)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "PairScores":
        """From :func:`~.metrics.score_pair`'s columns (``error_slices`` JSON text or a dict), typed: voxel counts
        as ints, scores as floats, ``error_slices`` as a dict."""
        values = {name: row[name] for name in FIELDS if name in row}
        where = values.get("error_slices", {})
        values["error_slices"] = json.loads(where) if isinstance(where, str) and where.strip() else dict(where or {})
        values.update({name: int(values[name]) for name in _INTS if name in values})
        values.update({name: float(values[name]) for name in _FLOATS if name in values})
        values.setdefault("prompt_slice_dice", math.nan)
        values["dominant_error"] = str(values.get("dominant_error", ""))
        return cls(values)

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
        words = [f"{name}={number_words(self[name])}" for name in shown if name in self]
        words.append(f"pred {self.get('pred_voxels')} / truth {self.get('gt_voxels')} voxels")
        dominant = self.get("dominant_error", "")
        if dominant:
            words.append("ok" if dominant == "ok" else f"mostly {dominant}")
        return one_line("PairScores", words)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython prints a dict subclass as a dict
        printer.text(repr(self))


PairScores.__doc__ = (PairScores.__doc__ or "") + "\n    Fields::\n\n" + "".join(
    f"        {name:<20} {meaning}\n" for name, meaning in FIELDS.items())
