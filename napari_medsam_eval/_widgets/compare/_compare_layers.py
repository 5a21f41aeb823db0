"""The Compare widget's layer choice: the prediction, the ground truth and the target label compared.

It picks its pair by itself: a layer with the role ``prediction`` (its
``target_label`` too) or ``ground_truth`` is chosen as soon as it is added to
the viewer (by the Segment widget, a benchmark row opened, the reader), and
the pair is compared again when their data change (a prediction's
``target_label`` is taken again then: a benchmark row opened after another
reuses the layers). Edits and choices in quick succession make one
:attr:`LayerChoice.pair_changed`, emitted :data:`SETTLE_MS` after the last.

The target label follows the Segment widget's object (:func:`._sessions.chosen_object`, either dock
docked first) while the prediction compared is the prediction of the image that widget is on, and
the ground truth compared fits it: choosing *object >* there compares that object here.
"""
from __future__ import annotations

from typing import Any

from magicgui.widgets import ComboBox, Container, SpinBox
from napari.layers import Labels
from psygnal import Signal
from qtpy.QtCore import QTimer

from napari_medsam_eval._widgets.common._layers import current_index, follow_viewer, go_to_index, layer_choices, with_role
from napari_medsam_eval._widgets.common._sessions import chosen_object
from napari_medsam_eval._widgets.common._words import TIPS

#: milliseconds of quiet after a change before the pair is compared again
SETTLE_MS = 150


