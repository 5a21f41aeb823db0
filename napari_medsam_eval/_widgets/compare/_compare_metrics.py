"""The Compare widget's metrics and worst slices, and its footer (Compare, Next worst slice, status).

:class:`ComparisonSection` compares the pair a :class:`._compare_layers.LayerChoice` holds: a TP/FP/FN Labels
layer under the prediction's contour (the one overlay layer, :func:`._result_layers.write_overlay`), the DSC of
the whole mask and of the slice on screen, why the mask missed (its error parts; shares and slices on hover),
the per-slice plot and "Next worst slice". Without a pair the status line says what to choose, and the
overlay is retired (hidden and emptied, :func:`._removal.retire_layers`) for the next comparison to reuse.

The automatic comparisons (a propagation's result written, a row opened) must not freeze the viewer:
:func:`compute_comparison` (masks, TP/FP/FN map, DSC, worst slices, the first overlay layer's model) runs in a
quiet worker (:attr:`ComparisonSection.runner`); the GUI thread shows the overlay, then the numbers and plot,
in two turns of their own (:func:`napari_medsam_eval._turns.soon`). A comparison asked for later wins. The
Compare button and :meth:`ComparisonSection.update_comparison` compare at once (returning the :class:`Comparison`).
"""
from __future__ import annotations

from typing import Any

import numpy as np
from magicgui.widgets import Container, Label
from napari.layers import Labels
from napari.utils.notifications import show_error, show_warning

from napari_medsam_eval.evaluation.error_parts import parts_text, short_parts_text
from napari_medsam_eval.evaluation.mask_comparison import Comparison, binary_target, compare_masks
from napari_medsam_eval._widgets.common._object_masks import labels_words, prediction_mask, truth_labels
from napari_medsam_eval._widgets.compare._compare_layers import LayerChoice
from napari_medsam_eval._widgets.compare._compare_plot import SliceDicePlot, stop_markers
from napari_medsam_eval._widgets.compare._compare_footer import CHOOSE_PAIR, CompareFooter
from napari_medsam_eval._widgets.common._layers import follow_viewer, layer_kind, transform_kwargs
from napari_medsam_eval._widgets.compare._result_layers import (Computed, compute_comparison, reusable_overlay,
                                                                  write_overlay)
from napari_medsam_eval._widgets.common._canvas import image_of
from napari_medsam_eval._widgets.common._shortcuts import COMPARE_SHORTCUTS, bind_shortcuts
from napari_medsam_eval._turns import soon
from napari_medsam_eval._widgets.common._unit_words import UnitWords, in_units, unit_of
from napari_medsam_eval._widgets.common._words import TIPS
from napari_medsam_eval._widgets.common._worker import WorkerRunner
from napari_medsam_eval._widgets.common._removal import retire_layers


def _fmt(value: float) -> str:
    return "n/a (both empty)" if np.isnan(value) else f"{value:.4f}"


