"""Drawn vs protocol prompts in the Segment widget: every drawn prompt is logged (core: :mod:`..protocols.prompt_log`).

When a ground-truth layer is chosen, each result of a drawn prompt (*Segment slice*,
*Propagate*, *Correct slice*) is logged as one row of the prompt log beside the prompt the
chosen protocol makes from the ground truth for the same target and slice: box IoU, centre
offset (px, mm) and the DSC of each. The protocol's prompt is segmented the user's way (that
slice, or propagated with the same options) in a worker of its own, from the session's cached
embeddings; the row is appended there. The controls: *log drawn prompts*, the *log file*
(empty: :func:`~napari_medsam_eval.protocols.prompt_log.default_log_path`, else none: nothing is logged until a
file is named; off unless ``$MEDSAM_EVAL_PROMPT_LOG`` names one) and a line that says
whether the log is on and which file it writes (it holds case ids and image paths), then compares the
last drawn prompt with the protocol's. Prompts made by a protocol (*Prompt from ground truth*,
unchanged) are not logged.
"""
from __future__ import annotations

import html
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from magicgui.widgets import CheckBox, Container, FileEdit, Label

from napari_medsam_eval.evaluation.metrics import compute_dice
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.session.segmenter import SessionSegmenter
from napari_medsam_eval.protocols.prompt_log import (append_row, default_log_path, logging_off, make_row, shown_path, slice_dice,
                                    whole_mask)
from napari_medsam_eval._widgets.common import _layers
from napari_medsam_eval._widgets.common._status_text import wrap_status
from napari_medsam_eval._widgets.segment._ground_truth import GroundTruthSection
from napari_medsam_eval._widgets.segment._propagation_options import PropagationSection
from napari_medsam_eval._widgets.common._words import TIPS
from napari_medsam_eval._widgets.common._worker import WorkerRunner

if TYPE_CHECKING:
    import napari

    from napari_medsam_eval.session.session import Session


