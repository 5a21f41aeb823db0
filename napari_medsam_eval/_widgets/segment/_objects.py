"""Several objects and undo in the Segment widget: the object controls and the attempt history.

Each object is a target label, written into the image's prediction layer (:mod:`._prediction_layer`),
where it keeps its own mask, nested or not; its *region* is the ground-truth labels it is (empty: its own
value; ``1,3``: the liver with the tumour inside it). *Next* / *previous object* step through the label
values of the ground truth (without one: +1 / -1), named from its ``label_names``; the prompt layers keep
each object's prompts apart, and each image its object (:mod:`._object_memory`). Every published result
is an :class:`~napari_medsam_eval.session.attempts.Attempt`; *Undo* (Shift+Z) puts back the object's mask
before the image's last attempt and *Changes* shows what the object's last attempt changed (added bluish
green, removed vermillion). The title (the object's name) follows the object, the image and the ground
truth, elided when the dock is narrow; the object is said to the other docks (:func:`._sessions.chosen_object`).
"""
from __future__ import annotations

import time
import weakref
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from magicgui.widgets import Container, LineEdit, PushButton, SpinBox
from napari.layers import Labels
from psygnal import Signal

from napari_medsam_eval._layer_style import CHANGE_COLORS
from napari_medsam_eval.session.attempts import ADDED, REMOVED, Attempt, AttemptHistory
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval._widgets.common._canvas import show_view
from napari_medsam_eval._widgets.common._layers import find_layer, transform_kwargs
from napari_medsam_eval._widgets.common._elided import ElidedLabel
from napari_medsam_eval._widgets.segment._object_memory import ObjectMemory, PromptLayerChoices
from napari_medsam_eval._widgets.segment._object_names import object_name, parse_region, present_labels
from napari_medsam_eval._widgets.segment._prediction_layer import object_mask, write_object
from napari_medsam_eval._widgets.common._section import Section
from napari_medsam_eval._widgets.common._sessions import chosen_object
from napari_medsam_eval._widgets.common._shortcuts import with_shortcut
from napari_medsam_eval._widgets.common._words import TIPS
from napari_medsam_eval._widgets.common._worker import WorkerRunner

if TYPE_CHECKING:
    import napari
    from napari_medsam_eval.session.session import Session


