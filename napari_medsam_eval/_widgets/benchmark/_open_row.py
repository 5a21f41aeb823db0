"""One row of a benchmark run, opened in the viewer: image, ground truth, prediction, prompt.

Opening a row must not freeze the viewer, so the work is split in two:

* in the worker thread, :func:`open_job` reads the row's case, saved
  prediction and prompt (:func:`napari_medsam_eval.benchmark.open_row.load_run_case`)
  and builds each napari layer (the layer models are plain Python: their
  contrast limits, thumbnails and napari's first-use JIT compiling happen
  there), one :class:`OpenStep` per layer;
* on the GUI thread, :func:`apply_step` puts one step's layer in the viewer.
  The job yields a step and waits until the GUI has applied it; the handler
  :func:`paced` applies each in a turn of the event loop of its own
  (:func:`napari_medsam_eval._turns.soon`, which keeps the pieces of GUI work of every widget
  apart), so the viewer repaints in between; a new layer is added hidden and shown a turn later. Last,
  the job yields the :class:`RunCase`: the last row's layers it has no use for are retired (hidden and
  emptied, not removed: napari collects garbage in full at a removal), then it is brought into view.

A row opened after another reuses the last row's layers (data, name, transform and metadata replaced)
instead of removing and adding layers: napari collects garbage at every removal and builds new visuals
at every addition.

Once all are there, the image is brought into view (:mod:`._view`: the other images hidden, the
camera fitted) on the slice where the prediction is most wrong for the row's target
(:attr:`~napari_medsam_eval.benchmark.open_row.RunCase.view_slice`), or the one given.

Layers get the roles the Compare widget looks for (``ground_truth``,
``prediction`` with ``target_label``), so it picks them up by itself: no
widget sets another's controls.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generator

import numpy as np
from napari.layers import Image, Labels, Layer, Points, Shapes
from napari.utils.colormaps import DirectLabelColormap

from napari_medsam_eval._layer_style import ERROR_PART_LAYER_COLORS, PREDICTION_CONTOUR as WHY_CONTOUR, style_prediction
from napari_medsam_eval._widgets.common._outlined_labels import OutlinedLabels
from napari_medsam_eval._reader import case_to_layer_data
from napari_medsam_eval.benchmark.open_row import RunCase, load_run_case
from napari_medsam_eval.benchmark.schema import row_labels
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.evaluation.error_parts import part_overlay
from napari_medsam_eval.evaluation.mask_comparison import binary_target
from napari_medsam_eval.report.stats import row_stops
from napari_medsam_eval._widgets.common._layers import add_inactive, transform_kwargs
from napari_medsam_eval._widgets.common._prompt_layers import make_box_layer, make_point_layer, show_prompt
from napari_medsam_eval._widgets.common._removal import remove_layers, retire_layers
from napari_medsam_eval._turns import soon
from napari_medsam_eval._widgets.common._view import bring_into_view
from napari_medsam_eval._widgets.common._canvas import OPENED_KEY, show_view

#: seconds the job waits for the GUI to apply a step before it goes on regardless (a closed viewer)
ACK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class OpenStep:
    """One layer of an opened row: its ``role`` (image, ground_truth, prediction, error_parts, prompt_boxes,
    prompt_points) and the layer, built off the GUI thread; a prompt step has its ``prompt`` and an
    empty ``spare`` layer of the other prompt kind (to fill a reused layer with :func:`show_prompt`)."""

    role: str
    layer: Layer
    prompt: Prompt | None = None
    spare: Layer | None = None


def open_steps(loaded: RunCase) -> list[OpenStep]:
    """The layers of ``loaded`` as steps, built off the GUI thread."""
    case, row = loaded.case, loaded.row
    steps: list[OpenStep] = []
    for data, kwargs, kind in case_to_layer_data(case):
        role = "image" if kind == "image" else "ground_truth"
        kwargs = {**kwargs, "metadata": {**kwargs.get("metadata", {}), OPENED_KEY: role}}
        steps.append(OpenStep(role, (Image if kind == "image" else Labels)(data, **kwargs)))
    image = steps[0].layer
    if loaded.prediction is not None:
        metadata = {"role": "prediction", "image": image.name, "model": row.get("model"),
                    "protocol": row.get("protocol"), "stops": row_stops(row), OPENED_KEY: "prediction"}
        metadata.update(row_object(row))
        steps.append(OpenStep("prediction", style_prediction(OutlinedLabels(
            loaded.prediction, name=f"{case.case_id} prediction ({row.get('model')})", metadata=metadata,
            **transform_kwargs(image)))))
    why = why_layer(loaded, image)
    if why is not None:
        steps.append(OpenStep("error_parts", why))
    prompt = loaded.prompt
    if prompt is not None:
        boxes = make_box_layer(image, f"{image.name} prompt box")
        points = make_point_layer(image, f"{image.name} prompt points")
        show_prompt(prompt, image, boxes, points)
        for role, layer, spare, wanted in (("prompt_boxes", boxes, make_point_layer(image), prompt.boxes),
                                           ("prompt_points", points, make_box_layer(image), prompt.points)):
            if wanted:
                layer.metadata[OPENED_KEY] = role
                steps.append(OpenStep(role, layer, prompt, spare))
    return steps


def row_object(row: dict[str, Any]) -> dict[str, Any]:
    """A row's prediction as the object Compare compares (layer metadata): ``target_label``, the value its
    saved file holds (a region of several labels is written as its first), and for a region the labels it
    unites (``objects``); nothing for a case-level row."""
    labels = row_labels(row)
    if labels is None:
        return {}
    return {"target_label": labels[0], "objects": {labels[0]: {"labels": list(labels), "name": row.get("label_name")}}}


def why_layer(loaded: RunCase, image: Layer) -> Labels | None:
    """The row's error split into parts (:func:`~napari_medsam_eval.evaluation.error_parts.part_overlay`), each
    part's outline in its colour (:data:`ERROR_PART_LAYER_COLORS`; outlines, not fills: a large part would
    hide the image), over ``image``'s transform; None without a saved prediction or a ground truth."""
    case, row, prediction = loaded.case, loaded.row, loaded.prediction
    if prediction is None or case.label is None or np.shape(prediction) != np.shape(case.label):
        return None
    labels = row_labels(row)
    target = None if labels is None else labels[0]
    overlay = part_overlay(binary_target(prediction, labels, binary_fallback=True), binary_target(case.label, labels))
    layer = OutlinedLabels(overlay, name=f"{case.case_id} why{'' if target is None else f' [label {target}]'}",
                           colormap=DirectLabelColormap(color_dict=ERROR_PART_LAYER_COLORS),
                           metadata={"role": "error_parts", "target_label": target, OPENED_KEY: "error_parts"},
                           **transform_kwargs(image))
    layer.contour = WHY_CONTOUR
    return layer


