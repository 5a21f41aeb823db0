"""The Segment dock widget: a thin shell around :class:`napari_medsam_eval.session.Session`.

Prompts live in ordinary layers (a Shapes layer of boxes, a Points layer of
positive/negative points, key ``T`` toggles a point's label). The model is
built, slices are segmented and volumes propagated in napari thread workers;
layers change only in the workers' returned/yielded callbacks, on the GUI
thread, and errors become napari notifications.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from magicgui.widgets import ComboBox, Container, FileEdit, Label, PushButton, SpinBox
from napari.layers import Image, Labels, Points, Shapes
from napari.qt.threading import create_worker
from napari.utils import progress as napari_progress
from napari.utils.notifications import show_error, show_info

from ..propagation import PropagationResult
from ..session import Session
from ..models import BACKENDS, DEFAULT_BACKEND
from ..prompt import Prompt
from ..protocols import PROTOCOLS
from . import _layers

if TYPE_CHECKING:
    import napari

#: models offered (those that segment from prompts alone)
MODEL_CHOICES = [name for name in ("litemedsam", "medsam2", "sam2", "sam") if name in BACKENDS]
DEVICE_CHOICES = ["auto", "cpu", "cuda", "mps"]
PROMPT_SLICE_CHOICES = ["key slice", "current slice"]


def _layers_of(viewer: Any, kind: type, exclude_roles: tuple[str, ...] = ()) -> Callable[[Any], list]:
    def choices(_widget: Any = None) -> list[tuple[str, Any]]:
        return [(layer.name, layer) for layer in viewer.layers
                if isinstance(layer, kind) and layer.metadata.get("role") not in exclude_roles]
    return choices


def _set_image_job(session: Session, data: Any, image_kwargs: dict[str, Any]) -> None:
    session.set_image(data, **image_kwargs)


def _build_job(name: str, checkpoint: str | None, device: str) -> Any:
    return Session.build_backend(name, checkpoint=checkpoint, device=device)


def _segment_job(session: Session, data: Any, image_kwargs: dict[str, Any], prompt: Prompt) -> tuple[Prompt, np.ndarray]:
    _set_image_job(session, data, image_kwargs)
    return prompt, np.asarray(session.segment_slice(prompt).mask, dtype=bool)


def _propagate_job(session: Session, data: Any, image_kwargs: dict[str, Any], prompt: Prompt, margin: int,
                   cancel: threading.Event):
    """Generator for a napari GeneratorWorker: yields (done, total), returns a PropagationResult."""
    _set_image_job(session, data, image_kwargs)
    yield (0, session.n_slices)
    result = yield from session.iter_propagate(prompt, margin=margin, cancel=cancel)
    return result


class SegmentWidget(Container):
    """Pick a model and an image, prompt (drawn or from ground truth), segment a slice or propagate."""

    def __init__(self, napari_viewer: "napari.viewer.Viewer") -> None:
        super().__init__(labels=True)
        self.viewer = napari_viewer
        self.session = Session()
        self._loaded: tuple | None = None
        self._worker: Any = None
        self._pbar: Any = None
        self._gt_prompt: Prompt | None = None
        self._cancel_token: threading.Event | None = None
        #: the last propagation's result (cancelled ones included), for scripts and tests
        self.last_result: PropagationResult | None = None

        # model
        self.model = ComboBox(label="model", choices=MODEL_CHOICES, value=DEFAULT_BACKEND)
        self.checkpoint = FileEdit(label="checkpoint", mode="r", nullable=True, value=None,
                                   tooltip="empty: LiteMedSAM's shipped weights; MedSAM2/SAM2/SAM need a file")
        self.device = ComboBox(label="device", choices=DEVICE_CHOICES, value="auto")
        self.load_button = PushButton(text="Load model")
        # data
        self.image_layer = ComboBox(label="image", choices=_layers_of(napari_viewer, Image))
        self.gt_layer = ComboBox(label="ground truth", nullable=True,
                                 choices=_layers_of(napari_viewer, Labels, ("prediction", "overlay")))
        self.target_label = SpinBox(label="target label", min=1, max=65535, value=1)
        self.box_layer = ComboBox(label="boxes", nullable=True, choices=_layers_of(napari_viewer, Shapes))
        self.point_layer = ComboBox(label="points", nullable=True, choices=_layers_of(napari_viewer, Points))
        self.new_prompt_layers_button = PushButton(text="New prompt layers")
        # prompts from ground truth
        self.protocol = ComboBox(label="protocol", choices=sorted(PROTOCOLS), value="medsam2")
        self.prompt_slice = ComboBox(label="on", choices=PROMPT_SLICE_CHOICES, value="key slice")
        self.mode = SpinBox(label="mazurowski mode", min=1, max=5, value=1, visible=False)
        self.gt_prompt_button = PushButton(text="Prompt from ground truth")
        # running
        self.margin = SpinBox(label="propagation margin", min=0, max=100, value=self.session.margin)
        self.segment_button = PushButton(text="Segment slice")
        self.propagate_button = PushButton(text="Propagate")
        self.cancel_button = PushButton(text="Cancel", enabled=False)
        self.status = Label(label="status", value="no model loaded")

        self.extend([
            self.model, self.checkpoint, self.device, self.load_button,
            self.image_layer, self.gt_layer, self.target_label, self.box_layer, self.point_layer,
            self.new_prompt_layers_button,
            self.protocol, self.prompt_slice, self.mode, self.gt_prompt_button,
            self.margin, self.segment_button, self.propagate_button, self.cancel_button, self.status,
        ])
        self._busy_widgets = [self.load_button, self.gt_prompt_button, self.segment_button, self.propagate_button]

        self.load_button.changed.connect(lambda: self.load_model())
        self.new_prompt_layers_button.changed.connect(lambda: self.new_prompt_layers())
        self.gt_prompt_button.changed.connect(lambda: self.prompt_from_ground_truth())
        self.segment_button.changed.connect(lambda: self.segment_slice())
        self.propagate_button.changed.connect(lambda: self.propagate())
        self.cancel_button.changed.connect(lambda: self.cancel())
        self.protocol.changed.connect(self._on_protocol)
        self.image_layer.changed.connect(self._on_image)
        events = napari_viewer.layers.events
        self._connections = [(event, self._refresh_choices) for event in (events.inserted, events.removed, events.reordered)]
        for event, callback in self._connections:
            event.connect(callback)
        self.native.destroyed.connect(self._disconnect)
        self._refresh_choices()

    def _disconnect(self, *_args: Any) -> None:
        """Forget the viewer's events once the Qt widget is gone; stop a running propagation."""
        for event, callback in self._connections:
            event.disconnect(callback)
        self._connections = []
        if self._cancel_token is not None:
            self._cancel_token.set()

    # -- choices --------------------------------------------------------------

    def _refresh_choices(self, _event: Any = None) -> None:
        self.reset_choices()
        self._pick_defaults()

    def _pick_defaults(self) -> None:
        """Pick ground truth and prompt layers that belong to the chosen image, when none is chosen."""
        image = self.image_layer.value
        if image is None:
            return
        if self.gt_layer.value is None:
            shape = _layers.spatial_shape(image)
            for _name, layer in self._labels_choices():
                if tuple(layer.data.shape) == shape and layer.metadata.get("role") == "ground_truth":
                    self.gt_layer.value = layer
                    break
        for combo, role in ((self.box_layer, "prompt_boxes"), (self.point_layer, "prompt_points")):
            if combo.value is None:
                for layer in self.viewer.layers:
                    if layer.metadata.get("role") == role and layer.metadata.get("image") == image.name:
                        combo.value = layer
                        break

    def _labels_choices(self) -> list:
        return _layers_of(self.viewer, Labels, ("prediction", "overlay"))()

    def _on_image(self, _value: Any = None) -> None:
        self._pick_defaults()

    def _on_protocol(self, value: str) -> None:
        self.mode.visible = value == "mazurowski"

    # -- helpers ----------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._worker is not None

    def _set_busy(self, busy: bool, text: str | None = None) -> None:
        for widget in self._busy_widgets:
            widget.enabled = not busy
        if text is not None:
            self.status.value = text

    def _image(self) -> Image:
        image = self.image_layer.value
        if image is None:
            raise ValueError("choose an image layer first")
        if getattr(image, "multiscale", False):
            raise ValueError(f"{image.name}: multiscale images are not supported")
        return image

    def _image_args(self, image: Image) -> tuple[Any, dict[str, Any]]:
        metadata = image.metadata if isinstance(image.metadata, dict) else {}
        kwargs = {"kind": _layers.layer_kind(image), "rgb": bool(image.rgb), "modality": metadata.get("modality"),
                  "image_id": image.name}
        return image.data, kwargs

    def _model_spec(self) -> tuple[str, str | None, str]:
        checkpoint = self.checkpoint.value
        checkpoint = str(checkpoint) if checkpoint not in (None, "") and str(checkpoint) not in ("", ".") else None
        return self.model.value, checkpoint, self.device.value

    def _worker_failed(self, exc: BaseException) -> None:
        """A worker's exception becomes an error notification (and the status line)."""
        self._error(f"{type(exc).__name__}: {exc}")

    def _make_worker(self, func: Callable[..., Any], *args: Any) -> Any:
        return create_worker(func, *args, _start_thread=False, _connect={"errored": self._worker_failed})

    def _error(self, message: str) -> None:
        self.status.value = message.splitlines()[0][:200]
        show_error(message)

    def _start(self, worker: Any, text: str, on_returned: Callable[[Any], None] | None = None,
               after: Callable[[], Any] | None = None) -> Any:
        """Run ``worker``: busy UI, returned -> ``on_returned``, errors -> notification,
        finished -> idle UI, then ``after``."""
        self._worker = worker
        self._set_busy(True, text)
        if on_returned is not None:
            worker.returned.connect(on_returned)
        worker.finished.connect(self._on_finished)
        if after is not None:
            worker.finished.connect(after)
        worker.start()
        return worker

    def _on_finished(self) -> None:
        self._worker = None
        self._cancel_token = None
        self.cancel_button.enabled = False
        if self._pbar is not None:
            self._pbar.close()
            self._pbar = None
        self._set_busy(False)

    def set_backend(self, backend: Any) -> None:
        """Use an already built backend (a script's or a test's) as the chosen model."""
        self.session.set_backend(backend)
        self._loaded = self._model_spec()
        if getattr(backend, "name", None) in MODEL_CHOICES:
            self.model.value = backend.name
            self._loaded = self._model_spec()
        self.status.value = f"model {getattr(backend, 'name', 'backend')} set"

    def _with_model(self, then: Callable[[], Any]) -> Any:
        """Call ``then`` now if the chosen model is loaded, else after loading it off-thread."""
        if self._loaded == self._model_spec() and self.session.backend is not None:
            return then()
        return self.load_model(then=then)

    # -- actions --------------------------------------------------------------

    def load_model(self, then: Callable[[], Any] | None = None) -> Any:
        """Build the chosen model in a worker; ``then`` runs once it is loaded."""
        if self.busy:
            return None
        spec = self._model_spec()
        pending: list[Callable[[], Any]] = []

        def loaded(backend: Any) -> None:
            self.session.set_backend(backend)
            self._loaded = spec
            self.status.value = f"model {spec[0]} loaded ({backend.describe().get('device', 'cpu')})"
            if then is not None:
                pending.append(then)  # run once this worker has finished and freed the UI

        def after() -> None:
            while pending:
                pending.pop()()

        worker = self._make_worker(_build_job, *spec)
        return self._start(worker, f"loading {spec[0]} ...", loaded, after)

    def new_prompt_layers(self) -> tuple[Shapes, Points] | None:
        """Create the box and point layers for the chosen image and select them."""
        try:
            image = self._image()
        except ValueError as exc:
            self._error(str(exc))
            return None
        boxes = _layers.new_box_layer(self.viewer, image)
        points = _layers.new_point_layer(self.viewer, image)
        self.reset_choices()
        self.box_layer.value, self.point_layer.value = boxes, points
        self.viewer.layers.selection.active = boxes
        boxes.mode = "add_rectangle"
        return boxes, points

    def _prompt_layers(self) -> tuple[Shapes, Points]:
        boxes, points = self.box_layer.value, self.point_layer.value
        if boxes is None or points is None:
            created = self.new_prompt_layers()
            if created is None:
                raise ValueError("no prompt layers")
            boxes, points = created
        return boxes, points

    def prompt_from_ground_truth(self) -> Prompt | None:
        """Fill the prompt layers from the ground truth (chosen protocol and target) and go to its slice."""
        try:
            image, gt = self._image(), self.gt_layer.value
            if gt is None:
                raise ValueError("choose a ground-truth Labels layer first")
            kind = _layers.layer_kind(image)
            shape = _layers.spatial_shape(image)
            if tuple(gt.data.shape) != shape:
                raise ValueError(f"ground truth {gt.name} has shape {tuple(gt.data.shape)}, image {image.name} {shape}")
            index = _layers.current_index(self.viewer, image) if self.prompt_slice.value == "current slice" else None
            options: dict[str, Any] = {}
            if self.protocol.value == "mazurowski":
                options["modes"] = (int(self.mode.value),)
            prompt = self.session.prompt_from_ground_truth(
                np.asarray(gt.data), int(self.target_label.value), self.protocol.value,
                slice_index=index, kind=kind, **options)
            boxes, points = self._prompt_layers()
        except (ValueError, TypeError) as exc:
            self._error(str(exc))
            return None
        _layers.show_prompt(prompt, image, boxes, points)
        self._gt_prompt = prompt
        if prompt.slice_index is not None:
            _layers.go_to_index(self.viewer, image, prompt.slice_index)
        self.status.value = f"{prompt.protocol} prompt for label {prompt.target_label} on slice {prompt.slice_index}"
        return prompt

    def current_prompt(self, index: int | None = None) -> Prompt:
        """The prompt drawn on slice ``index`` (default: the current one, else the only prompted one).

        When the layers still show the last ground-truth prompt, that prompt
        itself is returned (with its protocol and details).
        """
        image = self._image()
        boxes, points = self.box_layer.value, self.point_layer.value
        if boxes is None and points is None:
            raise ValueError("no prompt layers: draw a box or points (New prompt layers) or prompt from ground truth")
        if index is None and _layers.layer_kind(image) != "image":
            index = _layers.current_index(self.viewer, image)
            slices = _layers.prompt_slices(image, boxes, points)
            if index not in slices and len(slices) == 1:
                index = slices[0]
        prompt = _layers.prompt_from_layers(image, index, int(self.target_label.value), boxes, points)
        if prompt.is_empty:
            where = "" if index is None else f" on slice {index}"
            raise ValueError(f"no box or point{where}: draw one or prompt from ground truth")
        if self._gt_prompt is not None and _layers.same_geometry(prompt, self._gt_prompt):
            return self._gt_prompt
        return prompt

    def segment_slice(self) -> Any:
        """Segment the current slice from its prompt (off-thread); the result goes into its slice."""
        if self.busy:
            return None
        try:
            image = self._image()
            prompt = self.current_prompt()
        except ValueError as exc:
            self._error(str(exc))
            return None

        def run() -> Any:
            data, kwargs = self._image_args(image)
            worker = self._make_worker(_segment_job, self.session, data, kwargs, prompt)
            return self._start(worker, f"segmenting slice {prompt.slice_index} ...",
                               lambda out: self._slice_done(image, *out))
        return self._with_model(run)

    def _slice_done(self, image: Image, prompt: Prompt, mask: np.ndarray) -> None:
        layer = _layers.write_prediction(self.viewer, image, prompt.target_label, mask, index=prompt.slice_index,
                                         metadata={"prompt": prompt.to_dict(), "model": self._loaded[0] if self._loaded else None})
        self.status.value = f"slice {prompt.slice_index}: {int(mask.sum())} pixels -> {layer.name}"

    def propagate(self) -> Any:
        """Propagate the prompt through the volume/video in a generator worker with progress and Cancel."""
        if self.busy:
            return None
        try:
            image = self._image()
            prompt = self.current_prompt()
        except ValueError as exc:
            self._error(str(exc))
            return None
        margin = int(self.margin.value)

        def run() -> Any:
            data, kwargs = self._image_args(image)
            self._cancel_token = token = threading.Event()
            worker = self._make_worker(_propagate_job, self.session, data, kwargs, prompt, margin, token)
            worker.aborted.connect(token.set)  # napari's own cancel (worker.quit) stops the run too
            self._pbar = napari_progress(total=0, desc=f"propagating label {prompt.target_label}")
            worker.yielded.connect(self._on_progress)
            self.cancel_button.enabled = True
            return self._start(worker, "propagating ...", lambda result: self._propagation_done(image, result))
        return self._with_model(run)

    def _on_progress(self, value: tuple[int, int]) -> None:
        if self._worker is None:  # a step delivered after the run ended
            return
        done, total = value
        self.status.value = f"propagating: {done}/{total}"
        pbar = self._pbar
        if pbar is not None:  # last: napari's progress bar may process events (and end the run) here
            if pbar.total != total:
                pbar.total = total
            pbar.update(done - pbar.n)

    def _propagation_done(self, image: Image, result: PropagationResult) -> None:
        self.last_result = result
        if result.cancelled:
            self.status.value = f"cancelled after {result.done} of {result.total} slices; layers unchanged"
            show_info(self.status.value)
            return
        prompt = result.prompt
        layer = _layers.write_prediction(self.viewer, image, prompt.target_label, result.mask,
                                         metadata={"prompt": prompt.to_dict(), "model": self._loaded[0] if self._loaded else None})
        self.status.value = f"propagated {result.done} slices in {result.seconds:.1f} s -> {layer.name}"

    def cancel(self) -> None:
        """Stop the running propagation after its current slice."""
        if self._cancel_token is not None:
            self._cancel_token.set()
        self.cancel_button.enabled = False
        self.status.value = "cancelling ..."


__all__ = ["SegmentWidget"]