class ObjectControls(Container):
    """Previous / next object, the object's name, Undo and Changes of one Segment widget's session.

    ``target_label`` is the object's spin box, ``truth`` gives the chosen ground-truth layer (its labels
    are the objects); results are written into the prediction layer of the image they were made on.
    """

    #: an attempt was undone (the anchors of its object changed)
    undone = Signal(object)

    def __init__(self, viewer: "napari.viewer.Viewer", session: "Session", runner: WorkerRunner,
                 layers: PromptLayerChoices, target_label: SpinBox, truth: Callable[[], Labels | None],
                 region: LineEdit | None = None) -> None:
        self.viewer, self.session, self.runner = viewer, session, runner
        self.layers, self.target_label, self.truth = layers, target_label, truth
        #: the object's region field (the ground-truth labels it is) and each object's text in it
        self.region = region if region is not None else LineEdit(value="")
        self._regions: dict[int, str] = {}
        self.history = AttemptHistory()
        #: each attempt's object anchors after it (Undo puts back the previous attempt's)
        self._anchors: "weakref.WeakKeyDictionary[Attempt, Any]" = weakref.WeakKeyDictionary()
        self.memory = ObjectMemory(layers, target_label)  # each object's prompts, each image's object
        #: when the last action started and its name (``segment slice``, ``propagate``, ``correct``); None: none yet
        self.started: tuple[float, str] | None = None
        self.previous_button = PushButton(text="< object", tooltip=with_shortcut(
            "the previous object: the next lower label value in the ground truth", "previous_object"))
        self.next_button = PushButton(text="object >", tooltip=with_shortcut(
            "the next object: the next higher label value in the ground truth (its prompts kept apart)",
            "next_object"))
        self.undo_button = PushButton(text="Undo", tooltip=with_shortcut(
            "put back the prediction before the last attempt on this image (any object)", "undo"))
        self.changes_button = PushButton(text="Changes", tooltip="show what the last attempt of this object "
                                         "changed: added pixels bluish green, removed vermillion")
        #: the object's name, shown beside its label value (:class:`ObjectSection`)
        self.title = ElidedLabel(value=object_name(None, self.memory.shown))
        super().__init__(widgets=[self.previous_button, self.next_button, self.undo_button, self.changes_button],
                         layout="horizontal", labels=False)
        self.previous_button.changed.connect(lambda: self.step(-1))
        self.next_button.changed.connect(lambda: self.step(+1))
        self.undo_button.changed.connect(lambda: self.undo())
        self.changes_button.changed.connect(lambda: self.show_changes())
        self.chosen = chosen_object(viewer)
        target_label.changed.connect(self._show_region, priority=1)  # before the title reads it
        self.region.changed.connect(self._keep_region)
        target_label.changed.connect(self.on_object)
        # after the ground truth followed the image (GroundTruthSection.pick_layers, priority 0)
        layers.image_layer.changed.connect(self.on_object, priority=-1)

    def on_object(self, _value: Any = None) -> None:
        """Another object or image: its title from the ground truth chosen; the other docks are told."""
        self.show_title()
        image = self.layers.image_layer.value
        self.chosen.choose(getattr(image, "name", None), int(self.target_label.value))

    def show_title(self, _value: Any = None) -> None:
        """The title: the object's name in the ground truth chosen now (``label N`` without one)."""
        try:
            labels = self.labels()
        except ValueError:
            labels = None
        self.title.value = object_name(self.truth(), int(self.target_label.value), labels)

    def labels(self, value: int | None = None) -> tuple[int, ...]:
        """The ground-truth labels object ``value`` (default: the one chosen) is: its region, else its own
        value; a ValueError naming the region field when its text cannot be read."""
        value = int(self.target_label.value) if value is None else int(value)
        return parse_region(self._regions.get(value, "")) or (value,)

    def _show_region(self, value: int) -> None:
        """Another object: its region in the field."""
        self.region.value = self._regions.get(int(value), "")

    def _keep_region(self, text: str) -> None:
        """The region field changed: kept for the object chosen, its title follows."""
        value = int(self.target_label.value)
        if text:
            self._regions[value] = str(text)
        else:
            self._regions.pop(value, None)
        self.show_title()

    def begin(self, action: str) -> None:
        """An action starts now: its result's attempt is timed from here and named ``action``."""
        self.started = (time.perf_counter(), action)

    @property
    def action(self) -> str:
        """The name of the last action begun ("" before the first)."""
        return self.started[1] if self.started is not None else ""

    # -- objects --------------------------------------------------------------

    def step(self, direction: int) -> int:
        """Go to the next (+1) or previous (-1) object; returns its label value."""
        current = int(self.target_label.value)
        present = present_labels(self.truth())
        later = [v for v in present if (v > current if direction > 0 else v < current)]
        if later:
            value = later[0] if direction > 0 else later[-1]
        elif present:  # wrap around
            value = present[0] if direction > 0 else present[-1]
        else:
            value = max(1, current + direction)
        self.target_label.value = value
        return value

    # -- attempts ---------------------------------------------------------------

    def commit(self, prompt: Prompt, mask: np.ndarray, index: int | None = None, stops: list | None = None
               ) -> Labels | None:
        """Write a result as its object into the image's prediction layer and keep it as an attempt.

        The layer the user was drawing in stays the active one; Ctrl+Z on the
        prediction layer is this Undo (not napari's paint undo). None (nothing written) when the image the
        job ran on was closed meanwhile.
        """
        viewer, session = self.viewer, self.session
        name = session.image_name  # the image the job ran on (the choice may have changed since)
        if name not in viewer.layers:  # closed while the job ran: its result belongs to no open image
            self.runner.status.value = f"image {name} was closed while it was segmented: its result was dropped"
            return None
        image = viewer.layers[name]
        active = viewer.layers.selection.active
        try:
            labels = self.labels(prompt.target_label)
        except ValueError:
            labels = (int(prompt.target_label),)
        layer = write_object(viewer, image, prompt.target_label, mask, index=index,
                             metadata={"prompt": prompt.to_dict(), "model": session.model_name,
                                       "stops": stops or [], "labels": list(labels),
                                       "name": object_name(self.truth(), int(prompt.target_label), labels)})
        layer.bind_key("Control-Z", lambda _layer: self.undo(), overwrite=True)
        if active is not None and active in viewer.layers:
            viewer.layers.selection.active = active
        started, action = self.started or (time.perf_counter(), "segment")
        attempt = self.history.record(Attempt.of(
            image.name, prompt.target_label, object_mask(layer, prompt.target_label), action=action,
            model=session.model_name, prompt=prompt.to_dict(), seconds=time.perf_counter() - started))
        self._anchors[attempt] = session.anchor_snapshot(prompt.target_label)
        return layer

    def undo(self) -> Attempt | None:
        """Put back the object's mask before the chosen image's last attempt (its anchors as they were
        then); None: nothing to undo."""
        if self.runner.busy:
            return None
        image = self.layers.image_layer.value
        undone = self.history.undo(image.name if image is not None else None)
        if undone is None:
            self.runner.status.value = "nothing to undo"
            return None
        attempt, before = undone
        viewer = self.viewer
        if attempt.image not in viewer.layers:
            self.runner.status.value = f"cannot undo: image {attempt.image} is no longer open"
            return None
        write_object(viewer, viewer.layers[attempt.image], attempt.target_label, before)
        previous = self.history.last(attempt.image, attempt.target_label)
        self.session.restore_anchors(attempt.target_label, self._anchors.get(previous) if previous else None,
                                     image=attempt.image)
        self.target_label.value = attempt.target_label
        self.undone.emit(attempt)
        self.runner.status.value = f"undid: {attempt.describe()}"
        return attempt

    def show_changes(self) -> Labels | None:
        """A Labels layer of what the object's last attempt changed (added / removed)."""
        image = self.layers.image_layer.value
        target = int(self.target_label.value)
        changes = None if image is None else self.history.changes(image.name, target)
        if changes is None:
            self.runner.status.value = f"no attempt of label {target} yet"
            return None
        name = f"{image.name} changes [label {target}]"
        layer = find_layer(self.viewer, name, Labels, changes.shape)
        if layer is None:
            layer = self.viewer.add_labels(changes, name=name, colormap=CHANGE_COLORS, opacity=0.8, metadata={
                "role": "changes", "image": image.name}, **transform_kwargs(image))
        else:
            layer.data = changes
        show_view(self.viewer, "changes", image, changes=layer)  # the canvas composer: order, style, legend
        added, removed = int((changes == ADDED).sum()), int((changes == REMOVED).sum())
        self.runner.status.value = f"label {target}, last attempt: {added} pixels added, {removed} removed"
        return layer


class ObjectSection(Section):
    """The object: its label value and name in one row, its region, then its controls (:class:`ObjectControls`)."""

    def __init__(self, viewer: "napari.viewer.Viewer", session: "Session", runner: WorkerRunner,
                 layers: PromptLayerChoices, truth: Callable[[], Labels | None]) -> None:
        self.target_label = SpinBox(label="object (label)", min=1, max=65535, value=1, tooltip=TIPS["object"])
        self.region = LineEdit(label="region", value="", tooltip=TIPS["region"])
        self.region.native.setPlaceholderText("its own label; or e.g. 1,3")
        self.objects = ObjectControls(viewer, session, runner, layers, self.target_label, truth, self.region)
        self.object_row = Container(widgets=[self.target_label, self.objects.title], layout="horizontal",
                                    labels=False, label="object (label)", tooltip=TIPS["object"])
        self.object_row.margins = (0, 0, 0, 0)
        self.object_row.native.layout().setStretchFactor(self.objects.title.native, 1)  # the name: the width left
        super().__init__([self.object_row, self.region, self.objects], name="object_section")

    @property
    def locked(self) -> list:
        return list(self)


__all__ = ["ObjectControls", "ObjectSection", "PromptLayerChoices"]
