"""The Segment widget's actions: the footer's buttons, progress and status, and the jobs they start.

:class:`ActionsFooter` holds *Segment slice*, *Propagate*, *Correct slice* and
*Cancel* in two rows, the progress bar and the status line (it stays in view
below the scrolling sections). :class:`SegmentActions` runs them in the
widget's one worker runner: the prompt drawn on the slice (or painted on the
prediction layer, :mod:`._paint`) is segmented or propagated, the model
loaded first when needed; results come back through the session's events and
are written as the object's attempt (:mod:`._objects`). Corrections: the
prompt becomes an anchor (:mod:`._anchors`) and propagates from there.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import Label, ProgressBar, PushButton
from napari.utils.notifications import show_info

from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.models.base import made_by
from napari_medsam_eval.propagation import PropagationResult
from napari_medsam_eval._widgets.common import _layers
from napari_medsam_eval._widgets.common._dock_layout import button_row
from napari_medsam_eval._widgets.common._status_text import wrap_status
from napari_medsam_eval._widgets.segment._drawing import warn_points
from napari_medsam_eval._widgets.segment._encode_ahead import EncodeAhead
from napari_medsam_eval._widgets.segment._image_section import ImageSection
from napari_medsam_eval._widgets.segment._model_section import ModelSection
from napari_medsam_eval._widgets.segment._objects import ObjectControls
from napari_medsam_eval._widgets.segment._paint import painted_anchor
from napari_medsam_eval._widgets.segment._propagation_options import PropagationSection
from napari_medsam_eval._widgets.common._section import Section
from napari_medsam_eval._widgets.common._shortcuts import with_shortcut
from napari_medsam_eval._widgets.common._unit_words import unit_of
from napari_medsam_eval._widgets.common._words import TIPS
from napari_medsam_eval._widgets.common._worker import WorkerRunner

if TYPE_CHECKING:
    import napari

    from napari_medsam_eval.session.session import Session

CORRECT_TOOLTIP = ("add the prompt drawn on this slice (or what you painted or erased on the prediction layer "
                   "there, kept as painted) to the propagated result and propagate from it up to the other "
                   "prompted slices")


class ActionsFooter(Section):
    """The action buttons (two rows), the progress bar and the status line."""

    def __init__(self) -> None:
        self.segment_button = PushButton(text="Segment slice", tooltip=with_shortcut(
            "segment the slice on screen from its prompt", "segment_slice"))
        self.propagate_button = PushButton(text="Propagate", tooltip=with_shortcut(
            "segment the whole volume / video from the prompt", "propagate"))
        self.correct_button = PushButton(text="Correct slice", tooltip=with_shortcut(CORRECT_TOOLTIP, "correct_slice"))
        self.cancel_button = PushButton(text="Cancel", enabled=False, tooltip=with_shortcut(
            "stop the running job after its current slice", "cancel"))
        self.rows = [button_row(self.segment_button, self.propagate_button),
                     button_row(self.correct_button, self.cancel_button)]
        self.progress = ProgressBar(label="progress", value=0, min=0, max=1, tooltip=TIPS["progress"])
        self.status = Label(label="status", value="no model loaded")
        wrap_status(self.status)
        super().__init__([*self.rows, self.progress, self.status], name="actions_section")

    @property
    def locked(self) -> list:
        return [self.segment_button, self.propagate_button, self.correct_button]


class SegmentActions:
    """Segment a slice, propagate, correct and cancel: the jobs of one Segment widget's session."""

    def __init__(self, viewer: "napari.viewer.Viewer", session: "Session", runner: WorkerRunner,
                 model: ModelSection, image: ImageSection, objects: ObjectControls,
                 propagation: PropagationSection, encoder: EncodeAhead) -> None:
        self.viewer, self.session, self.runner = viewer, session, runner
        self.model, self.image, self.objects, self.propagation, self.encoder = (model, image, objects,
                                                                                 propagation, encoder)
        session.slice_ready.connect(self._show_slice)
        session.result_ready.connect(self._show_result)

    def segment_slice(self) -> Any:
        """Segment the current slice from its prompt (off-thread); the result goes into its slice."""
        return self._run(propagate=False)

    def propagate(self) -> Any:
        """Propagate the prompt (the only anchor then) in a generator worker with progress and Cancel."""
        return self._run(propagate=True)

    def correct_slice(self) -> Any:
        """Add the prompt drawn on the current slice as an anchor and propagate from it (as Propagate)."""
        return self._run(propagate=True, correct=True)

    def cancel(self) -> None:
        """Stop the running propagation (and encoding ahead) after its current slice."""
        self.runner.cancel()
        self.encoder.stop()

    def current_prompt(self, index: int | None = None) -> Prompt:
        """The prompt drawn on slice ``index`` (default: the current one, else the only prompted one);
        the last ground-truth prompt itself when the layers still show it."""
        return self.image.drawn_prompt(int(self.objects.target_label.value), index)

    def _run(self, propagate: bool, correct: bool = False) -> Any:
        """Start a job on the prompt (a correction's: on the slice on screen), model loaded first; worker or None."""
        if self.runner.busy:
            return None
        try:
            data, kwargs = _layers.image_args(image := self.image.image())
            index = _layers.current_index(self.viewer, image) if correct else None
            prompt = (correct and painted_anchor(self.viewer, image, index, int(self.objects.target_label.value),
                                                 self.objects.history)) or self.current_prompt(index)
        except ValueError as exc:
            return self.runner.error(str(exc))
        self.session.use_image(data, **kwargs)  # prepared in the worker
        self.objects.begin("correct" if correct else "propagate" if propagate else "segment slice")

        def start() -> Any:
            warn_points(self.session, prompt)
            if propagate:
                return self._propagate(prompt, correct)
            unit = unit_of(_layers.layer_kind(image))
            return self.runner.start(self.session.segment_slice, prompt, text=f"segmenting {unit} {prompt.slice_index}",
                                     returned=lambda result: self.session.publish_slice(prompt, result.mask,
                                                                                         result.made_by))
        return self.model.with_model(start)

    def _propagate(self, prompt: Prompt, correct: bool) -> Any:
        """Propagate ``prompt`` (or correct with it) in the runner: off the GUI thread, ``(done, total)``
        progress, Cancel; the propagation options go to the session, the result to ``Session.publish``."""
        session = self.session
        try:
            options = self.propagation.session_options(_layers.layer_kind(self.image.image()), session.n_slices,
                                               prompt.slice_index)
        except ValueError as exc:
            return self.runner.error(str(exc))
        job, verb = (session.iter_correct, "correcting") if correct else (session.iter_propagate, "propagating")
        where = f" from {unit_of(session.kind)} {prompt.slice_index}" if correct else ""
        return self.runner.start(
            job, prompt, **options, cancellable=True, text=f"{verb}{where} ...",
            progress=f"{verb} label {prompt.target_label}", returned=session.publish,
            steps=lambda done, total: f"{verb}: {done}/{total}", total=session.n_slices)

    def _show_slice(self, prompt: Prompt, mask: np.ndarray, words: str = "") -> None:
        layer = self.objects.commit(prompt, mask, prompt.slice_index)
        if layer is not None:
            self.runner.status.value = (f"{unit_of(self.session.kind)} {prompt.slice_index}: {int(mask.sum())} "
                                        f"pixels -> {layer.name} "
                                        f"({self._mark(layer, words)})")

    def _show_result(self, result: PropagationResult) -> None:
        status = self.runner.status
        if result.cancelled:
            status.value = (f"cancelled after {result.done} of {result.total} {unit_of(self.session.kind)}s; "
                            "layers unchanged")
            show_info(status.value)
            return
        layer = self.objects.commit(result.prompt, result.mask,
                                            stops=[s.to_dict() for s in result.record.stops])
        if layer is not None:
            status.value = f"{result.summary()} in {result.seconds:.1f} s -> {layer.name} ({self._mark(layer, result.made_by)})"

    def _mark(self, layer: Any, words: str) -> str:
        """Record on ``layer`` which model and precision made the mask on display (the result's ``made_by``:
        the first look or the session's backend); the words for the status."""
        layer.metadata["made_by"] = words = f"by {words or made_by(self.session.backend)}"
        return words


__all__ = ["ActionsFooter", "CORRECT_TOOLTIP", "SegmentActions"]
