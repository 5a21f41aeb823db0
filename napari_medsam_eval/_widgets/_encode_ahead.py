"""Encode ahead in the Segment widget: the image's slices embedded in a background worker.

Ticking *encode ahead* embeds the chosen image's slices nearest to the slice
on screen first (:func:`napari_medsam_eval.session.encode_ahead.iter_encode_ahead`)
in a worker of its own, with its own progress bar, while the user draws:
Segment slice, Propagate and Correct slice keep working meanwhile and find
the slices already encoded (each waits one slice at most). Unticking,
Cancel, another image or closing the widget stop it after the current slice;
with the tick set, another image is encoded from the start.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from magicgui.widgets import CheckBox, ComboBox, Container, Label, ProgressBar

from ..session.encode_ahead import iter_encode_ahead
from . import _layers
from ._worker import WorkerRunner

if TYPE_CHECKING:
    import napari

    from ..session.session import Session


def encode_ahead_controls() -> Container:
    """The row of controls: the tick, a progress bar and its count."""
    return Container(widgets=[
        CheckBox(name="tick", text="encode ahead", value=False,
                 tooltip="embed every slice of the image in the background, nearest to the slice on screen "
                         "first, so that segmenting and propagating run at decoder speed"),
        ProgressBar(name="bar", value=0, min=0, max=1, label="encoded"),
        Label(name="done", value=""),
    ], layout="horizontal", labels=False, name="encode_ahead")


class EncodeAhead:
    """Runs and stops the encode-ahead worker of the image chosen in ``image_layer`` (its own runner: the
    widget's jobs are not blocked); ``with_model`` runs its start once the chosen model is loaded."""

    def __init__(self, session: "Session", viewer: "napari.viewer.Viewer", image_layer: ComboBox,
                 with_model: Callable[[Callable[[], Any]], Any], controls: Container) -> None:
        self.session, self.viewer, self.image_layer, self.with_model = session, viewer, image_layer, with_model
        self.controls = controls
        self.runner = WorkerRunner(controls.done, progress_bar=controls.bar)
        controls.tick.changed.connect(lambda on: self.start() if on else self.stop())
        image_layer.changed.connect(lambda _image: self.restart())

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
            return self.runner.start(iter_encode_ahead, self.session, current, cancellable=True,
                                     text="encoding ...", steps=lambda done, total: f"{done}/{total}",
                                     returned=self._ended, error_prefix="encode ahead: ")
        return self.with_model(run)

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


__all__ = ["EncodeAhead", "encode_ahead_controls"]