def open_job(run_dir: str | Path, row: dict[str, Any], ack: threading.Event,
             timeout: float = ACK_TIMEOUT_S) -> Generator[OpenStep | RunCase, None, RunCase]:
    """Generator for a napari worker: read the row and build its layers (here, off the GUI thread),
    then yield its :class:`OpenStep` values and last the :class:`RunCase` (:func:`paced_items`)."""
    loaded = load_run_case(run_dir, row)
    return (yield from paced_items(open_steps(loaded), loaded, ack, timeout))


def paced_items(steps: list[OpenStep], opened: Any, ack: threading.Event,
                timeout: float = ACK_TIMEOUT_S) -> Generator[Any, None, Any]:
    """Yield ``steps`` one at a time, then ``opened`` (what the GUI brings into view), each once the GUI
    has set ``ack`` for the one before; returns ``opened``."""
    for item in [*steps, opened]:
        ack.clear()
        yield item
        ack.wait(timeout)
    return opened


def paced(owner: Any, ack: threading.Event, viewer: Any, shown: dict[str, Layer],
          show_case: Callable[[Any], Any]) -> Callable[[Any], None]:
    """The ``yielded`` handler of an opening job (:func:`paced_items`): each item in a turn of the event loop
    of its own (:func:`napari_medsam_eval._turns.soon`), a layer put in ``viewer`` (:func:`apply_step`, collected in ``shown``),
    the last item given to ``show_case`` (which brings it into view), then ``ack`` set so the job yields the
    next; once the Qt object ``owner`` is deleted nothing is applied and ``ack`` is set at once."""
    def step(item: Any) -> None:
        def piece() -> None:
            try:
                if isinstance(item, OpenStep):
                    wanted = item.layer.visible
                    if apply_step(viewer, item, shown, hidden=True) is item.layer and wanted:
                        # a new layer is drawn first in a turn of its own (a first Shapes layer: 170 ms)
                        soon(owner, lambda: setattr(item.layer, "visible", True))
                else:
                    show_case(item)
            finally:
                ack.set()
        if not isinstance(item, OpenStep):  # the last row's layers this one has no use for: retired (not removed)
            soon(owner, lambda: retire_layers(stale_layers(viewer, shown), OPENED_KEY))  # in a turn of their own
        soon(owner, piece, dropped=ack.set)
    return step


