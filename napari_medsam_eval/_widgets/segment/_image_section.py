"""The Segment widget's image section: the image, encode ahead, the prompt layers and the next point's polarity.

The box and point layers follow the layers the user draws in (:mod:`._drawing`);
*New prompt layers* makes a pair for the chosen image; a ground-truth prompt the
session makes (``Session.prompt_changed``) is shown in them, on its slice.

Choosing an image brings it into view (:meth:`ImageSection.show_chosen`, :mod:`._view`): visible,
the other images hidden, the camera fitted, on the slice of its (shown object's) prompt, else
the middle slice of the object in its ground truth, else its middle slice. A refresh of the choices
that keeps the image (napari asks every docked widget to refresh whenever a layer is added, removed
or renamed: a benchmark row opening renames its layers) moves nothing: the view is left where the
user, or the widget that changed the layers, put it.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from magicgui.widgets import ComboBox, PushButton
from napari.layers import Image, Labels, Points, Shapes

from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.evaluation.mask_comparison import middle_slice
from napari_medsam_eval.session.session import Session
from napari_medsam_eval._widgets.common import _layers
from napari_medsam_eval._widgets.common import _prompt_layers
from napari_medsam_eval._widgets.segment._drawing import follow_drawing, polarity_control
from napari_medsam_eval._widgets.segment._encode_ahead import EncodeAhead, encode_ahead_controls
from napari_medsam_eval._widgets.common._section import Section
from napari_medsam_eval._widgets.common._unit_words import unit_of
from napari_medsam_eval._widgets.common._view import bring_into_view
from napari_medsam_eval._widgets.common._worker import WorkerRunner

if TYPE_CHECKING:
    import napari


class ImageSection(Section):
    """The image to segment and the layers its prompts are drawn in."""

    def __init__(self, viewer: "napari.viewer.Viewer", session: Session, runner: WorkerRunner,
                 with_model: Callable[[Callable[[], Any]], Any]) -> None:
        self.viewer, self.session, self.runner = viewer, session, runner
        choices = _layers.layer_choices
        self.image_layer = ComboBox(label="image", choices=choices(viewer, Image), tooltip="the image to segment")
        self.encode_box = encode_ahead_controls()
        self.box_layer = ComboBox(label="boxes", nullable=True, choices=choices(viewer, Shapes),
                                  tooltip="the Shapes layer with box prompts (the one you draw in is picked)")
        self.point_layer = ComboBox(label="points", nullable=True, choices=choices(viewer, Points),
                                    tooltip="the Points layer with point prompts (the one you draw in is picked)")
        self.polarity = polarity_control()
        self.new_prompt_layers_button = PushButton(text="New prompt layers", tooltip="a box and a point layer")
        super().__init__([self.image_layer, self.encode_box, self.box_layer, self.point_layer, self.polarity,
                          self.new_prompt_layers_button], name="image_section")
        self.encoder = EncodeAhead(session, viewer, self.image_layer, with_model, self.encode_box)
        self.new_prompt_layers_button.changed.connect(lambda *_a: self.new_prompt_layers())
        session.prompt_changed.connect(self._show_prompt)
        follow_drawing(self)
        #: the image chosen last, brought into view by :meth:`show_chosen` or already there when the widget
        #: was docked (weak: a removed layer is let go)
        self._shown: Callable[[], Image | None] = _weak(self.image_layer.value)

    @property
    def locked(self) -> list:
        return [self.image_layer, self.box_layer, self.point_layer, self.new_prompt_layers_button]

    @property
    def busy(self) -> bool:
        return self.runner.busy

    def image(self) -> Image:
        """The chosen image; ValueError when there is none (or it is multiscale)."""
        return _layers.checked_image(self.image_layer.value)

    def new_prompt_layers(self) -> tuple[Shapes, Points] | None:
        """Create the box and point layers for the chosen image and select them."""
        try:
            image = self.image()
        except ValueError as exc:
            return self.runner.error(str(exc))
        boxes, points = _prompt_layers.add_prompt_layers(self.viewer, image)
        self.reset_choices()
        self.box_layer.value, self.point_layer.value = boxes, points
        return boxes, points

    def _show_prompt(self, prompt: Prompt) -> None:
        """The session made a ground-truth prompt: show it in the prompt layers, on its slice."""
        image = self.image()
        boxes, points = self.box_layer.value, self.point_layer.value
        if boxes is None or points is None:
            boxes, points = self.new_prompt_layers()
        _prompt_layers.show_prompt(prompt, image, boxes, points)
        if prompt.slice_index is not None:
            _layers.go_to_index(self.viewer, image, prompt.slice_index)
        self.runner.status.value = (f"{prompt.protocol} prompt for label {prompt.target_label} "
                                    f"on {unit_of(_layers.layer_kind(image))} {prompt.slice_index}")

    def show_chosen(self, truth: Labels | None, target_label: int) -> int | None:
        """Bring the chosen image into view (its prompt and ground-truth layers with it) on the slice of
        its prompt, else the middle slice of object ``target_label`` in ``truth`` (of any object), else
        its middle slice; returns that slice (None: no image, a 2D one, or the image brought into view
        last, still chosen after a refresh of the choices)."""
        image = self.image_layer.value
        if image is None or getattr(image, "multiscale", False) or image is self._shown():
            return None
        self._shown = _weak(image)
        boxes, points = self.box_layer.value, self.point_layer.value
        index = None
        if _layers.layer_kind(image) != "image":
            prompted = _prompt_layers.prompt_slices(image, boxes, points)
            index = prompted[0] if prompted else _middle(image, truth, int(target_label))
        bring_into_view(self.viewer, image, index, (truth, boxes, points))
        return index

    def drawn_prompt(self, target_label: int, index: int | None = None) -> Prompt:
        """The prompt drawn for ``target_label`` on slice ``index`` (default: the current one, else the only
        prompted one), resolved by the session (the last ground-truth prompt itself when still shown)."""
        drawn = _prompt_layers.drawn_prompt(self.viewer, self.image(), int(target_label),
                                            self.box_layer.value, self.point_layer.value, index)
        return self.session.resolve_prompt(drawn)


def _weak(layer: Image | None) -> Callable[[], Image | None]:
    """A weak reference to ``layer`` (None: one that gives None)."""
    return (lambda: None) if layer is None else weakref.ref(layer)


def _middle(image: Image, truth: Labels | None, target_label: int) -> int:
    """The middle slice of object ``target_label`` in ``truth`` (of any object), else of ``image``."""
    if _layers.belongs_to(truth, image, "ground_truth"):
        labels = np.asarray(truth.data)
        index = middle_slice(labels == target_label)
        index = middle_slice(labels != 0) if index is None else index
        if index is not None:
            return index
    return _layers.spatial_shape(image)[0] // 2


__all__ = ["ImageSection"]
