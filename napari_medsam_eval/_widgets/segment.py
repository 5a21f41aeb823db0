"""The Segment dock widget: a thin shell around :class:`napari_medsam_eval.session.session.Session`.

Prompts live in ordinary layers: boxes in a Shapes layer, positive/negative
points in a Points layer (the polarity of the *next* point is chosen first,
in the widget or with key ``T``). The layers the user is drawing in are used
(the active Shapes / Points layer is picked). The model is built, slices
segmented and volumes propagated in napari thread workers
(:class:`._worker.WorkerRunner`, progress bar in the widget, every input
locked while a job runs); results go to the session on the GUI thread and
into the image's prediction layer (one value per object,
:mod:`._prediction_layer`). Objects, attempts and undo: :mod:`._objects`;
corrections: :mod:`._anchors`, painted ones :mod:`._paint`; propagation options: :mod:`._propagation_options`;
keys: :mod:`._shortcuts`. Errors become napari notifications.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from magicgui.widgets import Container
from napari.layers import Image, Points, Shapes
from napari.utils.notifications import show_info

from ..core.prompt import Prompt
from ..propagation import PropagationResult
from ..session.session import Session
from ._sessions import register_session
from . import _layers, _objects, _prompt_layers
from ._anchors import start_propagation
from ._dock_layout import button_row, fit_in_dock
from ._drawing import follow_drawing, warn_points
from ._encode_ahead import EncodeAhead
from ..cli.common import PRECISION_CHOICES
from ._paint import painted_anchor
from ._segment_controls import MODEL_CHOICES, build_controls, made_by
from ._shortcuts import SEGMENT_SHORTCUTS, bind_shortcuts
from ._worker import WorkerRunner
from ._viewer import real_viewer

if TYPE_CHECKING:
    import napari


class SegmentWidget(Container):
    """Pick a model and an image, prompt (drawn or from ground truth), segment a slice or propagate."""

    def __init__(self, napari_viewer: "napari.viewer.Viewer") -> None:
        super().__init__(labels=True)
        self.viewer = napari_viewer = real_viewer(napari_viewer)  # not napari's proxy (._viewer)
        self.session = Session()
        register_session(napari_viewer, self.session)  # the Compare widget's prompt sensitivity uses it
        build_controls(self, napari_viewer)
        self._gt_controls = [self.gt_layer, self.protocol, self.prompt_slice, self.gt_prompt_button]
        actions = [button_row(self.segment_button, self.propagate_button),
                   button_row(self.correct_button, self.cancel_button)]
        self.extend([self.model, self.checkpoint, self.device, self.precision, self.load_button, self.image_layer, self.encode_box,
                     self.box_layer,
                     self.point_layer, self.polarity, self.new_prompt_layers_button, self.target_label, self.objects,
                     self.use_gt, *self._gt_controls[:3], self.mode, self.gt_prompt_button, self.propagation_box,
                     self.anchor_list, *actions, self.progress, self.status])
        free = (self.encode_box, self.polarity, self.use_gt, self.anchor_list, *actions, self.progress, self.status)
        controls = [w for w in self if w not in free] + [self.segment_button, self.propagate_button,
                                                         self.correct_button]
        self.runner = WorkerRunner(self.status, controls, self.cancel_button, self.progress)
        self._footer = [*actions, self.progress, self.status]
        self._connect(napari_viewer)
        fit_in_dock(self, footer=self._footer)  # last: the controls scroll, the actions stay in view

    def _connect(self, viewer: "napari.viewer.Viewer") -> None:
        for button, action in ((self.load_button, self.load_model), (self.cancel_button, self.cancel),
                               (self.new_prompt_layers_button, self.new_prompt_layers),
                               (self.gt_prompt_button, self.prompt_from_ground_truth),
                               (self.segment_button, self.segment_slice), (self.propagate_button, self.propagate)):
            button.changed.connect(lambda *_a, act=action: act())
        self.protocol.changed.connect(lambda value: setattr(self.mode, "visible", value == "mazurowski"))
        self.use_gt.changed.connect(self._fold_ground_truth)
        self.image_layer.changed.connect(self._pick_defaults)
        self.session.backend_changed.connect(self._on_backend)
        self.session.prompt_changed.connect(self._show_prompt)
        self.session.slice_ready.connect(self._show_slice)
        self.session.result_ready.connect(self._show_result)
        events = viewer.layers.events
        self._unbind = bind_shortcuts(viewer, self._shortcut_actions())
        self.encoder = EncodeAhead(self, self.encode_box)
        _layers.follow_viewer(self, [(event, self._refresh_choices) for event in
                                     (events.inserted, events.removed, events.reordered)], on_close=self._close)
        follow_drawing(self)
        self._refresh_choices()

    def _shortcut_actions(self) -> dict[str, Callable[[], Any]]:
        objects = {"undo": self.objects.undo, "next_object": lambda: self.objects.step(+1),
                   "previous_object": lambda: self.objects.step(-1)}
        return {action: objects.get(action) or getattr(self, action) for action in SEGMENT_SHORTCUTS}

    def _close(self) -> None:
        """The Qt widget is gone: end every job (none may call back into it) and forget the keys."""
        for runner in (self.runner, self.encoder.runner, self.prompt_log.runner):
            runner.close()
        self._unbind()

    @property
    def busy(self) -> bool:
        return self.runner.busy

    @property
    def last_result(self) -> PropagationResult | None:
        """The last propagation's result (cancelled ones included), for scripts and tests."""
        return self.session.last_result

    def _refresh_choices(self, event: Any = None) -> None:
        removed = getattr(event, "type", None) == "removed" and getattr(event.value, "name", None)
        if removed and removed == self.session.image_name and self.busy:
            self.cancel()  # its image is gone: the job stops, its result is dropped (ObjectControls.commit)
        self.reset_choices()
        self._pick_defaults()

    def _pick_defaults(self, _value: Any = None) -> None:
        """Keep the ground truth and prompt layers on the chosen image: when the image changes (or a
        chosen layer does not fit it), pick its own (:func:`._layers.layers_of_image`) and an object its
        ground truth holds, so nothing of the previous image is prompted, compared or overwritten."""
        image = self.image_layer.value
        if image is None:
            return
        truth, boxes, points = _layers.layers_of_image(
            self.viewer.layers, image, (self.gt_layer.value, self.box_layer.value, self.point_layer.value))
        for combo, layer in ((self.gt_layer, truth), (self.box_layer, boxes), (self.point_layer, points)):
            if combo.value is not layer:
                combo.value = layer
        present = _objects.present_labels(truth)
        if present and int(self.target_label.value) not in present:
            self.target_label.value = present[0]

    def _fold_ground_truth(self, shown: bool) -> None:
        for widget in self._gt_controls:
            widget.visible = bool(shown)
        self.mode.visible = bool(shown) and self.protocol.value == "mazurowski"

    def _image(self) -> Image:
        return _layers.checked_image(self.image_layer.value)

    def _model_spec(self) -> tuple[str, str | None, str, str]:
        checkpoint = self.checkpoint.value
        checkpoint = str(checkpoint) if checkpoint not in (None, "") and str(checkpoint) not in ("", ".") else None
        precision = self.precision.value if self.model.value == "litemedsam" else "fp32"
        return self.model.value, checkpoint, self.device.value, precision

    def set_backend(self, backend: Any) -> None:
        """Use an already built backend (a script's or a test's) as the chosen model."""
        if getattr(backend, "name", None) in MODEL_CHOICES:
            self.model.value = backend.name
        if getattr(backend, "precision", None) in PRECISION_CHOICES:
            self.precision.value = backend.precision
        self.session.set_backend(backend, self._model_spec())

    def _on_backend(self, backend: Any) -> None:
        facts = backend.describe()
        self.status.value = f"model {self.session.model_name} loaded ({', '.join(str(facts[k]) for k in ('device', 'precision') if facts.get(k))})"

    def load_model(self, then: Callable[[], Any] | None = None) -> Any:
        """Build the chosen model in a worker; ``then`` runs once it is loaded."""
        if self.busy:
            return None
        spec = self._model_spec()
        if spec[0] != "litemedsam" and spec[1] is None:
            return self.runner.error(f"{spec[0]} needs a checkpoint file: choose it in the 'checkpoint' field "
                                     "(LiteMedSAM needs none)")

        def after() -> None:  # once this worker has finished and freed the UI
            if then is not None and self.session.has_backend(spec):
                then()
        return self.runner.start(Session.build_backend, *spec, text=f"loading {spec[0]} ...",
                                 returned=lambda backend: self.session.set_backend(backend, spec), finished=after)

    # -- prompts ----------------------------------------------------------------

    def new_prompt_layers(self) -> tuple[Shapes, Points] | None:
        """Create the box and point layers for the chosen image and select them."""
        try:
            image = self._image()
        except ValueError as exc:
            return self.runner.error(str(exc))
        boxes, points = _prompt_layers.add_prompt_layers(self.viewer, image)
        self.reset_choices()
        self.box_layer.value, self.point_layer.value = boxes, points
        return boxes, points

    def prompt_from_ground_truth(self) -> Prompt | None:
        """Fill the prompt layers from the ground truth (chosen protocol and target) and go to its slice."""
        try:
            image = self._image()
            label_map = _layers.label_map_for(image, self.gt_layer.value)
            index = _layers.current_index(self.viewer, image) if self.prompt_slice.value == "current slice" else None
            options = {"modes": (int(self.mode.value),)} if self.protocol.value == "mazurowski" else {}
            return self.session.prompt_from_ground_truth(label_map, int(self.target_label.value), self.protocol.value,
                                                         slice_index=index, kind=_layers.layer_kind(image), **options)
        except (ValueError, TypeError) as exc:
            return self.runner.error(str(exc))

    def _show_prompt(self, prompt: Prompt) -> None:
        """The session made a ground-truth prompt: show it in the prompt layers, on its slice."""
        image = self._image()
        boxes, points = self.box_layer.value, self.point_layer.value
        if boxes is None or points is None:
            boxes, points = self.new_prompt_layers()
        _prompt_layers.show_prompt(prompt, image, boxes, points)
        if prompt.slice_index is not None:
            _layers.go_to_index(self.viewer, image, prompt.slice_index)
        self.status.value = f"{prompt.protocol} prompt for label {prompt.target_label} on slice {prompt.slice_index}"

    def current_prompt(self, index: int | None = None) -> Prompt:
        """The prompt drawn on slice ``index`` (default: the current one, else the only prompted one);
        the last ground-truth prompt itself when the layers still show it."""
        drawn = _prompt_layers.drawn_prompt(self.viewer, self._image(), int(self.target_label.value),
                                            self.box_layer.value, self.point_layer.value, index)
        return self.session.resolve_prompt(drawn)

    # -- segmenting -------------------------------------------------------------

    def segment_slice(self) -> Any:
        """Segment the current slice from its prompt (off-thread); the result goes into its slice."""
        return self._run(propagate=False)

    def propagate(self) -> Any:
        """Propagate the prompt (the only anchor then) in a generator worker with progress and Cancel."""
        return self._run(propagate=True)

    def correct_slice(self) -> Any:
        """Add the prompt drawn on the current slice as an anchor and propagate from it (as Propagate)."""
        return self._run(propagate=True, correct=True)

    def _run(self, propagate: bool, correct: bool = False) -> Any:
        """Start a job on the prompt (a correction's: on the slice on screen), model loaded first; worker or None."""
        if self.busy:
            return None
        try:
            data, kwargs = _layers.image_args(image := self._image())
            index = _layers.current_index(self.viewer, image) if correct else None
            prompt = (correct and painted_anchor(self, image, index)) or self.current_prompt(index)  # ._paint
        except ValueError as exc:
            return self.runner.error(str(exc))
        self.session.use_image(data, **kwargs)  # prepared in the worker
        self._started = (time.perf_counter(), "correct" if correct else "propagate" if propagate else "segment slice")

        def start() -> Any:
            warn_points(self.session, prompt)
            if propagate:
                return start_propagation(self, prompt, correct)
            return self.runner.start(self.session.segment_slice, prompt, text=f"segmenting slice {prompt.slice_index}",
                                     returned=lambda result: self.session.publish_slice(prompt, result.mask))
        return self._with_model(start)

    def _with_model(self, then: Callable[[], Any]) -> Any:
        """Call ``then`` now if the chosen model is loaded, else after loading it off-thread."""
        return then() if self.session.has_backend(self._model_spec()) else self.load_model(then=then)

    def cancel(self) -> None:
        """Stop the running propagation (and encoding ahead) after its current slice."""
        self.runner.cancel()
        self.encoder.stop()

    def _show_slice(self, prompt: Prompt, mask: np.ndarray) -> None:
        layer = self.objects.commit(prompt, mask, prompt.slice_index)
        if layer is not None:
            self.status.value = f"slice {prompt.slice_index}: {int(mask.sum())} pixels -> {layer.name} ({self._mark(layer)})"

    def _show_result(self, result: PropagationResult) -> None:
        if result.cancelled:
            self.status.value = f"cancelled after {result.done} of {result.total} slices; layers unchanged"
            show_info(self.status.value)
            return
        layer = self.objects.commit(result.prompt, result.mask, stops=[s.to_dict() for s in result.record.stops])
        if layer is not None:
            self.status.value = f"{result.summary()} in {result.seconds:.1f} s -> {layer.name} ({self._mark(layer)})"

    def _mark(self, layer: Any) -> str:
        """Record on ``layer`` which model and precision made the mask on display; the words for the status."""
        layer.metadata["made_by"] = words = f"by {made_by(self.session.backend)}"
        return words


__all__ = ["SegmentWidget"]
