"""Encode ahead in the Segment widget: the image's slices embedded in a background worker.

Ticking *encode ahead* embeds the chosen image's slices nearest to the slice
on screen first (:func:`napari_medsam_eval.session.encode_ahead.iter_encode_ahead`)
in a worker of its own, with its own progress bar, while the user draws:
Segment slice, Propagate and Correct slice keep working meanwhile and find
the slices already encoded (each waits one slice at most). Unticking,
Cancel, another image or closing the widget stop it after the current slice;
with the tick set, another image is encoded from the start.

The row reads *encode ahead [ ] on, first look at [model's]*: the tick, then the *first look at*
field, named on the row (each control of a dock has a label of its own). A quick first look: that
field (LiteMedSAM only) names a cheaper precision, bf16 or int8. Ticking then builds that backend
in the worker (once per model spec), sets it as the session's first look
(:mod:`napari_medsam_eval.session.first_look`) and encodes every slice with it, then with the model
itself; the count names the pass (``bf16 5/13``, then ``fp32 2/13``). Until the second pass ends, a
segmentation is the first look's, and the status line and the layer's ``made_by`` say so.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from magicgui.widgets import CheckBox, ComboBox, Container, Label, ProgressBar

from napari_medsam_eval.models.base import made_by
from napari_medsam_eval.session.encode_ahead import iter_encode_ahead
from napari_medsam_eval.session.session import Session
from napari_medsam_eval._widgets.common import _layers
from napari_medsam_eval._widgets.common._elided import ElidedLabel
from napari_medsam_eval._widgets.common._words import TIPS, wrapped
from napari_medsam_eval._widgets.common._worker import WorkerRunner

if TYPE_CHECKING:
    import napari

#: the *at* field's first choice: the model's own precision (no first look)
MODELS_OWN = "model's"
AT_TOOLTIP = TIPS["first look at"]


def at_choices() -> tuple[str, ...]:
    """The *at* field's choices: the model's own, then the cheaper precisions this CPU computes."""
    from napari_medsam_eval.models.cpu_precisions import precisions_here

    return (MODELS_OWN, *[p for p in precisions_here() if p != "fp32"])
#: the least width of the row's progress bar, in pixels (the row stays within a narrow dock)
BAR_MIN_WIDTH = 60
AT_OFF_TOOLTIP = wrapped("a first look at another precision is LiteMedSAM's only: {model} has one precision")


def encode_ahead_controls() -> Container:
    """The row *encode ahead*: the tick (*on*), the first look's precision after its name, a progress bar and
    its count (elided, never widening the dock: :class:`._elided.ElidedLabel`)."""
    row = Container(widgets=[
        CheckBox(name="tick", text="on", value=False, tooltip=TIPS["encode ahead"]),
        Label(name="at_label", value="first look at", tooltip=AT_TOOLTIP),
        ComboBox(name="at", label="first look at", choices=at_choices(), value=MODELS_OWN, tooltip=AT_TOOLTIP),
        ProgressBar(name="bar", value=0, min=0, max=1, label="encoded", tooltip=TIPS["encoded"]),
        ElidedLabel(name="done", value=""),
    ], layout="horizontal", labels=False, name="encode_ahead", label="encode ahead", tooltip=TIPS["encode ahead"])
    row.at.native.setAccessibleName("first look at")
    row.margins = (0, 0, 0, 0)  # a row of its section, as wide as the others
    row.bar.native.setMinimumWidth(BAR_MIN_WIDTH)
    return row


class EncodeAhead:
    """Runs and stops the encode-ahead worker of the image chosen in ``image_layer`` (its own runner: the
    widget's jobs are not blocked); ``with_model`` runs its start once the chosen model is loaded."""

    def __init__(self, session: "Session", viewer: "napari.viewer.Viewer", image_layer: ComboBox,
                 with_model: Callable[[Callable[[], Any]], Any], controls: Container) -> None:
        self.session, self.viewer, self.image_layer, self.with_model = session, viewer, image_layer, with_model
        self.controls = controls
        self.runner = WorkerRunner(controls.done, progress_bar=controls.bar)
        self._first_looks: dict[tuple, Any] = {}  # first-look backends built, by model spec
        controls.tick.changed.connect(lambda on: self.start() if on else self.stop())
        image_layer.changed.connect(lambda _image: self.restart())
        controls.at.changed.connect(lambda _at: self.restart())
        session.backend_changed.connect(self._offer)

    @property
    def busy(self) -> bool:
        return self.runner.busy

    def start(self) -> Any:
        """Encode the chosen image (the model is loaded first when it is not); the worker or None."""
        image = self.image_layer.value
        if self.busy or not self.controls.tick.value or image is None:
            return None
        data, kwargs = _layers.image_args(image)
        current = _layers.current_index(self.viewer, image)

        def run() -> Any:
            self.session.use_image(data, **kwargs)  # prepared in the worker, under the model lock
            at = self.controls.at.value
            return self.runner.start(self._passes, current, at, cancellable=True, text="encoding ...",
                                     steps=self._steps(at), returned=self._ended, error_prefix="encode ahead: ")
        return self.with_model(run)

    def _passes(self, current: int | None, at: str, cancel: Any) -> Any:
        """The worker's job: the first look built and set (or none), then both passes of encoding ahead."""
        first = self._first_look(at)
        with self.session.lock:
            self.session.set_first_look(first)  # (prepares the image named by use_image)
        return (yield from iter_encode_ahead(self.session, current, cancel=cancel))

    def _first_look(self, at: str) -> Any:
        """The first-look backend at precision ``at`` (built once per model spec), or None for the model's own."""
        spec = self.session.backend_spec
        model, checkpoint, device, precision = spec if isinstance(spec, tuple) and len(spec) == 4 else (
            self.session.model_name, None, "auto", None)
        if at == MODELS_OWN or model != "litemedsam" or at == getattr(self.session.backend, "precision", None):
            return None
        key = (model, checkpoint, device, at)
        if key not in self._first_looks:
            self._first_looks[key] = Session.build_backend(model, checkpoint, device, at)
        return self._first_looks[key]

    def _steps(self, at: str) -> Callable[[int, int], str]:
        """The count's words: ``done/total``, or with a first look the pass's precision (``bf16 3/13``)."""
        model = made_by(self.session.backend).rpartition(" ")[2]

        def words(done: int, total: int) -> str:
            if self.session.first_look.backend is None:
                return f"{done}/{total}"
            n = total // 2
            return f"{at} {done}/{n}" if done <= n else f"{model} {done - n}/{n}"
        return words

    def _offer(self, backend: Any) -> None:
        """The *at* field is LiteMedSAM's only: disabled (at the model's own precision) for another model."""
        name = getattr(backend, "name", None)
        at = self.controls.at
        at.enabled = name in (None, "litemedsam")
        at.tooltip = AT_TOOLTIP if at.enabled else AT_OFF_TOOLTIP.format(model=name)
        self.controls.at_label.tooltip = at.tooltip
        if not at.enabled:
            at.value = MODELS_OWN

    def _ended(self, encoded: int) -> None:
        if encoded == 0 and not self.runner.cancelling:
            self.controls.done.value = f"{self.session.model_name} keeps no per-slice embeddings"

    def stop(self) -> None:
        """Stop after the current slice (the slices encoded so far stay in the model's cache)."""
        self.runner.stop()

    def restart(self) -> None:
        """Another image: stop, then encode it from the start once the worker has ended (when ticked)."""
        if self.busy:
            self.runner.stop()
            self.runner.worker.finished.connect(self.start)
        else:
            self.start()


__all__ = ["EncodeAhead", "MODELS_OWN", "at_choices", "encode_ahead_controls"]
