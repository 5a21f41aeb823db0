"""Corrections in the Segment widget: the anchor list and the propagate / correct workers.

A clinician propagates a box, looks at the result, draws a box or points on the slice
where it went wrong and presses *Correct slice*: the session adds that prompt as an
anchor (:meth:`napari_medsam_eval.session.session.Session.correct`), segments that slice again
and propagates from it up to the neighbouring anchors. The anchor list shows one line
per anchor, in slice order::

    slice 8: box (265, 231, 326, 283)
    slice 11: box (250, 220, 330, 290) + 2 points (1 +, 1 -)
    slice 4: absent
    slice 6: painted (412 pixels)

A slice painted on the prediction layer is a painted anchor (:mod:`._paint`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from magicgui.widgets import PushButton, Select

from ..core.prompt import Prompt, plain_number
from ..core.anchor_prompts import is_absent, is_painted
from ._layers import layer_kind
from ._propagation_options import propagation_options

if TYPE_CHECKING:
    from ..session.session import Session
    from .segment import SegmentWidget


def describe_anchor(prompt: Prompt) -> str:
    """One line of the anchor list: the slice, then its boxes, points or ``absent``."""
    head = "image: " if prompt.slice_index is None else f"slice {prompt.slice_index}: "
    if is_painted(prompt):
        return head + ("painted empty (absent)" if is_absent(prompt) or prompt.mask is None
                       else f"painted ({int(np.count_nonzero(prompt.mask))} pixels)")
    if is_absent(prompt):
        return head + "absent"
    parts = ["box (" + ", ".join(plain_number(v) for v in box) + ")" for box in prompt.boxes]
    if prompt.points:
        positive = sum(1 for label in prompt.point_labels if int(label) == 1)
        negative = len(prompt.points) - positive
        noun = "point" if len(prompt.points) == 1 else "points"
        parts.append(f"{len(prompt.points)} {noun} ({positive} +, {negative} -)")
    if prompt.mask is not None:
        parts.append("mask")
    return head + (" + ".join(parts) or "empty")


class AnchorList(Select):
    """A read-only list of a session's anchors, one line each in slice order.

    Its choices are a callable of the session, so the container's own ``reset_choices``
    (on every layer change) shows the session's anchors instead of wiping them; every
    refresh rebuilds the list, since magicgui would append a new line at the end.
    """

    def __init__(self, session: "Session", target: Callable[[], int | None] = lambda: None) -> None:
        super().__init__(label="anchors", choices=lambda _widget: [describe_anchor(p) for p in
                                                                   session.anchors(target())],
                         tooltip="the prompts of the current segmentation, one per slice (Propagate, Correct slice)")
        try:
            from qtpy.QtWidgets import QAbstractItemView

            self.native.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
            self.native.setMaximumHeight(90)
        except (ImportError, AttributeError):  # another magicgui backend: selectable, still changes nothing
            pass

    def reset_choices(self, *_args: Any) -> None:
        self.choices = ()  # static: clears the list, the session's callable stays the default
        super().reset_choices()

    @property
    def lines(self) -> list[str]:
        """The lines shown, top to bottom."""
        return [str(choice) for choice in self.choices]


def correction_controls(widget: "SegmentWidget") -> tuple[PushButton, AnchorList]:
    """The *Correct slice* button and the anchor list of ``widget``, connected.

    The button runs ``widget.correct_slice``; the list follows the session: it refreshes
    after every published result and when the backend changes, and a new image choice
    drops the anchors (a correction then starts over).
    """
    button = PushButton(text="Correct slice", tooltip="add the prompt drawn on this slice (or what you painted or "
                        "erased on the prediction layer there, kept as painted) to the propagated result and "
                        "propagate from it up to the other prompted slices")
    anchor_list = AnchorList(widget.session, lambda: int(widget.target_label.value))
    button.changed.connect(lambda: widget.correct_slice())

    def drop(_value: Any = None) -> None:
        widget.session.drop_anchors()
        anchor_list.reset_choices()

    widget.image_layer.changed.connect(drop)
    widget.target_label.changed.connect(lambda _value: anchor_list.reset_choices())  # that object's anchors
    for event in (widget.session.result_ready, widget.session.backend_changed):
        event.connect(lambda *_args: anchor_list.reset_choices())
    return button, anchor_list


def start_propagation(widget: "SegmentWidget", prompt: Prompt, correct: bool) -> Any:
    """Start ``widget``'s session propagating ``prompt`` (or correcting with it) in its worker runner.

    The same worker either way: off the GUI thread, ``(done, total)`` progress, Cancel;
    the widget's propagation options (:mod:`._propagation_options`) go to the session;
    the result goes to :meth:`Session.publish` (the prediction layer, the anchor list).
    """
    session = widget.session
    try:
        options = propagation_options(widget.propagation_box, layer_kind(widget._image()), session.n_slices,
                                      prompt.slice_index)
    except ValueError as exc:
        return widget.runner.error(str(exc))
    job, verb = (session.iter_correct, "correcting") if correct else (session.iter_propagate, "propagating")
    where = f" from slice {prompt.slice_index}" if correct else ""
    return widget.runner.start(
        job, prompt, **options, cancellable=True, text=f"{verb}{where} ...",
        progress=f"{verb} label {prompt.target_label}", returned=session.publish,
        steps=lambda done, total: f"{verb}: {done}/{total}", total=session.n_slices)


__all__ = ["AnchorList", "correction_controls", "describe_anchor", "start_propagation"]
