"""The Segment widget's image section: the image, encode ahead, the prompt layers and the next point's polarity.

The box and point layers follow the layers the user draws in (:mod:`._drawing`);
*New prompt layers* makes a pair for the chosen image; a ground-truth prompt the
session makes (``Session.prompt_changed``) is shown in them, on its slice.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from magicgui.widgets import ComboBox, PushButton
from napari.layers import Image, Points, Shapes

from ..core.prompt import Prompt
from ..session.session import Session
from . import _layers, _prompt_layers
from ._drawing import follow_drawing, polarity_control
from ._encode_ahead import EncodeAhead, encode_ahead_controls
from ._section import Section
from ._worker import WorkerRunner

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
                                    f"on slice {prompt.slice_index}")

    def drawn_prompt(self, target_label: int, index: int | None = None) -> Prompt:
        """The prompt drawn for ``target_label`` on slice ``index`` (default: the current one, else the only
        prompted one), resolved by the session (the last ground-truth prompt itself when still shown)."""
        drawn = _prompt_layers.drawn_prompt(self.viewer, self.image(), int(target_label),
                                            self.box_layer.value, self.point_layer.value, index)
        return self.session.resolve_prompt(drawn)


__all__ = ["ImageSection"]
