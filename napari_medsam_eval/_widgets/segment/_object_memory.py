"""Each image's objects in the Segment widget: every object's prompts and the object each image is on.

An image's prompt layers show one object's boxes and points at a time: choosing another object
keeps the shown one's (by image and label) and shows the chosen one's. Choosing another image
keeps the object the image left was on; choosing it again goes back to that object, whose prompts
are still in its layers. With its prediction layer, its anchors (``Session.anchors(image=...)``)
and its undo history (:mod:`._objects`) also its own, nothing of an image is lost on a switch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from magicgui.widgets import ComboBox, SpinBox


class PromptLayerChoices(Protocol):
    """The chosen image and prompt layers (the image section's combo boxes)."""

    image_layer: "ComboBox"
    box_layer: "ComboBox"
    point_layer: "ComboBox"


class ObjectMemory:
    """The prompts of every object of every image, and each image's object, for one Segment widget.

    ``layers`` are the image and prompt-layer choices, ``target_label`` the object's spin box; its handlers
    run before the ground truth follows the image (``GroundTruthSection.pick_layers``).
    """

    def __init__(self, layers: "PromptLayerChoices", target_label: "SpinBox") -> None:
        self.layers, self.target_label = layers, target_label
        self._prompts: dict[tuple[str, int], tuple[Any, Any]] = {}  # (image, label) -> (boxes, points) data
        self._objects: dict[str, int] = {}  # image -> the object it was on when another image was chosen
        #: the object whose prompts the chosen image's prompt layers show
        self.shown = int(target_label.value)
        self._image = getattr(layers.image_layer.value, "name", None)
        target_label.changed.connect(self.on_target)
        layers.image_layer.changed.connect(self.on_image)

    def on_target(self, value: int) -> None:
        """The target changed: keep the old object's prompts, show the new one's."""
        image = self.layers.image_layer.value
        boxes, points = self.layers.box_layer.value, self.layers.point_layer.value
        if image is not None and value != self.shown:
            self._prompts[(image.name, self.shown)] = (
                [np.array(s) for s in boxes.data] if boxes is not None else [],
                (np.array(points.data), points.features.copy()) if points is not None else None)
            boxes_data, points_data = self._prompts.get((image.name, int(value)), ([], None))
            if boxes is not None:
                boxes.data = []
                if boxes_data:
                    boxes.add_rectangles(boxes_data)
            if points is not None:
                points.data = points_data[0] if points_data else np.empty((0, points.ndim))
                if points_data is not None:
                    points.features = points_data[1]
        self.shown = int(value)

    def on_image(self, image: Any) -> None:
        """Another image chosen: remember the object of the one left, go back to the chosen one's (its
        layers still show that object's prompts: nothing is swapped)."""
        if self._image is not None:
            self._objects[self._image] = self.shown
        self._image = getattr(image, "name", None)
        value = self._objects.get(self._image) if self._image is not None else None
        if value is not None:
            self.shown = value
            self.target_label.value = value


__all__ = ["ObjectMemory", "PromptLayerChoices"]
