"""The Segment dock widget: a thin shell around :class:`napari_medsam_eval.session.session.Session`.

Prompts live in ordinary layers: boxes in a Shapes layer, positive/negative
points in a Points layer (the polarity of the *next* point is chosen first,
in the widget or with key ``T``). The layers the user is drawing in are used
(the active Shapes / Points layer is picked). The model is built, slices
segmented and volumes propagated in napari thread workers (one
:class:`._worker.WorkerRunner`, progress bar in the widget, every input
locked while a job runs); results go to the session on the GUI thread and
into the image's prediction layer (one value per object, :mod:`._prediction_layer`).

The widget only composes its sections (:mod:`._section`), each built from the
session, the viewer, the runner and the sections it reads, top to bottom: the
model (:mod:`._model_section`), the image and prompt layers
(:mod:`._image_section`), the object (:mod:`._objects`), the ground-truth
prompt (:mod:`._ground_truth`), the propagation options
(:mod:`._propagation_options`), the anchors (:mod:`._anchors`) and prompt log
(:mod:`._prompt_log`), and the footer with the actions
(:mod:`._segment_actions`; painted corrections :mod:`._paint`). Keys:
:mod:`._shortcuts`. Errors become napari notifications.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from magicgui.widgets import Container

from napari_medsam_eval.propagation import PropagationResult
from napari_medsam_eval.session.session import Session
from napari_medsam_eval._widgets.common import _layers
from napari_medsam_eval._widgets.common._canvas_style import warm_legend
from napari_medsam_eval._meanwhile import warm_canvas_text, warm_layer_kinds
from napari_medsam_eval._turns import soon
from napari_medsam_eval._widgets.common._prompt_layers import warm_prompt_layers
from napari_medsam_eval._widgets.segment._anchors import AnchorList, follow_anchors
from napari_medsam_eval._widgets.segment._encode_ahead import at_choices
from napari_medsam_eval._widgets.common._dock_layout import fit_in_dock, one_label_column
from napari_medsam_eval._widgets.segment._ground_truth import GroundTruthSection
from napari_medsam_eval._widgets.segment._image_section import ImageSection
from napari_medsam_eval._widgets.segment._model_section import ModelSection
from napari_medsam_eval._widgets.segment._objects import ObjectSection
from napari_medsam_eval._widgets.segment._prompt_log import PromptLogger
from napari_medsam_eval._widgets.segment._propagation_options import PropagationSection
from napari_medsam_eval._widgets.common._section import Section
from napari_medsam_eval._widgets.segment._segment_actions import ActionsFooter, SegmentActions
from napari_medsam_eval._widgets.common._sessions import register_session
from napari_medsam_eval._widgets.common._shortcuts import SEGMENT_SHORTCUTS, bind_shortcuts
from napari_medsam_eval._widgets.common._unit_words import UnitWords, unit_of
from napari_medsam_eval._widgets.common._viewer import real_viewer
from napari_medsam_eval._widgets.common._worker import WorkerRunner

if TYPE_CHECKING:
    import napari

#: the attributes each section lends the widget (its public controls and actions, as before the split)
EXPOSED = {
    "model_section": ("model", "checkpoint", "device", "precision", "load_button", "load_model", "set_backend"),
    "image_section": ("image_layer", "encode_box", "encoder", "box_layer", "point_layer", "polarity",
                      "new_prompt_layers_button", "new_prompt_layers"),
    "object_section": ("target_label", "region", "objects"),
    "truth_section": ("use_gt", "gt_layer", "protocol", "prompt_slice", "mode", "gt_prompt_button",
                      "prompt_from_ground_truth"),
    "footer": ("segment_button", "propagate_button", "correct_button", "cancel_button", "progress", "status"),
    "actions": ("segment_slice", "propagate", "correct_slice", "cancel", "current_prompt"),
}


def warm_up() -> None:
    """Before the first dock is built (on a thread, :func:`napari_medsam_eval._widgets.__getattr__`): ask which
    precisions this CPU computes (the *first look at* choices: OpenVINO loads), and build napari's layer kinds
    once (the prompt layers are Shapes and Points: numba compiles)."""
    at_choices()
    warm_layer_kinds()
    warm_prompt_layers()


class SegmentWidget(Container):
    """Pick a model and an image, prompt (drawn or from ground truth), segment a slice or propagate."""

    def __init__(self, napari_viewer: "napari.viewer.Viewer") -> None:
        super().__init__(labels=False)
        self.viewer = viewer = real_viewer(napari_viewer)  # not napari's proxy (._viewer)
        self.session = session = Session()
        register_session(viewer, session)  # the Compare widget's prompt sensitivity uses it
        self.footer = footer = ActionsFooter()
        self.runner = runner = WorkerRunner(footer.status, (), footer.cancel_button, footer.progress)
        self.model_section = model = ModelSection(session, runner)
        self.image_section = image = ImageSection(viewer, session, runner, model.with_model)
        self.object_section = objects = ObjectSection(viewer, session, runner, image, lambda: truth.gt_layer.value)
        self.truth_section = truth = GroundTruthSection(viewer, session, runner, image, objects.target_label,
                                                        objects.objects.labels)
        truth.gt_layer.changed.connect(objects.objects.show_title)  # the object's name in the truth chosen
        self.propagation_section = propagation = PropagationSection(session.margin)
        self.anchor_list = follow_anchors(AnchorList(session, lambda: int(objects.target_label.value),
                                                     lambda: getattr(image.image_layer.value, "name", None),
                                                     lambda: self.unit_words.unit),
                                          session, image.image_layer, objects.target_label)
        objects.objects.undone.connect(lambda _attempt: self.anchor_list.reset_choices())
        self.actions = SegmentActions(viewer, session, runner, model, image, objects.objects, propagation,
                                      image.encoder)
        self.prompt_log = PromptLogger(session, viewer, truth, propagation, lambda: objects.objects.action)
        self.corrections = Section([self.anchor_list, self.prompt_log], name="corrections_section")
        self._compose([model, image, objects, truth, propagation, self.corrections, footer])
        #: the texts that say "slice" for a volume, "frame" for a video (:mod:`._unit_words`)
        self.unit_words = UnitWords(labels=[propagation.box.first, propagation.box.last],
                                    buttons=[footer.segment_button, footer.correct_button], combos=[truth.prompt_slice])
        self._follow(viewer)
        fit_in_dock(self, footer=[footer, footer.status])  # last: the sections scroll, the actions stay in view
        soon(self.native, lambda: warm_canvas_text(viewer))  # a turn of its own: a first prompt layer draws faster
        warm_legend(viewer, self.native)  # the canvas legend's lines, each in a turn of its own

    def _compose(self, sections: list[Section]) -> None:
        """Stack ``sections`` as one form, lend their controls (:data:`EXPOSED`), lock them while a job runs."""
        self.extend(sections)
        one_label_column(*sections)
        for section, names in EXPOSED.items():
            for name in names:
                setattr(self, name, getattr(getattr(self, section), name))
        self.propagation_box, self.margin = self.propagation_section.box, self.propagation_section.box.margin
        self.runner.controls.extend(control for section in sections for control in section.locked)

    def _follow(self, viewer: "napari.viewer.Viewer") -> None:
        """The buttons and keys start the actions, the layer choices follow the viewer's layers, closing ends
        every job."""
        for button, action in ((self.segment_button, self.segment_slice), (self.propagate_button, self.propagate),
                               (self.correct_button, self.correct_slice), (self.cancel_button, self.cancel)):
            button.changed.connect(lambda *_a, act=action: act())
        self.image_layer.changed.connect(self._show_unit)  # first: the anchors listed next say it
        self.image_layer.changed.connect(self.truth_section.pick_layers)
        self.image_layer.changed.connect(self._show_chosen)  # after the image's layers and object are picked
        events = viewer.layers.events
        self._unbind = bind_shortcuts(viewer, self._shortcut_actions())
        _layers.follow_viewer(self, [(event, self._refresh_choices) for event in
                                     (events.inserted, events.removed, events.reordered)], on_close=self._close)
        self._refresh_choices()
        self._show_unit(self.image_layer.value)

    def _show_unit(self, image: Any = None) -> None:
        """The dock's words in the chosen image's unit: frames for a video, slices otherwise."""
        self.unit_words.show(unit_of(None if image is None else _layers.layer_kind(image)))

    def _show_chosen(self, _image: Any = None) -> None:
        """The chosen image in view, on its prompt's slice (:meth:`ImageSection.show_chosen`)."""
        self.image_section.show_chosen(self.gt_layer.value, int(self.target_label.value))

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

    def _model_spec(self) -> tuple[str, str | None, str, str]:
        """The chosen model's spec, as the session keys its backend (:meth:`ModelSection.spec`)."""
        return self.model_section.spec()

    def _refresh_choices(self, event: Any = None) -> None:
        removed = getattr(event, "type", None) == "removed" and getattr(event.value, "name", None)
        if removed and removed == self.session.image_name and self.busy:
            self.cancel()  # its image is gone: the job stops, its result is dropped (ObjectControls.commit)
        elif removed:
            self.session.forget_image(removed)  # what the session kept of it (its anchors) goes
        self.reset_choices()
        self.truth_section.pick_layers()


__all__ = ["SegmentWidget"]