class PromptLogger(Container):
    """The prompt-log controls of one Segment widget's session and the logging itself.

    ``truth``: the ground truth and protocol the drawn prompts are compared with; ``propagation``: the
    options a propagated prompt ran with; ``action``: the name of the action whose result comes next.
    """

    def __init__(self, session: "Session", viewer: "napari.viewer.Viewer", truth: GroundTruthSection,
                 propagation: PropagationSection, action: Callable[[], str]) -> None:
        self.session, self.viewer, self.truth, self.propagation, self.action = (session, viewer, truth,
                                                                               propagation, action)
        self.log_drawn = CheckBox(text="log drawn prompts", value=not logging_off(),
                                tooltip="with ground truth open: log each drawn prompt beside the protocol's")
        self.path = FileEdit(label="log file", mode="w", filter="*.csv", nullable=True, value=None,
                             tooltip=TIPS["log file"].format(default=html.escape(str(default_log_path() or "none: choose a file"))))
        self.summary = Label(label="drawn vs protocol", value="")
        wrap_status(self.summary)  # a long line wraps instead of widening the dock
        self.summary.value = self.where()
        self.log_drawn.changed.connect(self._show_where)
        self.path.changed.connect(self._show_where)
        super().__init__(widgets=[self.log_drawn, self.path, self.summary], labels=True, name="prompt_log",
                         tooltip=TIPS["prompt log"])
        self.summary.tooltip = TIPS["drawn vs protocol"]  # the row's name; hovering the line shows it whole
        self.last_row: dict[str, Any] | None = None
        self.rows_written = 0
        #: the rows being computed, each in a worker of its own (they may overlap)
        self.runner = WorkerRunner(self.summary)
        session.slice_ready.connect(self._on_slice)
        session.result_ready.connect(self._on_result)

    @property
    def log_path(self) -> Path | None:
        value = self.path.value
        return Path(value) if value not in (None, "") and str(value) not in ("", ".") else default_log_path()

    def where(self) -> str:
        """What the log does now, in words: off, or the file each drawn prompt's row goes to (with what it holds)."""
        if not self.log_drawn.value:
            return "off: drawn prompts are not logged (tick 'log drawn prompts' to log them)"
        if self.log_path is None:
            return "on, but no file: choose a log file (nothing is logged or computed until one is chosen)"
        return (f"on: each drawn prompt, with its case id and image path, is added to {shown_path(self.log_path)} "
                "(untick 'log drawn prompts' to stop)")

    def _show_where(self, _value: Any = None) -> None:
        if not self.pending:
            self.summary.value = self.where()

    @property
    def pending(self) -> int:
        """Rows still being computed."""
        return self.runner.running

    def _on_slice(self, prompt: Prompt, mask: np.ndarray) -> None:
        self.log(prompt, mask, "slice")

    def _on_result(self, result: Any) -> None:
        if not result.cancelled:
            self.log(result.prompt, result.mask, "correct" if self.action() == "correct" else "propagate")

    def log(self, prompt: Prompt, mask: np.ndarray, operation: str) -> Any:
        """Log a drawn prompt's result (a worker computes the protocol's side); None when not logged."""
        session, viewer, truth_layer = self.session, self.viewer, self.truth.gt_layer.value
        if not self.log_drawn.value or self.log_path is None or truth_layer is None or prompt.protocol != "manual":
            return None
        name = session.image_name
        image = viewer.layers[name] if name in viewer.layers else None
        try:
            truth = _layers.label_map_for(image, truth_layer) == int(prompt.target_label)
        except (ValueError, TypeError):
            return None
        if not truth.any():
            return None
        kind, index = session.kind, prompt.slice_index
        mine = whole_mask(mask, truth.shape, kind, index)
        options = ({} if operation == "slice" else
                   self.propagation.session_options(kind, truth.shape[0], index) if kind != "image" else {})
        protocol = self.truth.protocol.value
        theirs = self._protocol_prompt(truth, prompt, protocol)
        context = {"case_id": str(image.metadata.get("case_id") or image.name), "kind": kind,
                   "image_path": str(getattr(image.source, "path", None) or ""), "model": session.model_name,
                   "spacing_yx": tuple(float(v) for v in image.scale[-2:])}
        return self._start(SessionSegmenter.of(session), prompt, theirs, mine, truth, operation, options, protocol, context)

    def _protocol_prompt(self, truth: np.ndarray, prompt: Prompt, protocol: str) -> Prompt | None:
        options = self.truth.protocol_options(protocol)
        try:
            made = self.session.prompts_from_ground_truth(truth.astype(np.uint8) * int(prompt.target_label),
                                                            int(prompt.target_label), protocol,
                                                            slice_index=prompt.slice_index, **options)
        except (ValueError, TypeError):
            return None
        return next((p for p in made if not p.is_empty and not p.info.get("empty")), None)

    def _start(self, segmenter: SessionSegmenter, drawn: Prompt, theirs: Prompt | None, mine: np.ndarray, truth: np.ndarray,
               operation: str, options: dict[str, Any], protocol: str, context: dict[str, Any]) -> Any:
        path = self.log_path

        def work() -> dict[str, Any]:
            index, kind = drawn.slice_index, segmenter.kind
            their_mask = None
            if theirs is not None and operation != "correct":
                their_mask = segmenter.mask(theirs, operation, options)
            nan = math.nan
            row = make_row(drawn=drawn, operation=operation, protocol=protocol, protocol_prompt=theirs,
                           drawn_dsc=compute_dice(mine, truth), drawn_dsc_slice=slice_dice(mine, truth, kind, index),
                           protocol_dsc=nan if their_mask is None else compute_dice(their_mask, truth),
                           protocol_dsc_slice=nan if their_mask is None else slice_dice(their_mask, truth, kind, index),
                           options=options, **context)
            append_row(path, row)
            return row

        return self.runner.start(work, text=self.summary.value, returned=self._written, error_prefix="not logged: ")

    def _written(self, row: dict[str, Any]) -> None:
        self.last_row, self.rows_written = row, self.rows_written + 1
        self.summary.value = f"{describe_row(row)}; logged in {shown_path(self.log_path)}"


def describe_row(row: dict[str, Any]) -> str:
    """``slice 7, label 1: box IoU 0.62, centre offset 3.1 px (2.4 mm); DSC drawn 0.811 vs medsam2 0.874``."""
    def num(key: str, digits: int) -> str:
        value = float(row[key])
        return "n/a" if not math.isfinite(value) else f"{value:.{digits}f}"
    where = "" if row["slice_index"] == "" else f"slice {row['slice_index']}, "
    return (f"{where}label {row['target_label']} ({row['operation']}): box IoU {num('box_iou', 2)}, centre offset "
            f"{num('centre_offset_px', 1)} px ({num('centre_offset_mm', 1)} mm); DSC drawn {num('drawn_dsc', 3)} "
            f"vs {row['protocol']} {num('protocol_dsc', 3)}")


__all__ = ["PromptLogger", "describe_row"]
