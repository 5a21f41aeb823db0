"""Why a propagation stopped, in words a clinician reads: one sentence per stop rule.

The rules (:mod:`.rules`) have short names (``iou``, ``intensity``) that runs store and tables count;
a status line or a plot says what each means, with the value measured where the rule fired and the
limit it crossed: "stopped at slice 9: the mask changed too much from the slice before (overlap
IoU 0.21 < 0.30)". ``unit`` is ``slice`` for volumes and ``frame`` for videos.
"""
from __future__ import annotations

#: a few words for each rule (a plot's marker, a table's legend)
STOP_LABELS: dict[str, str] = {
    "empty": "nothing found",
    "lost": "target lost",
    "intensity": "brightness changed",
    "score": "model unsure",
    "iou": "shape changed",
    "area": "mask grew",
    "box_fill": "mask filled its box",
    "model": "model lost it",
    "box_3d": "3D box ended",
    "end": "end reached",
    "limit": "range ended",
}


#: each rule in words, with {unit}: what happened
_WHY: dict[str, str] = {
    "empty": "the model found nothing on this {unit}",
    "lost": "the model found nothing on this {unit}",
    "intensity": "the mask's mean brightness moved too far from the prompted {unit}'s",
    "score": "the model's own confidence fell",
    "iou": "the mask changed too much from the {unit} before",
    "area": "the mask grew too fast from the {unit} before",
    "box_fill": "the mask filled its box, as a leak into the surroundings does",
    "model": "the model reported the object gone on this {unit}",
    "box_3d": "the official script's 3D box ends at this {unit}",
    "limit": "the end of the {unit}s it was to fill: the next corrected {unit}, or the range set",
}
#: the measured value against its limit, for the rules that measure one
_NUMBERS: dict[str, str] = {
    "intensity": "{measured:.0f} grey levels, more than {limit:.0f} allowed",
    "score": "score {measured:.2f} < {limit:.2f}",
    "iou": "overlap IoU {measured:.2f} < {limit:.2f}",
    "area": "{measured:.1f} times its area, more than {limit:.1f}",
    "box_fill": "{measured:.0%} of the box > {limit:.0%}",
}


def stop_sentence(reason: str, measured: float | None = None, limit: float | None = None,
                  unit: str = "slice") -> str:
    """What rule ``reason`` means, with the value it measured and its limit when given, e.g. ``the mask
    changed too much from the slice before (overlap IoU 0.21 < 0.30)``; an unknown name is returned as it is."""
    if reason not in _WHY:
        return reason
    text = _WHY[reason].format(unit=unit)
    if reason in _NUMBERS and measured is not None and limit is not None:
        text += f" ({_NUMBERS[reason].format(measured=measured, limit=limit)})"
    return text


def stop_text(direction: str, last: int, at: int | None, reason: str, measured: float | None = None,
              limit: float | None = None, unit: str = "slice") -> str:
    """One direction's stop for a status line: ``up: kept to slice 8, stopped at slice 9: <why>``."""
    if at is None:
        whole = "video" if unit == "frame" else "volume"
        ended = f"the end of the {whole}" if reason == "end" else stop_sentence(reason, measured, limit, unit)
        return f"{direction}: kept to {unit} {last} ({ended})"
    return f"{direction}: kept to {unit} {last}, stopped at {unit} {at}: {stop_sentence(reason, measured, limit, unit)}"


__all__ = ["STOP_LABELS", "stop_sentence", "stop_text"]