class LayerChoice(Container):
    """Prediction, ground truth (Labels layers of the viewer, overlays left out) and the target label."""

    #: the pair, the target or their data changed (once, after the changes settled)
    pair_changed = Signal()

    def __init__(self, viewer: Any) -> None:
        super().__init__(labels=True)
        self.margins = (0, 0, 0, 0)
        self.viewer = viewer
        self._watched: list[Labels] = []
        #: the choices' callable: the viewer's Labels layers by name, but overlays
        self.layer_choices = choices = layer_choices(viewer, Labels, ("overlay",))
        self.pred_layer = ComboBox(label="prediction", nullable=True, choices=choices,
                                   tooltip="the predicted mask (a Labels layer); a layer with the role "
                                           "'prediction' is picked by itself")
        self.gt_layer = ComboBox(label="ground truth", nullable=True, choices=choices,
                                 tooltip="the reference mask, a Labels layer of the prediction's shape")
        self.target_label = SpinBox(label="target label", min=1, max=65535, value=1, tooltip=TIPS["target label"])
        self.extend([self.pred_layer, self.gt_layer, self.target_label])
        self._timer: QTimer | None = QTimer(self.native)  # dies with the widget
        self._timer.setSingleShot(True)
        self._timer.setInterval(SETTLE_MS)
        self._timer.timeout.connect(self.pair_changed.emit)
        self.pred_layer.changed.connect(self._on_selection)
        self.gt_layer.changed.connect(self._on_selection)
        self.target_label.changed.connect(self.schedule)
        events = viewer.layers.events
        self._chosen = chosen_object(viewer)
        #: the image of the Segment object followed last (a new one: the other image's pair is stale)
        self._followed: str | None = None
        follow_viewer(self, [(events.inserted, self._on_inserted), (events.removed, self.refresh),
                             (events.reordered, self.refresh), (self._chosen.changed, self.follow_object)],
                      on_close=self._on_close)

    def _on_close(self) -> None:
        """The Qt widget is gone: forget the timer and the compared layers' events."""
        self._timer = None
        self._watch([])

    def follow_object(self, image: str, label: int) -> bool:
        """The Segment widget went to object ``label`` of ``image``: compare that object, in ``image``'s own
        prediction (and a ground truth that fits it) when there is one; when the prediction compared is
        another image's and ``image`` has none yet, compare nothing (never the other image's pair as if it were
        this one's; another object of the same image leaves a pair the user chose alone). Whether the target
        label followed."""
        switched, self._followed = image != self._followed, image
        pred, gt = self.pair
        if pred is None or pred.metadata.get("image") != image:
            own = next((layer for layer in reversed(self.viewer.layers) if isinstance(layer, Labels)
                        and layer.metadata.get("role") == "prediction" and layer.metadata.get("image") == image), None)
            if own is not None:
                self._use(own)
                named = [layer for layer in self.viewer.layers if isinstance(layer, Labels)
                         and layer.metadata.get("role") == "ground_truth" and layer.name.startswith(image)
                         and layer.data.shape == own.data.shape]
                if named and self.gt_layer.value is not named[-1]:
                    self.gt_layer.value = named[-1]  # that image's own ground truth, not one of its shape
            elif pred is not None and pred.metadata.get("image") not in (None, image):
                if not switched:  # another object of the image: the pair the user chose stays
                    return False
                self.pred_layer.value = None  # the other image's: stale here
                self.schedule()
                return False
            pred, gt = self.pair
        if pred is None or gt is None or gt.data.shape != pred.data.shape:
            return False
        self.target_label.value = int(label)
        return True

    @property
    def pair(self) -> tuple[Labels | None, Labels | None]:
        """(prediction, ground truth) chosen."""
        return self.pred_layer.value, self.gt_layer.value

    def reset_choices(self, *args: Any) -> None:
        """Refresh the layer choices, keeping the compared layers when they were renamed (the choices
        go by name: a renamed layer would be dropped, as when a benchmark row reuses the layers)."""
        chosen = self.pair
        super().reset_choices(*args)
        for combo, layer in zip((self.pred_layer, self.gt_layer), chosen):
            if layer is not None and combo.value is not layer and any(layer is x for x in self.viewer.layers):
                combo.value = layer

    def refresh(self, _event: Any = None) -> None:
        """New choices; an empty prediction or ground truth takes a layer with that role."""
        self.reset_choices()
        layers = self.viewer.layers
        if self.pred_layer.value is None and (pred := self._prediction_to_pick()) is not None:
            self._use(pred)
        if self.gt_layer.value is None:
            truths = [layer for layer in layers if isinstance(layer, Labels)
                      and layer.metadata.get("role") == "ground_truth" and layer is not self.pred_layer.value]
            self.gt_layer.value = truths[0] if truths else None

    def _prediction_to_pick(self) -> Labels | None:
        """A prediction layer to compare when none is chosen: one of the image the Segment widget is on (or one
        made for no image in particular); never another image's (a stale pair)."""
        image = self._chosen.image
        for layer in reversed(self.viewer.layers):
            if isinstance(layer, Labels) and layer.metadata.get("role") == "prediction":
                owner = layer.metadata.get("image")
                if image is None or owner in (None, image):
                    return layer
        return None

    def _on_inserted(self, event: Any) -> None:
        """Choose a recognised layer as soon as it is added: a prediction (with its target), or a ground
        truth that fits the prediction compared."""
        self.refresh()
        layer, pred = event.value, self.pred_layer.value
        role = layer.metadata.get("role") if isinstance(layer, Labels) else None
        if role == "prediction":
            self._use(layer)
        elif role == "ground_truth" and (pred is None or pred.data.shape == layer.data.shape):
            self.gt_layer.value = layer

    def _use(self, prediction: Labels) -> None:
        """Compare ``prediction`` (for its ``target_label``, when it names one) with a ground truth of its
        shape (the last one added) when the chosen one does not fit."""
        self.pred_layer.value = prediction
        if "target_label" in prediction.metadata:
            self.target_label.value = int(prediction.metadata["target_label"])
        gt = self.gt_layer.value
        if gt is None or gt.data.shape != prediction.data.shape:
            fits = with_role(reversed(self.viewer.layers), "ground_truth", Labels, prediction.data.shape)
            self.gt_layer.value = gt if fits is None else fits

    def _watch(self, layers: list[Labels]) -> None:
        """Recompute when the data of ``layers`` change (instead of the layers watched so far)."""
        for layer in self._watched:
            layer.events.data.disconnect(self._on_data)
            layer.events.paint.disconnect(self.schedule)
        self._watched = layers
        for layer in layers:
            layer.events.data.connect(self._on_data)
            layer.events.paint.connect(self.schedule)

    def _on_data(self, event: Any = None) -> None:
        """New data in a compared layer: a prediction naming its target is compared for that target."""
        pred = self.pred_layer.value
        if pred is not None and "target_label" in pred.metadata:
            self.target_label.value = int(pred.metadata["target_label"])
        self.schedule()

    def _on_selection(self, _value: Any = None) -> None:
        self._watch([layer for layer in self.pair if layer is not None])
        self.schedule()

    def schedule(self, _event: Any = None) -> None:
        """Emit :attr:`pair_changed` soon (edits and selections in quick succession make one)."""
        if self._timer is not None:
            self._timer.start()

    def settle(self) -> None:
        """The pair is being compared now: no update is due any more."""
        if self._timer is not None:
            self._timer.stop()

    # -- where the viewer is ----------------------------------------------------------

    def current_index(self) -> int | None:
        """The ground truth's slice (frame) on screen (None without a ground truth, or for a 2D one)."""
        gt = self.gt_layer.value
        return None if gt is None else current_index(self.viewer, gt)

    def go_to(self, index: int) -> None:
        """Take the viewer to the ground truth's slice ``index``."""
        layer = self.gt_layer.value
        if layer is not None:
            go_to_index(self.viewer, layer, int(index))


__all__ = ["LayerChoice", "SETTLE_MS"]
