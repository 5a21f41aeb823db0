"""The Segment widget's propagation options: margin, direction, slice range, stop rule.

They become the keyword arguments of :meth:`napari_medsam_eval.session.session.Session.propagate`
(:func:`propagation_options`): the direction and the range are ``z_limits`` (a
direction is the range cut at the prompted slice), the stop rule a
``rules`` dict on top of the kind's measured default. Only volumes have
directions and ranges here; a video propagates forward from its prompted frame.
"""
from __future__ import annotations

from typing import Any

from magicgui.widgets import ComboBox, Container, SpinBox

from napari_medsam_eval._widgets.common._section import Section
from napari_medsam_eval._widgets.common._words import TIPS
from napari_medsam_eval.core.errors import InputError

DIRECTIONS = ("both", "forward", "backward")
#: stop rule choice -> the rule changes it makes on the kind's default (None: the default)
STOP_RULES: dict[str, dict[str, Any] | None] = {
    "default (empty, intensity, overlap)": None,
    "empty mask only": {"intensity_k": None, "min_iou": None},
}
#: ``to`` slice value meaning "the last slice"
LAST = -1


def propagation_controls(margin: int) -> Container:
    """The options as one container (``margin``, ``direction``, ``first``, ``last``, ``stop``)."""
    return Container(widgets=[
        SpinBox(name="margin", label="box margin (px)", min=0, max=100, value=margin, tooltip=TIPS["box margin"]),
        ComboBox(name="direction", label="direction", choices=DIRECTIONS, value="both",
                 tooltip="volumes: propagate both ways from the prompted slice, or only up / down"),
        SpinBox(name="first", label="from slice", min=0, max=100_000, value=0,
                tooltip="the first slice a propagation may reach"),
        SpinBox(name="last", label="to slice", min=LAST, max=100_000, value=LAST,
                tooltip="the last slice a propagation may reach (-1: the last slice)"),
        ComboBox(name="stop", label="stop rule", choices=list(STOP_RULES), value=next(iter(STOP_RULES)),
                 tooltip=TIPS["stop rule"]),
    ], labels=True, name="propagation", tooltip=TIPS["propagation"])


def propagation_options(controls: Container, kind: str, n_slices: int, prompt_slice: int | None) -> dict[str, Any]:
    """``Session.propagate`` keyword arguments of the options (``margin``, ``z_limits``, ``rules``)."""
    options: dict[str, Any] = {"margin": int(controls.margin.value)}
    rules = STOP_RULES[controls.stop.value]
    if rules is not None:
        options["rules"] = dict(rules)
    if kind != "volume" or prompt_slice is None:
        return options
    low = min(int(controls.first.value), n_slices - 1)
    last = int(controls.last.value)
    high = n_slices - 1 if last == LAST else min(last, n_slices - 1)
    if controls.direction.value == "forward":
        low = max(low, prompt_slice)
    elif controls.direction.value == "backward":
        high = min(high, prompt_slice)
    if not low <= prompt_slice <= high:
        raise InputError(f"the prompt is on slice {prompt_slice}, outside the chosen range {low}..{high}")
    if (low, high) != (0, n_slices - 1):
        options["z_limits"] = (low, high)
    return options


class PropagationSection(Section):
    """The propagation options (``box``: their container, labelled *propagation*)."""

    def __init__(self, margin: int) -> None:
        self.box = propagation_controls(margin)
        super().__init__([self.box], name="propagation_section")

    @property
    def locked(self) -> list:
        return [self.box]

    def session_options(self, kind: str, n_slices: int, prompt_slice: int | None) -> dict[str, Any]:
        """``Session.propagate`` keyword arguments of the options chosen (:func:`propagation_options`)."""
        return propagation_options(self.box, kind, n_slices, prompt_slice)


__all__ = ["DIRECTIONS", "PropagationSection", "STOP_RULES", "propagation_controls", "propagation_options"]
