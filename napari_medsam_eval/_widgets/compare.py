"""The Compare dock widget: where a prediction fails against the ground truth.

A thin shell around :func:`napari_medsam_eval.comparison.compare_masks`: a
TP/FP/FN Labels layer with fixed colours, the DSC of the whole mask and of
the slice on screen (updated as the dims move), a per-slice DSC plot whose
points take the viewer to their slice, and "Next worst slice".

It picks its pair by itself: a layer with the role ``prediction`` (its
``target_label`` too) or ``ground_truth`` is compared as soon as it is added
to the viewer (by the Segment widget, a benchmark row opened, the reader).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import ComboBox, Container, Label, PushButton, SpinBox
from napari.layers import Labels
from napari.utils.notifications import show_error
from qtpy.QtCore import QTimer

from ..comparison import Comparison, binary_target, compare_masks
from ._layers import current_index, follow_viewer, go_to_index, layer_choices, with_role
from ._result_layers import write_overlay
from ._theme import plot_canvas, style_axes, theme_colors

if TYPE_CHECKING:
    import napari


def _fmt(value: float) -> str:
    return "n/a (both empty)" if np.isnan(value) else f"{value:.4f}"


class CompareWidget(Container):
    """Prediction vs ground truth for one target: TP/FP/FN overlay, DSC, per-slice plot, worst slices."""

    def __init__(self, napari_viewer: "napari.viewer.Viewer") -> None:
        super().__init__(labels=True)
        self.viewer = napari_viewer
        self.comparison: Comparison | None = None
        self.overlay_layer: Labels | None = None
        self._worst: np.ndarray = np.array([], dtype=int)
        self._worst_pos = -1
        self._watched: list[Labels] = []

        self._labels_choices = choices = layer_choices(napari_viewer, Labels, ("overlay",))
        self.pred_layer = ComboBox(label="prediction", nullable=True, choices=choices)
        self.gt_layer = ComboBox(label="ground truth", nullable=True, choices=choices)
        self.target_label = SpinBox(label="target label", min=1, max=65535, value=1)
        self.compare_button = PushButton(text="Compare")
        self.volume_dice = Label(label="DSC (all)", value="-")
        self.slice_dice = Label(label="DSC (slice)", value="-")
        self.worst_button = PushButton(text="Next worst slice")
        self.worst_info = Label(label="worst", value="-")
        self.extend([self.pred_layer, self.gt_layer, self.target_label, self.compare_button,
                     self.volume_dice, self.slice_dice, self.worst_button, self.worst_info])

        background, self._text_color = theme_colors(napari_viewer)
        self.figure, self.axes, self.canvas = plot_canvas(background, 160)
        style_axes(self.axes, background, self._text_color)
        self.canvas.mpl_connect("button_press_event", self._on_plot_click)
        self.native.layout().addWidget(self.canvas)
        self._line: Any = None
        self._cursor: Any = None

        self._timer = QTimer(self.native)  # dies with the widget
        self._timer.setSingleShot(True)
        self._timer.setInterval(150)
        self._timer.timeout.connect(self.update_comparison)

        self.compare_button.changed.connect(lambda: self.update_comparison())
        self.worst_button.changed.connect(lambda: self.next_worst())
        self.pred_layer.changed.connect(self._on_selection)
        self.gt_layer.changed.connect(self._on_selection)
        self.target_label.changed.connect(self._schedule)
        events = napari_viewer.layers.events
        follow_viewer(self, [(napari_viewer.dims.events.current_step, self._on_dims),
                             (events.inserted, self._on_inserted), (events.removed, self._refresh_choices),
                             (events.reordered, self._refresh_choices)], on_close=self._on_close)
        self._refresh_choices()

    def _on_close(self) -> None:
        """The Qt widget is gone: forget the timer and the compared layers' events."""
        self._timer = None
        self._watch([])

    # -- layer choices ------------------------------------------------------------

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
            layer.events.data.disconnect(self._schedule)
            layer.events.paint.disconnect(self._schedule)
        self._watched = layers
        for layer in layers:
            layer.events.data.connect(self._schedule)
            layer.events.paint.connect(self._schedule)

    def _on_selection(self, _value: Any = None) -> None:
        self._watch([layer for layer in (self.pred_layer.value, self.gt_layer.value) if layer is not None])
        self._schedule()

    def _schedule(self, _event: Any = None) -> None:
        """Recompute soon (edits and selections in quick succession make one update)."""
        if self._timer is not None:
            self._timer.start()

    # -- comparison ---------------------------------------------------------------

    def update_comparison(self) -> Comparison | None:
        """Compare the chosen layers now: overlay layer, DSC labels, plot."""
        if self._timer is not None:
            self._timer.stop()
        pred, gt = self.pred_layer.value, self.gt_layer.value
        if pred is None or gt is None:
            return None
        target = int(self.target_label.value)
        try:
            comparison = compare_masks(binary_target(pred.data, target, binary_fallback=True),
                                       binary_target(gt.data, target))
        except ValueError as exc:
            show_error(f"{pred.name} vs {gt.name}: {exc}")
            return None
        self.comparison = comparison
        self.overlay_layer = write_overlay(self.viewer, gt, comparison.overlay, target)
        self._worst = comparison.worst_slices()
        self._worst_pos = -1
        self.volume_dice.value = _fmt(comparison.dice)
        self.worst_info.value = f"{len(self._worst)} slices with foreground"
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
        if self._cursor is not None:
            self._cursor.set_xdata([index, index])
            self.canvas.draw_idle()

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
        ax = self.axes
        ax.clear()
        style_axes(ax, ax.get_facecolor(), self._text_color)
        per_slice = self.comparison.per_slice
        index = np.arange(len(per_slice))
        (self._line,) = ax.plot(index, per_slice, "o-", markersize=3, linewidth=1, color="#4fc3f7", picker=5)
        self._cursor = ax.axvline(0, color="orange", linewidth=1)
        self.stop_markers = self._stop_markers()
        for at, reason in self.stop_markers:  # where propagation stopped, and why
            ax.axvline(at, color="#ce93d8", linestyle=":", linewidth=1)
            ax.annotate(reason, (at, 0.0), fontsize=6, color="#ce93d8", rotation=90, va="bottom", ha="right")
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlim(-0.5, len(per_slice) - 0.5)
        gt = self.gt_layer.value
        kind = gt.metadata.get("kind") if gt is not None else None
        ax.set_xlabel("frame" if kind == "video" else "slice", fontsize=8)
        ax.set_ylabel("DSC", fontsize=8)
        self.canvas.draw_idle()

    def _stop_markers(self) -> list[tuple[int, str]]:
        """(slice, rule) where each propagation direction of the prediction stopped (its layer metadata)."""
        pred = self.pred_layer.value
        stops = pred.metadata.get("stops", []) if pred is not None else []
        return [(int(s["at"]), str(s.get("reason"))) for s in stops if isinstance(s, dict) and s.get("at") is not None]

    def _on_plot_click(self, event: Any) -> None:
        if self.comparison is None or event.inaxes is not self.axes or event.xdata is None:
            return
        self.go_to(self.nearest_slice(float(event.xdata)))

    def nearest_slice(self, x: float) -> int:
        """The plotted slice nearest to ``x`` (slices with a DSC first, else any)."""
        per_slice = self.comparison.per_slice
        candidates = np.flatnonzero(~np.isnan(per_slice))
        if candidates.size == 0:
            candidates = np.arange(len(per_slice))
        return int(candidates[np.argmin(np.abs(candidates - x))])


__all__ = ["CompareWidget"]
