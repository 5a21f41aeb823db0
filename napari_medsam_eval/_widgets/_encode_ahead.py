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

from typing import TYPE_CHECKING, Any

from magicgui.widgets import CheckBox, Container, Label, ProgressBar

from ..session.encode_ahead import iter_encode_ahead
from . import _layers
from ._worker import WorkerRunner

if TYPE_CHECKING:
    from .segment import SegmentWidget


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
    """Runs and stops ``widget``'s encode-ahead worker (its own runner: the widget's jobs are not blocked)."""

    def __init__(self, widget: "SegmentWidget", controls: Container) -> None:
        self.widget = widget
        self.controls = controls
        self.runner = WorkerRunner(controls.done, progress_bar=controls.bar)
        controls.tick.changed.connect(lambda on: self.start() if on else self.stop())
        widget.image_layer.changed.connect(lambda _image: self.restart())

    @property
    def busy(self) -> bool:
        return self.runner.busy

    def start(self) -> Any:
        """Encode the chosen image (the model is loaded first when it is not); the worker or None."""
        widget = self.widget
        if self.busy or not self.controls.tick.value or widget.image_layer.value is None:
            return None
        image = widget.image_layer.value
        data, kwargs = _layers.image_args(image)
        current = _layers.current_index(widget.viewer, image)

        def run() -> Any:
            widget.session.use_image(data, **kwargs)  # prepared in the worker, under the model lock
            return self.runner.start(iter_encode_ahead, widget.session, current, cancellable=True,
                                     text="encoding ...", steps=lambda done, total: f"{done}/{total}",
                                     returned=self._ended, error_prefix="encode ahead: ")
        return widget._with_model(run)

    def _ended(self, encoded: int) -> None:
        if encoded == 0 and not self.runner.cancelling:
            self.controls.done.value = f"{self.widget.session.model_name} keeps no per-slice embeddings"

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
