"""How a per-slice model is walked from slice to slice: the next prompt and the stop rules.

A per-slice model (LiteMedSAM, SAM) predicts something inside nearly any box,
so "stop at an empty prediction" lets a propagation leak past the object's end.
:class:`PropagationRules` holds the options a propagation (and a protocol, so a
run records them) can set; each stop rule is off when its value is None:

* ``intensity_k`` - the mean intensity of the new prediction (prepared uint8
  slice, grey) differs from the prompted slice's prediction by more than
  ``intensity_k`` times that region's standard deviation (floored at
  ``intensity_std_floor`` grey levels): the model has moved onto other tissue;
* ``min_score`` / ``score_ratio`` - the decoder's own predicted IoU
  (LiteMedSAM and SAM return it) is below a threshold, absolute or relative to
  the prompted slice's;
* ``min_iou`` - IoU with the previous slice's mask below it (micro-sam's rule);
* ``max_area_growth`` - the area grows beyond this factor of the previous slice's;
* ``max_box_fill`` - the prediction fills more than this fraction of its
  prompt box (what LiteMedSAM does when there is nothing to find);
* an empty prediction always ends the object (``stop_when_empty``).

The slice that triggers a rule is dropped and the direction stops, except
with ``hold``: a lost slice/frame is left empty and the last good mask's box
is tried again on the next one, up to ``hold`` times in a row (``None``: to
the end) - for videos, where an object can vanish for a few frames.

The next slice is prompted with the last good mask's tight box widened on each
side by ``max(margin, margin_fraction * side)`` pixels (x and y apart), clipped
to the image: a fixed margin for small objects, a proportional one for motion.
With ``interior_point`` the last mask's interior point (farthest from its
border) is added as a positive point, and with ``mask_prompt`` the last mask
itself goes along as a mask prompt (models that take one: SAM, the oracle).
With ``locate="similarity"`` the box comes instead from where the image
features look like the prompted frame's object (:mod:`.similarity`), widened the
same way: for videos, whose objects move further between frames than their size.

The defaults (:data:`VOLUME_RULES`, :data:`VIDEO_RULES`) were chosen by
measurement on the shared datasets (docs/propagation.md); :data:`LEGACY_RULES`
is the rule before them (2 px, stop only when empty).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import OptionError
from ..core.options import check_dataclass_options
from ..protocols.geometry import tight_box
from ..core.errors import InputError

#: why a direction ended: a stop rule, the model's own absence (native), the
#: official script's z-range, or the end of the stack / the limits
#: how the next slice's box is found: None = the last good mask's box; "similarity" = image features (.locate)
LOCATE_MODES = (None, "similarity")
#: the stop rules meant for a walk that drifts off its object (onto other tissue, into a leak): off where the
#: walk runs between two anchors that hold the object (:meth:`PropagationRules.without_drift`)
DRIFT_RULES = ("intensity_k", "min_iou", "max_area_growth")
STOP_REASONS = ("empty", "intensity", "score", "iou", "area", "box_fill", "lost", "model", "box_3d", "end", "limit")


@dataclass(frozen=True)
class PropagationRules:
    """Options of slice-to-slice propagation with a per-slice model (module doc)."""

    margin: float = 2.0
    margin_fraction: float = 0.1
    stop_when_empty: bool = True
    intensity_k: float | None = 2.0
    intensity_std_floor: float = 5.0
    min_score: float | None = None
    score_ratio: float | None = None
    min_iou: float | None = 0.3
    max_area_growth: float | None = None
    max_box_fill: float | None = None
    hold: int | None = 0
    locate: str | None = None
    interior_point: bool = False
    mask_prompt: bool = False

    def __post_init__(self) -> None:
        if self.locate not in LOCATE_MODES:
            raise InputError(f"propagation option locate must be one of {LOCATE_MODES}, got {self.locate!r}")
        _check_range("margin", self.margin, 0.0, None)
        _check_range("margin_fraction", self.margin_fraction, 0.0, None)
        _check_range("intensity_k", self.intensity_k, 0.0, None)
        _check_range("intensity_std_floor", self.intensity_std_floor, 0.0, None)
        for name in ("min_score", "score_ratio", "min_iou", "max_box_fill"):
            _check_range(name, getattr(self, name), 0.0, 1.0 if name != "score_ratio" else None)
        _check_range("max_area_growth", self.max_area_growth, 1.0, None)
        if self.hold is not None and (int(self.hold) != self.hold or self.hold < 0):
            raise InputError(f"hold must be a whole number >= 0 or None, got {self.hold!r}")

    def replace(self, **changes: Any) -> "PropagationRules":
        """A copy with ``changes`` (unknown names, values of the wrong type or out of range are refused
        with an :class:`~napari_medsam_eval.core.errors.OptionError` naming the option)."""
        check_dataclass_options(PropagationRules, changes, "propagation")
        try:
            return dataclasses.replace(self, **changes)
        except (TypeError, ValueError) as error:
            raise OptionError(str(error)) from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def without_drift(self) -> "PropagationRules":
        """A copy with the drift rules (:data:`DRIFT_RULES`) off: for a walk between two slices known to hold
        the object (a correction walking towards another anchor's mask), where only an empty prediction ends it."""
        return dataclasses.replace(self, **{name: None for name in DRIFT_RULES})


def _check_range(name: str, value: float | None, low: float, high: float | None) -> None:
    if value is None:
        return
    if not np.isfinite(value) or value < low or (high is not None and value > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
        raise InputError(f"propagation option {name} must be {bound} (or None), got {value!r}")


#: chosen by measurement (docs/propagation.md): the same for every volume dataset. Box: the last
#: mask's tight box + max(2 px, 10 % of its side); stop: empty, the region's mean intensity more than
#: 2 standard deviations (floor 5 grey levels) from the prompted slice's, or IoU < 0.3 with the last slice
VOLUME_RULES = PropagationRules()
#: videos: each frame's box found by feature similarity to the prompted frame's object (.locate),
#: + max(2 px, 10 %); no intensity or IoU stop (lighting, view and the object's shape change between
#: frames); a frame where the object is lost is left empty and the walk goes on to the end. The last
#: mask's box lost the colonoscopy polyps (median 0.130 against 0.735 located; phantom 0.943 vs 0.970)
VIDEO_RULES = PropagationRules(intensity_k=None, min_iou=None, hold=None, locate="similarity")
#: the rule before the measured defaults: a fixed 2 px margin, stop only at an empty prediction
LEGACY_RULES = PropagationRules(margin=2.0, margin_fraction=0.0, intensity_k=None, min_iou=None)
#: named presets for the command line and the protocol option ``rules``
RULE_PRESETS: dict[str, PropagationRules] = {"volume": VOLUME_RULES, "video": VIDEO_RULES, "legacy": LEGACY_RULES}


def default_rules(kind: str) -> PropagationRules:
    """The measured default of a kind of stack: ``video`` or anything else (volumes)."""
    return VIDEO_RULES if kind == "video" else VOLUME_RULES


def resolve_rules(kind: str, rules: PropagationRules | str | dict | None = None, **options: Any) -> PropagationRules:
    """Rules from a preset name, a dict of options or an object, with ``options`` on top
    (None options are ignored); None starts from the kind's default."""
    if rules is None:
        base = default_rules(kind)
    elif isinstance(rules, str):
        if rules not in RULE_PRESETS:
            raise OptionError(f"propagation: unknown rules {rules!r}; choose a preset of {sorted(RULE_PRESETS)} "
                              "or give rule options as JSON")
        base = RULE_PRESETS[rules]
    elif isinstance(rules, dict):
        base = default_rules(kind).replace(**rules)
    else:
        base = rules
    changes = {k: v for k, v in options.items() if v is not None}
    return base.replace(**changes) if changes else base


def next_box(mask: np.ndarray, shape_hw: tuple[int, int], rules: PropagationRules) -> tuple[float, ...] | None:
    """The next slice's prompt box: ``mask``'s tight box widened by the rules' margin, clipped."""
    box = tight_box(mask)
    return None if box is None else widen_box(box, shape_hw, rules)


def widen_box(box: tuple[float, ...], shape_hw: tuple[int, int], rules: PropagationRules) -> tuple[float, ...]:
    """``box`` widened on each side by ``max(margin, margin_fraction * side)`` (x and y apart), clipped."""
    height, width = shape_hw
    x0, y0, x1, y1 = box
    mx = max(rules.margin, rules.margin_fraction * (x1 - x0 + 1))
    my = max(rules.margin, rules.margin_fraction * (y1 - y0 + 1))
    return max(0, x0 - mx), max(0, y0 - my), min(width - 1, x1 + mx), min(height - 1, y1 + my)


@dataclass(frozen=True)
class Reference:
    """What the stop rules remember of the prompted slice's prediction."""

    area: int
    mean: float
    std: float
    score: float


def _grey_values(image: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The grey values of ``image`` under ``mask`` (RGB averaged over channels), without
    converting the whole slice: only the masked pixels are read."""
    values = np.asarray(image)[np.asarray(mask, dtype=bool)]
    return values.mean(axis=-1) if values.ndim == 2 else values.astype(np.float32, copy=False)


def reference_from(mask: np.ndarray, image: np.ndarray, score: float | None) -> Reference:
    """Area, mean and standard deviation of the prompted slice's prediction on its prepared image."""
    values = _grey_values(image, mask)
    score = float("nan") if score is None else float(score)
    if values.size == 0:
        return Reference(0, float("nan"), float("nan"), score)
    return Reference(int(values.size), float(values.mean()), float(values.std()), score)


@dataclass(frozen=True)
class StopFinding:
    """The rule (a :data:`STOP_REASONS` name) that ended an object at a slice, with the value it measured
    there and the limit that value crossed (None where the rule has no number: ``empty``, ``lost``)."""

    reason: str
    measured: float | None = None
    limit: float | None = None


def stop_finding(rules: PropagationRules, reference: Reference, previous: np.ndarray, mask: np.ndarray,
                 score: float | None, image: np.ndarray, box: tuple[float, ...] | None) -> StopFinding | None:
    """The first rule that ends the object at this slice (with what it measured), or None to keep it."""
    area = int(np.count_nonzero(mask))
    if area == 0:
        return StopFinding("empty" if rules.stop_when_empty else "lost")
    if rules.intensity_k is not None and np.isfinite(reference.mean):
        moved = abs(float(_grey_values(image, mask).mean()) - reference.mean)
        allowed = rules.intensity_k * max(reference.std, rules.intensity_std_floor)
        if moved > allowed:
            return StopFinding("intensity", moved, allowed)
    if score is not None and np.isfinite(score):
        if rules.min_score is not None and score < rules.min_score:
            return StopFinding("score", float(score), rules.min_score)
        if rules.score_ratio is not None and np.isfinite(reference.score) and score < rules.score_ratio * reference.score:
            return StopFinding("score", float(score), rules.score_ratio * reference.score)
    if rules.min_iou is not None and previous.any():
        iou = np.count_nonzero(mask & previous) / np.count_nonzero(mask | previous)
        if iou < rules.min_iou:
            return StopFinding("iou", float(iou), rules.min_iou)
    if rules.max_area_growth is not None and previous.any() and area > rules.max_area_growth * np.count_nonzero(previous):
        return StopFinding("area", area / np.count_nonzero(previous), rules.max_area_growth)
    if rules.max_box_fill is not None and box is not None:
        x0, y0, x1, y1 = (int(round(v)) for v in box)
        fill = area / max(1, (x1 - x0 + 1) * (y1 - y0 + 1))
        if fill > rules.max_box_fill:
            return StopFinding("box_fill", fill, rules.max_box_fill)
    return None


__all__ = [
    "DRIFT_RULES",
    "LEGACY_RULES",
    "PropagationRules",
    "RULE_PRESETS",
    "Reference",
    "STOP_REASONS",
    "VIDEO_RULES",
    "VOLUME_RULES",
    "default_rules",
    "next_box",
    "reference_from",
    "resolve_rules",
    "StopFinding",
    "stop_finding",
]