class ComparisonSection(Container):
    """DSC of the whole mask and of the slice shown, the worst slices; compares ``choice``'s pair into
    ``plot`` and says what it did on ``status``."""

    def __init__(self, viewer: Any, choice: LayerChoice, plot: SliceDicePlot, status: Label) -> None:
        super().__init__(labels=True)
        self.margins = (0, 0, 0, 0)
        self.viewer, self.choice, self.plot, self.status = viewer, choice, plot, status
        self.comparison: Comparison | None = None
        self.overlay_layer: Labels | None = None
        #: (slice, rule) where the compared prediction's propagation stopped
        self.stop_markers: list[tuple[int, str]] = []
        self._worst: np.ndarray = np.array([], dtype=int)
        self._worst_pos = -1
        #: computes the automatic comparisons off the GUI thread (quiet: no status line, nothing locked)
        self.runner = WorkerRunner(None)
        #: the comparison asked for last (a result of an earlier one is dropped), and the last one shown
        self._asked = self._shown = 0
        #: the arguments of the second turn of a comparison shown (:meth:`_show_numbers`)
        self._numbers: tuple = ()
        self.volume_dice = Label(label="DSC (all)", value="-", tooltip=TIPS["DSC (all)"])
        self.slice_dice = Label(label="DSC (slice)", value="-", tooltip=TIPS["DSC (slice)"])
        self.worst_info = Label(label="worst", value="-", tooltip=TIPS["worst"])
        self.why = Label(label="why", value="-", tooltip=TIPS["why"])  # the error parts of the whole mask
        #: the texts that say "slice" for a volume, "frame" for a video (the dock adds its button)
        self.unit_words = UnitWords(labels=[self.slice_dice])
        self.extend([self.volume_dice, self.why, self.slice_dice, self.worst_info])
        choice.pair_changed.connect(self._on_pair_changed)
        follow_viewer(self, [(viewer.dims.events.current_step, self.on_dims)], on_close=self._on_close)
        self._unbind = bind_shortcuts(viewer, {"next_worst": self.next_worst}, COMPARE_SHORTCUTS)

    def _on_close(self) -> None:
        """The Qt widget is gone: its key is unbound, the comparison computing ends."""
        self._unbind()
        self.runner.close()

    def _on_pair_changed(self) -> None:
        chosen = self.choice.gt_layer.value or self.choice.pred_layer.value
        if chosen is not None:  # its words before its numbers: a video's in frames
            self.unit_words.show(unit_of(layer_kind(chosen)))
        self.compare_soon()

    @property
    def pending(self) -> bool:
        """Whether a comparison is being computed or shown (its result not all on screen yet)."""
        return self.runner.running > 0 or self._shown != self._asked

    def _missing(self, pred: Labels | None, gt: Labels | None) -> None:
        """Nothing to compare: say what is missing, and show nothing of an earlier pair (no stale numbers)."""
        missing = " and ".join(name for name, layer in (("a prediction", pred), ("a ground truth", gt))
                               if layer is None)
        self.status.value = f"nothing compared: choose {missing} (Labels layers of one shape)"
        self.comparison, self._worst, self._worst_pos = None, np.array([], dtype=int), -1
        for label in (self.volume_dice, self.slice_dice, self.worst_info, self.why):
            label.value = "-"
        if self.overlay_layer is not None:  # kept for the next comparison (napari collects garbage at a removal)
            retire_layers([self.overlay_layer], "role")
        self.overlay_layer = None
        self.plot.clear()

    def compare_soon(self) -> Any:
        """Compare the chosen layers in a worker (:func:`compute_comparison`); the result is shown on the GUI
        thread in two turns of the event loop of their own (:meth:`_show_computed`, :func:`napari_medsam_eval._turns.soon`).
        Returns the worker (None without a pair)."""
        self.choice.settle()
        self._asked += 1
        asked = self._asked
        pred, gt = self.choice.pair
        if pred is None or gt is None:
            self._shown = asked
            return self._missing(pred, gt)
        target = int(self.choice.target_label.value)
        image = image_of(self.viewer, pred)
        reused, _ = reusable_overlay(self.viewer, None if image is None else image.name, np.ndim(gt.data))
        transform = None if reused is not None else transform_kwargs(gt)  # (one to reuse: none built)
        own = prediction_mask(pred, target)  # the object's own mask, where the layer keeps it (nested objects)
        return self.runner.start(compute_comparison, np.asarray(pred.data) if own is None else own,
                                 np.asarray(gt.data), target, transform, truth_labels(pred, target),
                                 text="comparing", error_prefix="cannot compare: ",
                                 returned=lambda computed: soon(self.native, lambda: self._show_computed(
                                     asked, computed, pred, gt, target)),
                                 errored=lambda _error: self._dropped(asked))

    def _dropped(self, asked: int) -> None:
        if asked == self._asked:
            self._shown = asked

    def _current(self, asked: int, pred: Labels, gt: Labels) -> bool:
        """Whether a result of comparison ``asked`` of ``pred`` and ``gt`` is still the one to show."""
        layers = self.viewer.layers
        chosen_pred, chosen_gt = self.choice.pair
        return asked == self._asked and chosen_pred is pred and chosen_gt is gt and pred in layers and gt in layers

    def _show_computed(self, asked: int, computed: Computed, pred: Labels, gt: Labels, target: int) -> None:
        """GUI thread, first turn: the overlay layer (the numbers and the plot follow in the next turn)."""
        if not self._current(asked, pred, gt):
            return self._dropped(asked)
        if computed.comparison is None:
            self.status.value = f"{pred.name} vs {gt.name}: {computed.problem}"
            self._shown = asked
            return None
        comparison = computed.comparison
        self.overlay_layer = write_overlay(self.viewer, gt, comparison.overlay, target, under=pred, new=computed.layer)
        self._numbers = (asked, comparison, computed.worst, pred, gt, target)
        soon(self.native, self._show_numbers)
        return None

    def _show_numbers(self) -> None:
        """GUI thread, second turn: the DSC labels, the worst slices, the status line and the plot."""
        if not self._numbers:
            return None
        (asked, comparison, worst, pred, gt, target), self._numbers = self._numbers, ()
        if not self._current(asked, pred, gt):
            return self._dropped(asked)
        self._show_numbers_now(comparison, worst, pred, gt, target)
        self._shown = asked
        return None

    def compare(self) -> Comparison | None:
        """The Compare button: :meth:`update_comparison`, with a notification when there is no pair."""
        comparison = self.update_comparison(asked=True)
        if None in self.choice.pair:
            show_warning(f"Compare: {self.status.value}")
        return comparison

    def update_comparison(self, notify: bool = True, asked: bool = False) -> Comparison | None:
        """Compare the chosen layers now: overlay layer, DSC labels, plot; None (the status line says
        why) without a prediction and a ground truth, or when they do not match (``notify``: an error
        notification too; not for automatic updates, e.g. between two layers of a row being replaced)."""
        self.choice.settle()
        self._asked += 1  # a comparison computing in the worker is dropped when it returns
        self._shown = self._asked
        pred, gt = self.choice.pair
        if pred is None or gt is None:
            return self._missing(pred, gt)
        target = int(self.choice.target_label.value)
        own = prediction_mask(pred, target)  # the object's own mask, where the layer keeps it (nested objects)
        try:
            comparison = compare_masks(binary_target(pred.data if own is None else own, target, binary_fallback=True),
                                       binary_target(gt.data, truth_labels(pred, target)))
        except ValueError as exc:
            self.status.value = message = f"{pred.name} vs {gt.name}: {exc}"
            if notify:
                show_error(message)
            return None
        self._show(comparison, pred, gt, target, asked)
        return comparison

    def _show(self, comparison: Comparison, pred: Labels, gt: Labels, target: int, asked: bool = False) -> None:
        """The overlay, the DSC labels, the worst slices and the plot of a new ``comparison``, now (``asked``: by
        the user: the canvas shows the TP / FP / FN view whatever it showed)."""
        self.overlay_layer = write_overlay(self.viewer, gt, comparison.overlay, target, under=pred, asked=asked)
        self._show_numbers_now(comparison, comparison.worst_slices(), pred, gt, target)

    def _show_numbers_now(self, comparison: Comparison, worst: np.ndarray, pred: Labels, gt: Labels,
                          target: int) -> None:
        self.comparison = comparison
        self._worst = worst
        self._worst_pos = -1
        self.volume_dice.value = _fmt(comparison.dice)
        unit = unit_of(layer_kind(gt))
        self.unit_words.show(unit)
        parts = comparison.parts
        self.why.value = "-" if parts is None else in_units(short_parts_text(parts), unit)
        self.why.tooltip = TIPS["why"] + ("" if parts is None else f"\n\n{in_units(parts_text(parts.columns(), unit + 's'), unit)}")
        self.worst_info.value = f"{len(self._worst)} {unit}s with foreground"
        self.status.value = f"{labels_words(target, truth_labels(pred, target))}: {pred.name} vs {gt.name}"
        self.stop_markers = stop_markers(pred.metadata.get("stops"))
        self.plot.show(comparison.per_slice, self.stop_markers, unit)
        self.on_dims()

    def on_dims(self, _event: Any = None) -> None:
        """The viewer moved: the DSC of the slice shown, and the plot's cursor."""
        if self.comparison is None:
            return
        index = self.choice.current_index()
        if index is None or not 0 <= index < len(self.comparison.per_slice):
            # (outside: the comparison shown is of a pair whose new one is still computing, e.g. a row opening)
            self.slice_dice.value = _fmt(self.comparison.dice)
            return
        self.slice_dice.value = f"{_fmt(self.comparison.slice_dice(index))} ({self.unit_words.unit} {index})"
        self.plot.move_cursor(index)

    def next_worst(self) -> int | None:
        """Go to the next slice in order of rising DSC (slices with foreground only; wraps)."""
        if self.comparison is None and self.update_comparison() is None:
            return None
        if len(self._worst) == 0:
            self.worst_info.value = f"no {self.unit_words.unit} has foreground"
            return None
        self._worst_pos = (self._worst_pos + 1) % len(self._worst)
        index = int(self._worst[self._worst_pos])
        self.choice.go_to(index)
        self.worst_info.value = (f"#{self._worst_pos + 1}/{len(self._worst)}: {self.unit_words.unit} {index}, "
                                 f"DSC {_fmt(self.comparison.slice_dice(index))}")
        return index


__all__ = ["CHOOSE_PAIR", "CompareFooter", "ComparisonSection", "compute_comparison"]