def stale_layers(viewer: Any, shown: dict[str, Layer]) -> list[Layer]:
    """The layers of the row opened last (retired ones too) that ``shown`` (this row's, by role) has not taken."""
    return [layer for role, layer in opened_layers(viewer).items() if shown.get(role) is not layer]


def opened_layers(viewer: Any) -> dict[str, Layer]:
    """The layers of the row opened last, by role."""
    return {layer.metadata[OPENED_KEY]: layer for layer in viewer.layers
            if isinstance(layer.metadata.get(OPENED_KEY), str)}


def apply_step(viewer: Any, step: OpenStep, shown: dict[str, Layer], hidden: bool = False) -> Layer:
    """GUI thread: show ``step``'s layer, in the last row's layer of its role when it fits (else the
    step's new layer, added hidden with ``hidden``: its caller shows it); ``shown`` collects this row's
    layers by role (the image comes first)."""
    old = opened_layers(viewer).get(step.role)
    new = step.layer
    if old is not None and _fits(old, new):
        layer = _update(old, new)
        if step.prompt is not None:
            boxes, points = (old, step.spare) if step.role == "prompt_boxes" else (step.spare, old)
            show_prompt(step.prompt, shown.get("image", new), boxes, points)
    else:
        if old is not None:
            remove_layers(viewer, [old])
        if hidden:
            new.visible = False
        layer = add_inactive(viewer, new)
    shown[step.role] = layer
    return layer


def finish_open(viewer: Any, loaded: RunCase, shown: dict[str, Layer], index: int | None = None) -> dict[str, Layer]:
    """GUI thread, after the steps: retire the last row's layers this row has no use for, bring the image
    into view (:func:`._view.bring_into_view`) on slice ``index``, by default the row's
    :attr:`~RunCase.view_slice` (most errors), else the prompt's; returns the row's layers by role."""
    retire_layers(stale_layers(viewer, shown), OPENED_KEY)
    if index is None:
        index = loaded.view_slice if loaded.view_slice is not None else getattr(loaded.prompt, "slice_index", None)
    if "image" in shown:
        bring_into_view(viewer, shown["image"], index, shown.values())
        # truth and prediction first; its why and the Compare dock's TP / FP / FN are views of the canvas choice
        show_view(viewer, "truth & prediction", shown["image"], **{k: v for k, v in shown.items() if k != "image"})
    return dict(shown)


def _fits(old: Layer, new: Layer) -> bool:
    return (type(old) is type(new) and old.ndim == new.ndim
            and bool(getattr(old, "rgb", False)) == bool(getattr(new, "rgb", False)))


def _update(old: Layer, new: Layer) -> Layer:
    """Give ``old`` the data and settings of ``new`` (a prompt layer: all but its shapes/points), setting
    only what changed (each setting redraws). Metadata first: the Compare widget reads them when the
    data change."""
    old.metadata.clear()
    old.metadata.update(new.metadata)
    for name in ("scale", "translate"):
        if not np.array_equal(getattr(old, name), getattr(new, name)):
            setattr(old, name, getattr(new, name))
    if isinstance(old, Image) and tuple(old.contrast_limits) != tuple(new.contrast_limits):
        old.contrast_limits_range = new.contrast_limits_range
        old.contrast_limits = new.contrast_limits
    if old.opacity != new.opacity:
        old.opacity = new.opacity
    old.visible = new.visible  # (a retired layer: hidden)
    if not isinstance(old, (Shapes, Points)):
        old.data = new.data
    if old.name != new.name:
        old.name = new.name
    return old


__all__ = ["OPENED_KEY", "OpenStep", "RunCase", "apply_step", "finish_open", "load_run_case", "open_job",
           "open_steps", "opened_layers", "paced", "paced_items", "stale_layers"]
