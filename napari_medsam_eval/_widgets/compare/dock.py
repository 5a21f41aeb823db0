"""The Compare dock widget: where a prediction fails against the ground truth.

A thin shell around :func:`napari_medsam_eval.evaluation.mask_comparison.compare_masks`.
The widget only composes its sections, each in its own module and given what
it drives, never the widget:

- the layer choice (:class:`._compare_layers.LayerChoice`: prediction, ground
  truth, target label), which picks the pair by itself as layers are added
  and says when the pair or its data changed;
- the metrics and worst slices (:class:`._compare_metrics.ComparisonSection`:
  TP/FP/FN overlay, DSC of the mask and of the slice shown, "Next worst slice");
- the per-slice DSC plot (:class:`._compare_plot.SliceDicePlot`), whose points
  take the viewer to their slice;
- the prompt sensitivity (:class:`._sensitivity.SensitivitySection`), run with the
  Segment widget's session of the viewer (:func:`._sessions.session_of`);
- the footer (:class:`._compare_footer.CompareFooter`: Compare, Next worst
  slice, status), always in view below the dock's tabs (:mod:`._dock_layout`).

Results first: the dock's tabs are *result* (the DSC lines and the per-slice
plot, the plot taking the height left; the tab shown by default and again
whenever Compare or Next worst slice is pressed), *layers* (the pair and the
target label, picked by themselves) and *sensitivity* (the section with the
dock's whole height), so the DSC, the plot and Next worst slice are in view
without scrolling with the Segment dock beside it in a 1366 x 768 window.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from magicgui.widgets import Container
from napari.layers import Labels

from napari_medsam_eval.evaluation.mask_comparison import Comparison
from napari_medsam_eval._meanwhile import warm_layer_kinds
from napari_medsam_eval._widgets.compare._compare_layers import LayerChoice
from napari_medsam_eval._widgets.compare._compare_metrics import CHOOSE_PAIR, CompareFooter, ComparisonSection
from napari_medsam_eval._widgets.compare._compare_plot import SliceDicePlot
from napari_medsam_eval._widgets.common._dock_layout import one_label_column
from napari_medsam_eval._widgets.common._canvas_style import warm_legend
from napari_medsam_eval._widgets.common._dock_tabs import bring_forward, tabbed_dock
from napari_medsam_eval._widgets.common._layers import follow_viewer
from napari_medsam_eval._widgets.compare._sensitivity import SensitivitySection
from napari_medsam_eval._widgets.common._sessions import session_of
from napari_medsam_eval._widgets.common._theme import theme_colors
from napari_medsam_eval._widgets.common._viewer import real_viewer

if TYPE_CHECKING:
    import napari

#: the sections' controls shown as the widget's own attributes
CHOICE = ("pred_layer", "gt_layer", "target_label")
METRICS = ("volume_dice", "why", "slice_dice", "worst_info")
FOOTER = ("compare_button", "worst_button", "canvas_view", "status")
#: the height the dock states (its plot at least 140 pixels under the DSC lines; in a column too short for it and
#: its neighbours the docks give way to each other as tabs: _dock_tabs.gives_way)
COMPARE_HEIGHT = 420
#: the dock's tabs, in order (the first, the result, is shown by default)
TABS = ("result", "layers", "sensitivity")



def warm_up() -> None:
    """Before the first dock is built (on a thread, :func:`napari_medsam_eval._widgets.__getattr__`): napari's
    layer kinds built once (its overlays are Labels layers)."""
    warm_layer_kinds()

class CompareWidget(Container):
    """Prediction vs ground truth for one target: TP/FP/FN overlay, DSC, per-slice plot, worst slices."""

    def __init__(self, napari_viewer: "napari.viewer.Viewer") -> None:
        super().__init__(labels=True)
        self.viewer = viewer = real_viewer(napari_viewer)  # not napari's proxy (._viewer)
        self.layer_choice = choice = LayerChoice(viewer)
        self.footer = footer = CompareFooter(viewer)
        self.plot = SliceDicePlot(theme_colors(viewer), on_click=choice.go_to)  # a click: the nearest slice
        self.metrics = ComparisonSection(viewer, choice, self.plot, footer.status)
        # is it the model or the prompt?
        self.sensitivity = SensitivitySection(viewer, choice, session=lambda: session_of(viewer))
        for section, names in ((choice, CHOICE), (self.metrics, METRICS), (footer, FOOTER)):
            for name in names:
                setattr(self, name, getattr(section, name))
        self.figure, self.axes, self.canvas = self.plot.figure, self.plot.axes, self.plot.canvas
        footer.compare_button.changed.connect(lambda: self.compare())
        footer.worst_button.changed.connect(lambda: self.next_worst())
        self.metrics.unit_words.add(buttons=[footer.worst_button])
        one_label_column(choice, self.metrics, footer)  # one column of labels, as in one container
        follow_viewer(self, [], on_close=self.sensitivity.runner.close)  # a closed widget ends its job
        choice.refresh()
        pages = ([self.metrics.native, self.plot.canvas], [choice.native], [self.sensitivity.native])
        #: result (DSC, plot) | layers | sensitivity, over the footer (Compare, Next worst slice, status)
        self.tabs = tabbed_dock(self, list(zip(TABS, pages)), footer, height=COMPARE_HEIGHT)
        warm_legend(viewer, self.native)  # the canvas legend's lines, each in a turn of its own
        for button in (footer.compare_button, footer.worst_button):  # their result in view, the dock in front
            button.changed.connect(lambda *_: (self.show_tab("result"), bring_forward(self.native)))

    def show_tab(self, name: str) -> None:
        """Bring tab ``name`` (one of :data:`TABS`) to the front."""
        self.tabs.setCurrentIndex(TABS.index(name))

    def reset_choices(self, *args: Any) -> None:
        """Refresh the layer choices (napari asks when layers change), keeping the compared layers."""
        self.layer_choice.reset_choices(*args)

    # -- the sections' state, as the widget's ----------------------------------------

    @property
    def comparison(self) -> Comparison | None:
        """The last comparison shown (None before the first)."""
        return self.metrics.comparison

    @property
    def overlay_layer(self) -> Labels | None:
        """The TP/FP/FN layer (one, replaced by each comparison)."""
        return self.metrics.overlay_layer

    @property
    def stop_markers(self) -> list[tuple[int, str]]:
        """(slice, rule) where the compared prediction's propagation stopped, as the plot marks them."""
        return self.metrics.stop_markers

    # -- what the buttons and keys do --------------------------------------------------

    def compare(self) -> Comparison | None:
        """The Compare button: compare now, with a notification when there is no pair."""
        return self.metrics.compare()

    def update_comparison(self, notify: bool = True) -> Comparison | None:
        """Compare the chosen layers now; None (the status line says why) without a matching pair."""
        return self.metrics.update_comparison(notify)

    def next_worst(self) -> int | None:
        """Go to the next slice in order of rising DSC (slices with foreground only; wraps)."""
        return self.metrics.next_worst()

    def current_index(self) -> int | None:
        """The ground truth's slice (frame) on screen."""
        return self.layer_choice.current_index()

    def go_to(self, index: int) -> None:
        """Take the viewer to the ground truth's slice ``index``."""
        self.layer_choice.go_to(index)


__all__ = ["CHOOSE_PAIR", "CompareWidget", "TABS"]
