"""The canvas choice: which view of the image on screen the canvas shows (:mod:`._canvas`).

A view shows at most three colour roles, so what an image's layers hold takes several views: truth and
prediction, TP / FP / FN, why (too much, too little), A vs B, a variant, sensitivity, the worst run. This combo box
lists the views the image's layers allow now, shows the one on the canvas, and composes the one chosen. It follows
the composer (:data:`._canvas.CHANGED`): a view a dock opens is shown here too.
"""
from __future__ import annotations

from typing import Any

from magicgui.widgets import ComboBox
from napari.layers import Image

from napari_medsam_eval._widgets.common._canvas import CHANGED, canvas_of, current_view, show_view, views_of

class CanvasChoice(ComboBox):
    """The views of the image on screen; choosing one shows it (the legend on the canvas names its colours)."""

    def __init__(self, viewer: Any) -> None:
        self.viewer = viewer
        super().__init__(choices=self._choices, value=None, nullable=True, tooltip=(
            "what the canvas shows of the image on screen, at most three colours at a time, named in the legend "
            "at the canvas's top left: truth & prediction, TP / FP / FN, why (too much / too little), A vs B, a "
            "variant, sensitivity, the worst run"))
        self.native.setAccessibleName("canvas view")  # in a row of buttons: no label of its own
        self._following = False
        self.changed.connect(self._chosen)
        CHANGED.composed.connect(self._follow)  # (psygnal holds a bound method weakly)

    def image(self) -> Image | None:
        """The image the canvas showed a view of last (None when it is gone)."""
        name = canvas_of(self.viewer).image
        found = [layer for layer in self.viewer.layers if isinstance(layer, Image) and layer.name == name]
        return found[0] if found else None

    def _choices(self, _widget: Any = None) -> list[str]:
        image = self.image()
        return [] if image is None else views_of(self.viewer, image)

    def _follow(self, viewer: Any, image: str, view: str) -> None:
        if viewer is not self.viewer or canvas_of(self.viewer).image != image:
            return
        self._following = True
        try:
            self.reset_choices()
            if view in self.choices:
                self.value = view
        finally:
            self._following = False

    def _chosen(self, view: str | None) -> None:
        image = self.image()
        if self._following or view is None or image is None or view == current_view(self.viewer, image):
            return
        show_view(self.viewer, view, image)


__all__ = ["CanvasChoice"]
