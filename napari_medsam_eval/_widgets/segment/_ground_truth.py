"""The Segment widget's ground-truth section: a protocol's prompt made from the ground truth.

*prompts from ground truth* folds the section's controls away; the ground-truth
layer follows the chosen image (as do the prompt layers and the object:
:meth:`GroundTruthSection.pick_layers`), so nothing of another image is
prompted, compared or overwritten. The prompt the session makes is shown by
the image section (``Session.prompt_changed``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from magicgui.widgets import CheckBox, ComboBox, PushButton, SpinBox
from napari.layers import Labels

from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.protocols import GROUND_TRUTH_PROTOCOLS
from napari_medsam_eval._widgets.common import _layers
from napari_medsam_eval._widgets.segment._object_memory import PromptLayerChoices
from napari_medsam_eval._widgets.segment._object_names import present_labels
from napari_medsam_eval._widgets.common._section import Section
from napari_medsam_eval._widgets.common._words import TIPS
from napari_medsam_eval._widgets.common._worker import WorkerRunner

if TYPE_CHECKING:
    import napari

    from napari_medsam_eval.session.session import Session

PROMPT_SLICE_CHOICES = ["key slice", "current slice"]


class GroundTruthSection(Section):
    """The ground-truth layer, the protocol and its options, and *Prompt from ground truth*."""

    def __init__(self, viewer: "napari.viewer.Viewer", session: "Session", runner: WorkerRunner,
                 layers: PromptLayerChoices, target_label: SpinBox,
                 region: Callable[[], tuple[int, ...]] | None = None) -> None:
        self.viewer, self.session, self.runner = viewer, session, runner
        self.layers, self.target_label = layers, target_label
        #: the ground-truth labels the object is (its region; default: its own value)
        self.region = region or (lambda: (int(target_label.value),))
        self.use_gt = CheckBox(text="prompts from ground truth", value=True,
                               tooltip="show or fold the ground-truth controls")
        self.gt_layer = ComboBox(label="ground truth", nullable=True, tooltip=TIPS["ground truth"],
                                 choices=_layers.layer_choices(viewer, Labels, ("prediction", "overlay", "changes")))
        self.protocol = ComboBox(label="protocol", choices=list(GROUND_TRUTH_PROTOCOLS), value="medsam2",
                                 tooltip=TIPS["protocol"])
        self.prompt_slice = ComboBox(label="drawn on", choices=PROMPT_SLICE_CHOICES, value="key slice",
                                     tooltip=TIPS["prompt slice"])
        self.mode = SpinBox(label="mazurowski mode", min=1, max=5, value=1, visible=False,
                            tooltip=TIPS["mazurowski mode"])
        self.gt_prompt_button = PushButton(text="Prompt from ground truth", tooltip=(
            "draw the chosen protocol's prompt for the object in the prompt layers, on its slice"))
        super().__init__([self.use_gt, self.gt_layer, self.protocol, self.prompt_slice, self.mode,
                          self.gt_prompt_button], name="ground_truth_section")
        self.gt_prompt_button.changed.connect(lambda *_a: self.prompt_from_ground_truth())
        self.protocol.changed.connect(lambda value: setattr(self.mode, "visible", value == "mazurowski"))
        self.use_gt.changed.connect(self.fold)

    @property
    def locked(self) -> list:
        return [w for w in self if w is not self.use_gt]

    def fold(self, shown: bool) -> None:
        """Show or hide the ground-truth controls (the protocol's mode only for Mazurowski's)."""
        for widget in (self.gt_layer, self.protocol, self.prompt_slice, self.gt_prompt_button):
            widget.visible = bool(shown)
        self.mode.visible = bool(shown) and self.protocol.value == "mazurowski"

    def protocol_options(self, protocol: str) -> dict[str, Any]:
        """The chosen protocol's options (Mazurowski's prompt mode)."""
        return {"modes": (int(self.mode.value),)} if protocol == "mazurowski" else {}

    def prompt_from_ground_truth(self) -> Prompt | None:
        """Fill the prompt layers from the ground truth (chosen protocol and target) and go to its slice."""
        try:
            image = _layers.checked_image(self.layers.image_layer.value)
            label_map = _layers.label_map_for(image, self.gt_layer.value)
            index = _layers.current_index(self.viewer, image) if self.prompt_slice.value == "current slice" else None
            return self.session.prompt_from_ground_truth(
                label_map, int(self.target_label.value), self.protocol.value, slice_index=index,
                kind=_layers.layer_kind(image), labels=self.region(), **self.protocol_options(self.protocol.value))
        except (ValueError, TypeError) as exc:
            return self.runner.error(str(exc))

    def pick_layers(self, _value: Any = None) -> None:
        """Keep the ground truth and prompt layers on the chosen image: when the image changes (or a
        chosen layer does not fit it), pick its own (:func:`._layers.layers_of_image`) and an object its
        ground truth holds, so nothing of the previous image is prompted, compared or overwritten."""
        image, layers = self.layers.image_layer.value, self.layers
        if image is None:
            return
        combos = (self.gt_layer, layers.box_layer, layers.point_layer)
        found = _layers.layers_of_image(self.viewer.layers, image, tuple(combo.value for combo in combos))
        for combo, layer in zip(combos, found):
            if combo.value is not layer:
                combo.value = layer
        present = present_labels(found[0])
        value = int(self.target_label.value)
        try:
            own = self.region() == (value,)
        except ValueError:
            own = False
        if present and value not in present and own:  # (an object that is a region may have a value of its own)
            self.target_label.value = present[0]


__all__ = ["GroundTruthSection", "PROMPT_SLICE_CHOICES"]
