"""The Compare dock widget: where a prediction fails against the ground truth.

A thin shell around :func:`napari_medsam_eval.evaluation.mask_comparison.compare_masks`: a
TP/FP/FN Labels layer with fixed colours, the DSC of the whole mask and of
the slice on screen (updated as the dims move), a per-slice DSC plot whose
points take the viewer to their slice, and "Next worst slice".

It picks its pair by itself: a layer with the role ``prediction`` (its
``target_label`` too) or ``ground_truth`` is compared as soon as it is added
to the viewer (by the Segment widget, a benchmark row opened, the reader),
and again when their data change (a prediction's ``target_label`` is taken
again then: a benchmark row opened after another reuses the layers). Without
a pair the status line says what to choose; each comparison replaces the
one overlay layer (:func:`._result_layers.write_overlay`). The plot is
:class:`._compare_plot.SliceDicePlot`; the dock scrolls (:mod:`._dock_layout`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import ComboBox, Container, Label, PushButton, SpinBox
from napari.layers import Labels
from napari.utils.notifications import show_error, show_warning
from qtpy.QtCore import QTimer

from ..evaluation.mask_comparison import Comparison, binary_target, compare_masks
from ._compare_plot import SliceDicePlot, stop_markers
from ._dock_layout import button_row, fit_in_dock, wrap_status
from ._layers import current_index, follow_viewer, go_to_index, layer_choices, with_role
from ._result_layers import write_overlay
from ._sensitivity import SensitivitySection
from ._shortcuts import COMPARE_SHORTCUTS, bind_shortcuts, with_shortcut
from ._theme import theme_colors
from ._viewer import real_viewer

#: the status line when there is nothing to compare
CHOOSE_PAIR = ("choose a prediction and a ground truth (Labels layers of one shape) to compare; "
               "opening a benchmark row or segmenting picks them by itself")

if TYPE_CHECKING:
    import napari


def _fmt(value: float) -> str:
    return "n/a (both empty)" if np.isnan(value) else f"{value:.4f}"


class CompareWidget(Container):
    """Prediction vs ground truth for one target: TP/FP/FN overlay, DSC, per-slice plot, worst slices."""

    def __init__(self, napari_viewer: "napari.viewer.Viewer") -> None:
        super().__init__(labels=True)
        self.viewer = napari_viewer = real_viewer(napari_viewer)  # not napari's proxy (._viewer)
        self.comparison: Comparison | None = None
        self.overlay_layer: Labels | None = None
        self._worst: np.ndarray = np.array([], dtype=int)
        self._worst_pos = -1
        self._watched: list[Labels] = []

        self._labels_choices = choices = layer_choices(napari_viewer, Labels, ("overlay",))
        self.pred_layer = ComboBox(label="prediction", nullable=True, choices=choices,
                                   tooltip="the predicted mask (a Labels layer); a layer with the role "
                                           "'prediction' is picked by itself")
        self.gt_layer = ComboBox(label="ground truth", nullable=True, choices=choices,
                                 tooltip="the reference mask, a Labels layer of the prediction's shape")
        self.target_label = SpinBox(label="target label", min=1, max=65535, value=1,
                                    tooltip="the label value compared (a 0/1 prediction counts as this target)")
        self.compare_button = PushButton(text="Compare", tooltip="compare now: TP/FP/FN overlay (replacing the "
                                                                 "last one), DSC and the per-slice plot")
        self.volume_dice = Label(label="DSC (all)", value="-", tooltip="DSC of the whole prediction")
        self.slice_dice = Label(label="DSC (slice)", value="-", tooltip="DSC of the slice (frame) on screen")
        self.worst_button = PushButton(text="Next worst slice", tooltip=with_shortcut(
            "go to the slice with the next lowest DSC among those with foreground", "next_worst", COMPARE_SHORTCUTS))
        self.worst_info = Label(label="worst", value="-", tooltip="the worst slice shown, its rank and DSC")
        self.status = Label(label="status", value=CHOOSE_PAIR)
        wrap_status(self.status)
        actions = button_row(self.compare_button, self.worst_button)
        self.extend([self.pred_layer, self.gt_layer, self.target_label, self.volume_dice, self.slice_dice,
                     self.worst_info, actions, self.status])

        self.plot = SliceDicePlot(theme_colors(napari_viewer), on_click=self.go_to)  # a click: the nearest slice
        self.figure, self.axes, self.canvas = self.plot.figure, self.plot.axes, self.plot.canvas
        self.native.layout().addWidget(self.canvas)
        self.sensitivity = SensitivitySection(self)  # is it the model or the prompt? (its own module)
        self.native.layout().addWidget(self.sensitivity.native)

        self._timer = QTimer(self.native)  # dies with the widget
        self._timer.setSingleShot(True)
        self._timer.setInterval(150)
        self._timer.timeout.connect(lambda: self.update_comparison(notify=False))

        self.compare_button.changed.connect(lambda: self.compare())
        self.worst_button.changed.connect(lambda: self.next_worst())
        self.pred_layer.changed.connect(self._on_selection)
        self.gt_layer.changed.connect(self._on_selection)
        self.target_label.changed.connect(self._schedule)
        events = napari_viewer.layers.events
        follow_viewer(self, [(napari_viewer.dims.events.current_step, self._on_dims),
                             (events.inserted, self._on_inserted), (events.removed, self._refresh_choices),
                             (events.reordered, self._refresh_choices)], on_close=self._on_close)
        self._unbind = bind_shortcuts(napari_viewer, {"next_worst": self.next_worst}, COMPARE_SHORTCUTS)
        self._refresh_choices()
        fit_in_dock(self, footer=[actions, self.status])  # Compare always in view

    def _on_close(self) -> None:
        """The Qt widget is gone: forget the timer, the compared layers' events and the keys."""
        self._timer = None
        self.sensitivity.runner.close()
        self._watch([])
        self._unbind()

    # -- layer choices ------------------------------------------------------------

    def reset_choices(self, *args: Any) -> None:
        """Refresh the layer choices, keeping the compared layers when they were renamed (the choices
        go by name: a renamed layer would be dropped, as when a benchmark row reuses the layers)."""
        chosen = (self.pred_layer.value, self.gt_layer.value)
        super().reset_choices(*args)
        for combo, layer in zip((self.pred_layer, self.gt_layer), chosen):
            if layer is not None and combo.value is not layer and any(layer is x for x in self.viewer.layers):
                combo.value = layer

    def _refresh_choices(self, _event: Any = None) -> None:
        self.reset_choices()
        layers = self.viewer.layers
        if self.pred_layer.value is None and (pred := with_role(layers, "prediction", Labels)) is not None:
            self._use(pred)
        if self.gt_layer.value is None:
            truths = [layer for layer in layers if isinstance(layer, Labels)
                      and layer.metadata.get("role") == "ground_truth" and layer is not self.pred_layer.value]
            self.gt_layer.value = truths[0] if truths else None

    def _on_inserted(self, event: Any) -> None:
        """Compare a recognised layer as soon as it is added: a prediction (with its target), or a ground
        truth that fits the prediction compared."""
        self._refresh_choices()
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
            layer.events.paint.disconnect(self._schedule)
        self._watched = layers
        for layer in layers:
            layer.events.data.connect(self._on_data)
            layer.events.paint.connect(self._schedule)

    def _on_data(self, event: Any = None) -> None:
        """New data in a compared layer: a prediction naming its target is compared for that target."""
        pred = self.pred_layer.value
        if pred is not None and "target_label" in pred.metadata:
            self.target_label.value = int(pred.metadata["target_label"])
        self._schedule()

    def _on_selection(self, _value: Any = None) -> None:
        self._watch([layer for layer in (self.pred_layer.value, self.gt_layer.value) if layer is not None])
        self._schedule()

    def _schedule(self, _event: Any = None) -> None:
        """Recompute soon (edits and selections in quick succession make one update)."""
        if self._timer is not None:
            self._timer.start()

    # -- comparison ---------------------------------------------------------------

    def compare(self) -> Comparison | None:
        """The Compare button: :meth:`update_comparison`, with a notification when there is no pair."""
        comparison = self.update_comparison()
        if self.pred_layer.value is None or self.gt_layer.value is None:
            show_warning(f"Compare: {self.status.value}")
        return comparison

    def update_comparison(self, notify: bool = True) -> Comparison | None:
        """Compare the chosen layers now: overlay layer, DSC labels, plot; None (the status line says
        why) without a prediction and a ground truth, or when they do not match (``notify``: an error
        notification too; not for automatic updates, e.g. between two layers of a row being replaced)."""
        if self._timer is not None:
            self._timer.stop()
        pred, gt = self.pred_layer.value, self.gt_layer.value
        if pred is None or gt is None:
            missing = " and ".join(name for name, layer in (("a prediction", pred), ("a ground truth", gt))
                                   if layer is None)
            self.status.value = f"nothing compared: choose {missing} (Labels layers of one shape)"
            return None
        target = int(self.target_label.value)
        try:
            comparison = compare_masks(binary_target(pred.data, target, binary_fallback=True),
                                       binary_target(gt.data, target))
        except ValueError as exc:
            self.status.value = message = f"{pred.name} vs {gt.name}: {exc}"
            if notify:
                show_error(message)
            return None
        self.comparison = comparison
        self.overlay_layer = write_overlay(self.viewer, gt, comparison.overlay, target)
        self._worst = comparison.worst_slices()
        self._worst_pos = -1
        self.volume_dice.value = _fmt(comparison.dice)
        self.worst_info.value = f"{len(self._worst)} slices with foreground"
        self.status.value = f"label {target}: {pred.name} vs {gt.name}"
        self._plot()
        self._on_dims()
        return comparison

    def current_index(self) -> int | None:
        gt = self.gt_layer.value
        return None if gt is None else current_index(self.viewer, gt)

    def _on_dims(self, _event: Any = None) -> None:
        if self.comparison is None:
            return
        index = self.current_index()
        if index is None:
            self.slice_dice.value = _fmt(self.comparison.dice)
            return
        self.slice_dice.value = f"{_fmt(self.comparison.slice_dice(index))} (slice {index})"
        self.plot.move_cursor(index)

    def go_to(self, index: int) -> None:
        layer = self.gt_layer.value
        if layer is not None:
            go_to_index(self.viewer, layer, int(index))

    def next_worst(self) -> int | None:
        """Go to the next slice in order of rising DSC (slices with foreground only; wraps)."""
        if self.comparison is None and self.update_comparison() is None:
            return None
        if len(self._worst) == 0:
            self.worst_info.value = "no slice has foreground"
            return None
        self._worst_pos = (self._worst_pos + 1) % len(self._worst)
        index = int(self._worst[self._worst_pos])
        self.go_to(index)
        self.worst_info.value = (f"#{self._worst_pos + 1}/{len(self._worst)}: slice {index}, "
                                 f"DSC {_fmt(self.comparison.slice_dice(index))}")
        return index

    # -- plot --------------------------------------------------------------------

    def _plot(self) -> None:
        gt, pred = self.gt_layer.value, self.pred_layer.value
        kind = gt.metadata.get("kind") if gt is not None else None
        self.stop_markers = stop_markers(pred.metadata.get("stops") if pred is not None else None)
        self.plot.show(self.comparison.per_slice, self.stop_markers, "frame" if kind == "video" else "slice")


__all__ = ["CompareWidget"]
