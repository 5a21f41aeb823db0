"""The Compare dock's footer: Compare and Next worst slice in a row, and the status line (what the dock
did, or what to choose when there is nothing to compare)."""
from __future__ import annotations

from typing import Any

from magicgui.widgets import Container, Label, PushButton

from napari_medsam_eval._widgets.common._canvas_choice import CanvasChoice
from napari_medsam_eval._widgets.common._dock_layout import button_row
from napari_medsam_eval._widgets.common._status_text import wrap_status
from napari_medsam_eval._widgets.common._shortcuts import COMPARE_SHORTCUTS, with_shortcut

#: the status line when there is nothing to compare
CHOOSE_PAIR = ("choose a prediction and a ground truth (Labels layers of one shape) to compare; "
               "opening a benchmark row or segmenting picks them by itself")

class CompareFooter(Container):
    """Compare, Next worst slice and the canvas choice (:mod:`.._canvas_choice`) in a row, and the status line."""

    def __init__(self, viewer: Any) -> None:
        super().__init__(labels=True)
        self.margins = (0, 0, 0, 0)
        self.compare_button = PushButton(text="Compare", tooltip=(
            "compare now: the overlay of true positives (found), false positives (predicted only) and false "
            "negatives (missed), replacing the last one; the DSC and the per-slice plot"))
        self.worst_button = PushButton(text="Next worst slice", tooltip=with_shortcut(
            "go to the slice with the next lowest DSC among those with foreground", "next_worst", COMPARE_SHORTCUTS))
        self.canvas_view = CanvasChoice(viewer)
        self.actions = button_row(self.compare_button, self.worst_button, self.canvas_view)
        self.status = Label(label="status", value=CHOOSE_PAIR)
        wrap_status(self.status)
        self.extend([self.actions, self.status])


__all__ = ["CHOOSE_PAIR", "CompareFooter"]
