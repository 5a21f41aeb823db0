"""Corrections in the Segment widget: the anchor list (the propagate / correct jobs: :mod:`._segment_runs`).

A clinician propagates a box, looks at the result, draws a box or points on the slice
where it went wrong and presses *Correct slice*: the session adds that prompt as an
anchor (:meth:`napari_medsam_eval.session.session.Session.correct`), segments that slice again
and propagates from it up to the neighbouring anchors. The anchor list shows one line
per anchor, in slice order::

    slice 8: box (265, 231, 326, 283)
    slice 11: box (250, 220, 330, 290) + 2 points (1 +, 1 -)
    slice 4: absent
    slice 6: painted (412 pixels)

A slice painted on the prediction layer is a painted anchor (:mod:`._paint`). Each image keeps
its anchors: the list shows the chosen image's, and choosing an image again brings its own back.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from magicgui.widgets import ComboBox, Select, SpinBox

from napari_medsam_eval.core.prompt import Prompt, plain_number
from napari_medsam_eval.core.anchor_prompts import is_absent, is_painted
from napari_medsam_eval._widgets.common._unit_words import in_units
from napari_medsam_eval._widgets.common._words import TIPS

if TYPE_CHECKING:
    from napari_medsam_eval.session.session import Session


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

    def __init__(self, session: "Session", target: Callable[[], int | None] = lambda: None,
                 image: Callable[[], str | None] = lambda: None, unit: Callable[[], str] = lambda: "slice"
                 ) -> None:
        super().__init__(label="anchors", choices=lambda _widget: [in_units(describe_anchor(p), unit()) for p in
                                                                   session.anchors(target(), image())],
                         tooltip=TIPS["anchors"])
        try:
            from qtpy.QtWidgets import QAbstractItemView

            self.native.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
            self.native.setMaximumHeight(90)
        except (ImportError, AttributeError):  # another magicgui backend: selectable, still changes nothing
            pass

    def reset_choices(self, *_args: Any) -> None:
        self.choices = ()  # static: clears the list, the session's callable stays the default
        super().reset_choices()
        native = self.native
        for row in range(native.count() if hasattr(native, "count") else 0):
            item = native.item(row)  # a line wider than the list is elided: hovering shows it whole
            item.setToolTip(item.text())

    @property
    def lines(self) -> list[str]:
        """The lines shown, top to bottom."""
        return [str(choice) for choice in self.choices]


def follow_anchors(anchor_list: AnchorList, session: "Session", image_layer: ComboBox, target_label: SpinBox
                   ) -> AnchorList:
    """Keep ``anchor_list`` on the session: it refreshes after every published result and when the backend,
    the object or the image changes (each image keeps its anchors: the chosen one's are shown)."""
    image_layer.changed.connect(lambda _value: anchor_list.reset_choices())
    target_label.changed.connect(lambda _value: anchor_list.reset_choices())  # that object's anchors
    for event in (session.result_ready, session.backend_changed):
        event.connect(lambda *_args: anchor_list.reset_choices())
    return anchor_list


__all__ = ["AnchorList", "describe_anchor", "follow_anchors"]
