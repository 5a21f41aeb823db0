"""The canvas's roles and views, in words and colours (:mod:`._canvas` composes them; plain data, no Qt).

A *role* is a kind of layer on the canvas (``metadata['role']``): the colours it draws, each with the words the
legend gives it. A *view* is what the canvas shows at one time: its roles from the bottom up, at most three
colour roles (a prompt is a marker, named whenever it is shown). Five error parts are two views (*why: too
much*, *why: too little*), and an agreement map and the worst run two more, so no view needs more colours.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from napari.layers import Layer

from napari_medsam_eval.core import palette
from napari_medsam_eval.evaluation.error_parts import PART_VALUES
from napari_medsam_eval.session.attempts import ADDED, REMOVED
from napari_medsam_eval.evaluation.mask_comparison import AB_A_ONLY, AB_B_ONLY, AB_BOTH, OVERLAY_FN, OVERLAY_FP, \
    OVERLAY_TP

#: metadata key marking the layers a benchmark row opened (:mod:`..benchmark._open_row`); its value is the layer's
#: role in the row
OPENED_KEY = "benchmark_row"
#: the canvas overlays of the legend are named ``<LEGEND_KEY><n>``
LEGEND_KEY = "medsam_eval_legend_"
#: the legend's background box (dark, so the role colours read on a bright endoscopy frame too)
LEGEND_BOX = palette.LEGEND_BACKGROUND
LEGEND_FONT = 11


@dataclass(frozen=True)
class Role:
    """A kind of layer on the canvas: the colours it draws, each with its words (value -> (words, colour))."""

    colors: tuple[tuple[int | None, str, str], ...]
    marker: bool = False  # a prompt: named, but not one of a view's colour roles


def _entries(values: Mapping[int, tuple[str, str]]) -> tuple[tuple[int | None, str, str], ...]:
    return tuple((value, words, color) for value, (words, color) in values.items())


#: every role the composer knows (the layers' ``metadata['role']``), with what each colour of it means
ROLES: dict[str, Role] = {
    "ground_truth": Role(((None, "truth (fill)", palette.GROUND_TRUTH),)),
    "prediction": Role(((None, "prediction (outline)", palette.PREDICTION),)),
    "overlay": Role(_entries({OVERLAY_TP: ("TP: found", palette.TRUE_POSITIVE),
                              OVERLAY_FP: ("FP: leak (not true)", palette.FALSE_POSITIVE),
                              OVERLAY_FN: ("FN: missed", palette.FALSE_NEGATIVE)})),
    "ab_overlay": Role(_entries({AB_A_ONLY: ("A only", palette.A_ONLY), AB_B_ONLY: ("B only", palette.B_ONLY),
                                 AB_BOTH: ("both", palette.BOTH)})),
    "counterfactual": Role(_entries({AB_A_ONLY: ("prediction only", palette.A_ONLY),
                                     AB_B_ONLY: ("variant only", palette.B_ONLY),
                                     AB_BOTH: ("both", palette.BOTH)})),
    "error_parts": Role(tuple((PART_VALUES[part], part.replace("_", " "), color)
                              for part, color in palette.ERROR_PART_COLORS.items())),
    "worst_run": Role(((None, "worst run (outline)", palette.HIGHLIGHT),)),
    "changes": Role(((ADDED, "added", palette.ADDED), (REMOVED, "removed", palette.REMOVED))),
    "prompt_boxes": Role(((None, "prompt box", palette.BOX_PROMPT),), marker=True),
    "prompt_points": Role(((None, "point: white +, black -", palette.POSITIVE_POINT),), marker=True),
}


def _agreement_role() -> Role:
    edges = [low for low, _color in palette.AGREEMENT_BINS] + [1.0]
    colors = []
    for (low, color), high in zip(palette.AGREEMENT_BINS, edges[1:]):
        text = f"<{high:.0%}" if low == 0 else f"{low:.0%}-{high:.0%}"
        colors.append((None, f"{text} of runs agree", color))
    return Role(tuple(colors))


ROLES["agreement"] = _agreement_role()

#: the error parts of each "why" view (at most three colours each)
WHY_PARTS = {"why: too much": ("leak", "off_target", "over"), "why: too little": ("missed_slices", "under")}


@dataclass(frozen=True)
class View:
    """What one view shows: its roles from the bottom up (the last is its subject, drawn on top)."""

    roles: tuple[str, ...]
    title: str


#: the views, by name; each shows at most three colour roles (markers aside)
VIEWS: dict[str, View] = {
    "truth & prediction": View(("ground_truth", "prediction", "prompt_boxes", "prompt_points"), "truth and prediction"),
    "TP / FP / FN": View(("overlay", "prompt_boxes", "prompt_points"), "prediction against truth"),
    "why: too much": View(("error_parts",), "why: what the prediction has too much"),
    "why: too little": View(("error_parts",), "why: what the prediction misses"),
    "A vs B": View(("ab_overlay",), "run A against run B"),
    "variant": View(("counterfactual",), "prediction against the variant"),
    "changes": View(("changes", "prompt_boxes", "prompt_points"), "what the last attempt changed"),
    "sensitivity": View(("agreement",), "agreement of the perturbed runs"),
    "worst run": View(("prediction", "worst_run"), "prediction and the worst perturbed run"),
}
#: the views a comparison that lands by itself may replace (the others the user opened on purpose)
YIELDING = ("truth & prediction", "TP / FP / FN")


#: the most objects of a truth or prediction layer named one by one in the legend (more: by their value's colour)
MAX_OBJECTS = 6


def object_colours(layer: Layer) -> list[tuple[str, str]]:
    """``(name, '#RRGGBB')`` of each object a truth or prediction layer draws, in value order: its objects
    (``metadata['objects']``) or its label names, else the values it holds (a layer of many objects: the first
    :data:`MAX_OBJECTS`)."""
    import numpy as np

    meta = layer.metadata if isinstance(layer.metadata, dict) else {}
    names: dict[int, str] = {}
    for value, entry in (meta.get("objects") or {}).items():
        names[int(value)] = (entry or {}).get("name") or f"label {int(value)}"
    for value, name in (meta.get("label_names") or {}).items():
        names.setdefault(int(value), str(name))
    if not names and np.size(layer.data) <= 50_000_000:
        names = {int(v): f"label {int(v)}" for v in np.unique(np.asarray(layer.data)) if v}
    found = []
    for value in sorted(v for v in names if v > 0)[:MAX_OBJECTS]:
        found.append((names[value], palette.rgb_to_hex(layer.get_color(value))))
    return found


def legend_of(view: str, present: Mapping[str, Layer], words: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(words, colour)`` of each colour ``view`` shows with the layers ``present``."""
    legend: list[tuple[str, str]] = []
    for role in VIEWS[view].roles:
        if role not in present:
            continue
        entries = ROLES[role].colors
        if role == "error_parts":
            entries = tuple(e for e in entries if e[0] in {PART_VALUES[p] for p in WHY_PARTS.get(view, ())})
        if role in ("ground_truth", "prediction") and len(objects := object_colours(present[role])) > 1:
            noun = "truth" if role == "ground_truth" else "prediction"  # each object's colour named
            legend.extend((f"{noun}: {name}", color) for name, color in objects)
            continue
        for _value, text, color in entries:
            if role in words and "variant" in text:
                text = text.replace("variant", words[role])
            if role == "prompt_points" and not len(present[role].data):
                continue
            if role == "prompt_boxes" and not len(present[role].data):
                continue
            legend.append((text, color))
    return legend


__all__ = ["LEGEND_BOX", "LEGEND_FONT", "LEGEND_KEY", "MAX_OBJECTS", "OPENED_KEY", "ROLES", "Role", "VIEWS", "View", "WHY_PARTS",
           "YIELDING", "legend_of", "object_colours"]
