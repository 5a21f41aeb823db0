"""The Compare widget's "Prompt sensitivity" section: is it the model or my prompt?

The prediction compared names the prompt that made it (its layer's
``objects`` metadata, written by the Segment widget). This section gives that
prompt N more times, perturbed (:meth:`napari_medsam_eval.session.session.Session.iter_sensitivity`,
in a worker; Cancel stops within a run), with the model and image of the
viewer's Segment widget (the :class:`~napari_medsam_eval.session.session.Session`
the section is given a way to ask for, :func:`._sessions.session_of`: the
Segment widget may be docked later), so the slices' embeddings are computed once. It shows the agreement map (the fraction of runs that
segmented each voxel) as an Image layer, drawn opaque in a few bins under the prediction's contour so
that its legend shows the colours on screen (:func:`._result_layers.agreement_colormap`), the worst
run as a Labels contour, the runs' DSC against the ground truth compared (min / median / max) and a
histogram of them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from magicgui.widgets import Container, Label, ProgressBar, PushButton, SpinBox
from napari.layers import Image, Labels

from napari_medsam_eval._layer_style import WORST_RUN_COLOR, style_prediction
from napari_medsam_eval._widgets.common._outlined_labels import OutlinedLabels
from napari_medsam_eval.core.palette import PLOT_SERIES, color_name
from napari_medsam_eval.evaluation.mask_comparison import binary_target
from napari_medsam_eval._widgets.common._object_masks import truth_labels
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.studies.sensitivity import DEFAULT_RUNS, SensitivityResult
from napari_medsam_eval._widgets.common._dock_layout import button_row, fixed_margins
from napari_medsam_eval._widgets.common._status_text import wrap_status
from napari_medsam_eval._widgets.compare._compare_layers import LayerChoice
from napari_medsam_eval._widgets.common._layers import add_inactive, find_layer, transform_kwargs
from napari_medsam_eval._widgets.common._canvas import compose, image_of
from napari_medsam_eval._widgets.compare._result_layers import agreement_colormap, agreement_legend, swatch
from napari_medsam_eval._widgets.common._theme import plot_canvas, style_axes, theme_colors
from napari_medsam_eval._widgets.common._words import TIPS
from napari_medsam_eval._widgets.common._worker import WorkerRunner

if TYPE_CHECKING:
    from napari_medsam_eval.session.session import Session

#: what the agreement map's colours mean (rich text: a chip per bin, in the colours drawn)
AGREEMENT_LEGEND = ("share of the runs: " + " ".join(swatch(text, color) for text, color in agreement_legend())
                    + " (no run: not drawn); worst run: " + swatch(f"{color_name(WORST_RUN_COLOR)} contour",
                                                                    WORST_RUN_COLOR))
#: the histogram's least height in pixels (the section has a tab of the Compare dock to itself)
HISTOGRAM_HEIGHT = 150
NEEDS_SEGMENT = ("prompt sensitivity uses the Segment widget's model and image: dock it, load a model and "
                 "segment or propagate the target first")


def prompt_of(prediction: Labels, target_label: int) -> Prompt | None:
    """The prompt that made object ``target_label`` of ``prediction`` (None when the layer names none)."""
    objects = prediction.metadata.get("objects") or {}
    entry = objects.get(int(target_label)) or objects.get(str(int(target_label))) or {}
    data = entry.get("prompt")
    if data is None and prediction.metadata.get("target_label") == int(target_label):
        data = prediction.metadata.get("prompt")
    return None if data is None else Prompt.from_dict(data)


def show_result(viewer: Any, reference: Labels, result: SensitivityResult, name: str,
                under: Labels | None = None) -> tuple[Image, Labels | None]:
    """The agreement map (Image, 0..1; opaque, so drawn in its legend's colours) and the worst run (Labels
    contour) over ``reference``'s transform, shown as the *sensitivity* view of the image ``under`` (the
    prediction tested) belongs to (:mod:`.._canvas`); the worst run is its own view (*worst run*, beside the
    prediction): its contour hid the agreement bands."""
    agreement = find_layer(viewer, f"{name} agreement", Image, result.agreement.shape)
    if agreement is None:
        agreement = add_inactive(viewer, Image(result.agreement, name=f"{name} agreement",
                                               colormap=agreement_colormap(), contrast_limits=(0.0, 1.0),
                                               opacity=1.0, blending="translucent", metadata={"role": "agreement"},
                                               **transform_kwargs(reference)))
    else:
        agreement.data = result.agreement
    worst = None
    if result.worst_mask is not None:
        data = result.worst_mask.astype(np.uint8)
        worst = find_layer(viewer, f"{name} worst run", Labels, data.shape)
        if worst is None:
            worst = add_inactive(viewer, style_prediction(OutlinedLabels(data, name=f"{name} worst run",
                                                                 metadata={"role": "worst_run"},
                                                                 **transform_kwargs(reference)), WORST_RUN_COLOR))
        else:
            worst.data = data
    image = image_of(viewer, under if under is not None and under in viewer.layers else reference)
    if image is not None:
        agreement.metadata["image"] = image.name
        if worst is not None:
            worst.metadata["image"] = image.name
        compose(viewer, "sensitivity", image, {"agreement": agreement})
    return agreement, worst


class SensitivitySection(Container):
    """Runs, a button, Cancel, progress, the DSC spread and its histogram.

    ``choice`` holds the prediction tested, its target and the ground truth; ``session()`` is the
    Segment widget's session of the viewer when there is one (None otherwise).
    """

    def __init__(self, viewer: Any, choice: LayerChoice, session: Callable[[], "Session | None"]) -> None:
        super().__init__(labels=True, label="prompt sensitivity")
        self.choice, self.session = choice, session
        self.viewer = viewer
        self.result: SensitivityResult | None = None
        self.runs = SpinBox(label="perturbed runs", min=2, max=200, value=DEFAULT_RUNS,
                            tooltip=TIPS["perturbed runs"])
        self.run_button = PushButton(text="Prompt sensitivity", tooltip=TIPS["prompt sensitivity"])
        self.cancel_button = PushButton(text="Cancel sensitivity", enabled=False, tooltip="stop after this slice")
        self.progress = ProgressBar(label="runs", value=0, max=1, tooltip=TIPS["runs"])
        self.spread = Label(label="DSC spread", value="-", tooltip=TIPS["DSC spread"])
        self.legend = Label(label="agreement map", value=AGREEMENT_LEGEND, visible=False)
        wrap_status(self.legend)
        self.status = Label(label="sensitivity", value="")
        wrap_status(self.status)
        self.buttons = button_row(self.run_button, self.cancel_button)  # side by side, each its text's width
        self.extend([self.runs, self.buttons, self.progress, self.spread, self.legend, self.status])
        for line, tip in ((self.legend, TIPS["agreement map"]), (self.status, TIPS["sensitivity"])):
            line.tooltip = tip  # the row's name explains; hovering the text itself shows it whole
        background, self._text = theme_colors(self.viewer)
        self.figure, self.axes, self.canvas = plot_canvas(background, HISTOGRAM_HEIGHT)
        fixed_margins(self.figure, left=0.12, bottom=0.26)  # room for the axis label at any height
        style_axes(self.axes, background, self._text)
        self.native.layout().addWidget(self.canvas)
        # hidden until there is a histogram: a shown canvas redraws whenever the dock's layout changes
        # (measured: +0.1 s on every benchmark row opened with Compare docked)
        self.canvas.setVisible(False)
        self.runner = WorkerRunner(self.status, [self.runs, self.run_button], self.cancel_button, self.progress)
        self.run_button.changed.connect(lambda *_: self.start())
        self.cancel_button.changed.connect(lambda *_: self.runner.cancel())

    def start(self) -> Any:
        """Start the runs in a worker (None, with the status saying why, when something is missing)."""
        session = self.session()
        pred, gt = self.choice.pair
        target = int(self.choice.target_label.value)
        if session is None or session.backend is None or session.volume is None:
            return self.runner.error(NEEDS_SEGMENT)
        if pred is None:
            return self.runner.error("prompt sensitivity: choose the prediction to test in 'prediction'")
        prompt = prompt_of(pred, target)
        if prompt is None:
            return self.runner.error(f"{pred.name} names no prompt for label {target}: segment it with the "
                                     "Segment widget first")
        spatial = session.volume.shape[:2] if session.kind == "image" else session.volume.shape[:3]
        if tuple(pred.data.shape) != tuple(spatial):
            return self.runner.error(f"{pred.name} has shape {pred.data.shape}, the Segment widget's image "
                                     f"{session.image_name} {spatial}: choose that image's prediction")
        truth = None if gt is None else binary_target(gt.data, truth_labels(pred, target))
        self._reference, self._name = gt if gt is not None else pred, str(pred.metadata.get("image", pred.name))
        self._tested = pred
        runs = int(self.runs.value)
        return self.runner.start(session.iter_sensitivity, prompt, runs, ground_truth=truth, cancellable=True,
                                 text=f"prompt sensitivity: {runs} runs of label {target}", total=runs,
                                 steps=lambda done, total: f"run {done}/{total}", returned=self._show)

    def _show(self, result: SensitivityResult) -> None:
        self.result = result
        agreement, worst = show_result(self.viewer, self._reference, result, self._name, under=self._tested)
        for layer in (agreement, worst):  # which model and precision made them, as a prediction says
            if layer is not None and result.made_by:
                layer.metadata["made_by"] = f"by {result.made_by}"
        what = f"{result.done} of {len(result.prompts)} runs" + (" (cancelled)" if result.cancelled else "")
        if result.dice:
            s = result.spread()
            self.spread.value = (f"{s['dice_min']:.3f} / {s['dice_median']:.3f} / {s['dice_max']:.3f} "
                                 f"(spread {s['dice_spread']:.3f}); worst: run {result.worst + 1}")
        else:
            self.spread.value = "no ground truth compared: agreement map only"
        self.legend.visible = True
        by = f" (by {result.made_by})" if result.made_by else ""
        self.status.value = f"{what}{by}; agreement map: 1 where every run segmented"
        self._plot(result)

    def _plot(self, result: SensitivityResult) -> None:
        self.canvas.setVisible(bool(result.dice))
        self.axes.clear()
        style_axes(self.axes, self.figure.get_facecolor(), self._text)
        if result.dice:
            counts, edges = result.histogram(bins=20)
            self.axes.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color=PLOT_SERIES)
            self.axes.set_xlim(0, 1)
            self.axes.set_xlabel("DSC of the perturbed runs", color=self._text)
        self.canvas.draw_idle()


__all__ = ["SensitivitySection", "prompt_of", "show_result"]
