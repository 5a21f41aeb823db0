"""The Benchmark widget's "Two runs" section: run A and run B over one dataset, side by side.

Choose two run folders and press *Compare runs*: both are read and paired in
a worker (:func:`napari_medsam_eval.report.run_pairs.open_run_pair`: the statistics
are those of ``medsam-eval compare A B``), then :class:`._two_runs_view.TwoRunsView`
shows the per-task statistics, the per-case DSC A / B / B-A, the rows that do
not pair and a scatter of A against B. Double-clicking a case reads it with
both saved predictions in a worker (:func:`~napari_medsam_eval.report.run_pairs.load_case_pair`)
and opens image, ground truth, prediction A, prediction B and the A-only /
B-only / both overlay (:data:`~napari_medsam_eval._layer_style.AB_COLORS`, drawn under the two
predictions' contours; its name says its colours) as the Benchmark widget opens a row
(:mod:`._open_row`: one layer per turn of the event loop, the last row's layers reused), then brings it
into view (:mod:`._view`) on the slice where A and B differ most, on the target's slices first. A
prediction that is missing is said (a warning naming the file); the case still opens with what there is.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generator

from qtpy.QtWidgets import QSizePolicy
from magicgui.widgets import Container, FileEdit, Label, PushButton
from napari.layers import Labels
from napari.utils.notifications import show_warning

from napari_medsam_eval._layer_style import AB_COLORS, style_prediction
from napari_medsam_eval._widgets.common._outlined_labels import OutlinedLabels
from napari_medsam_eval.core.palette import color_name
from napari_medsam_eval.report.stats import row_stops
from napari_medsam_eval.evaluation.mask_comparison import AB_NAMES
from napari_medsam_eval.report.run_pairs import CasePair, PairKey, RunPair, load_case_pair, open_run_pair
from napari_medsam_eval._widgets.benchmark import _open_row
from napari_medsam_eval._widgets.common._status_text import wrap_status
from napari_medsam_eval._widgets.common._layers import transform_kwargs
from napari_medsam_eval._widgets.common._theme import theme_colors
from napari_medsam_eval._widgets.benchmark._two_runs_view import TwoRunsView
from napari_medsam_eval._widgets.common._worker import WorkerRunner
from napari_medsam_eval._widgets.compare._result_layers import swatch
from napari_medsam_eval._widgets.common._canvas import compose
from napari_medsam_eval._widgets.common._viewer import real_viewer

if TYPE_CHECKING:
    import napari

#: opacity of the A/B overlay layer
AB_OPACITY = 0.6


def pair_steps(pair: CasePair) -> list[_open_row.OpenStep]:
    """The layers of a case pair, off the GUI thread: the case as run A's row opens (image, ground
    truth, prediction A, A's prompt), prediction B and the A/B overlay; the overlay is added right after
    the ground truth, so both predictions' contours are drawn over it."""
    # no "why" layer: its fills lay over the A/B overlay and washed the slice where A and B differ most
    steps = [step for step in _open_row.open_steps(pair.run_case()) if step.role != "error_parts"]
    image = steps[0].layer
    case_id = pair.case.case_id
    for step in steps:
        if step.role == "prediction":
            step.layer.name = f"{case_id} prediction A ({(pair.row_a or {}).get('model')})"
    if pair.prediction_b is not None:
        row = pair.row_b or {}
        metadata = {"role": "prediction", "image": image.name, "model": row.get("model"),
                    "protocol": row.get("protocol"), "stops": row_stops(row), _open_row.OPENED_KEY: "prediction_b"}
        metadata.update(_open_row.row_object(row))
        steps.append(_open_row.OpenStep("prediction_b", style_prediction(OutlinedLabels(
            pair.prediction_b, name=f"{case_id} prediction B ({row.get('model')})", metadata=metadata,
            **transform_kwargs(image)))))
    if pair.overlay is not None:
        legend = ab_legend()
        metadata = {"role": "ab_overlay", "legend": legend, "slice": pair.slice_index,
                    "target_label": (pair.target_labels or (None,))[0], _open_row.OPENED_KEY: "ab_overlay"}
        after = 1 + max((i for i, step in enumerate(steps) if step.role in ("image", "ground_truth")), default=0)
        steps.insert(after, _open_row.OpenStep("ab_overlay", Labels(
            pair.overlay, name=f"{case_id} A vs B ({legend})", colormap=AB_COLORS, opacity=AB_OPACITY,
            metadata=metadata, **transform_kwargs(image))))
    return steps


def ab_legend() -> str:
    """The A/B overlay's colours in words ("A only vermillion, B only bluish green, both sky blue")."""
    return ", ".join(f"{name} {color_name(AB_COLORS[value])}" for value, name in AB_NAMES.items())


def ab_swatches() -> str:
    """The A/B overlay's legend as the dock shows it: each name on a chip of its colour (rich text)."""
    return "&nbsp;".join(swatch(name, AB_COLORS[value]) for value, name in AB_NAMES.items())


def open_pair_job(run_a: Path, run_b: Path, row_a: dict | None, row_b: dict | None, ack: threading.Event,
                  timeout: float = _open_row.ACK_TIMEOUT_S) -> Generator[Any, None, CasePair]:
    """Generator for a napari worker: read the case pair and build its layers here, then yield them
    one at a time and last the pair, each once the GUI has set ``ack`` (as :func:`._open_row.open_job`)."""
    pair = load_case_pair(run_a, run_b, row_a, row_b)
    return (yield from _open_row.paced_items(pair_steps(pair), pair, ack, timeout))


def _path(widget: FileEdit) -> Path | None:
    value = widget.value
    return None if value is None or str(value) in ("", ".") else Path(value).expanduser()


class TwoRunsWidget(Container):
    """Two run folders side by side: paired statistics, per-case table, unpaired rows, scatter, and a
    case opened with both predictions and the A/B overlay."""

    def __init__(self, napari_viewer: "napari.viewer.Viewer") -> None:
        super().__init__(labels=True)
        self.viewer = napari_viewer = real_viewer(napari_viewer)  # not napari's proxy (._viewer)
        #: the runs shown (a :class:`RunPair`), the last case pair opened and its layers by role
        self.pair: RunPair | None = None
        self.case_pair: CasePair | None = None
        self.opened: dict[str, Any] = {}
        self.run_a = FileEdit(label="run A", mode="d", nullable=True, value=None,
                              tooltip="the baseline run folder (A), made with 'save predictions' to open cases")
        self.run_b = FileEdit(label="run B", mode="d", nullable=True, value=None,
                              tooltip="the run folder compared with it (B), over the same dataset; model, protocol "
                                      "and stop rule may differ")
        self.compare_button = PushButton(text="Compare runs", tooltip="pair the cases of A and B (B - A), as "
                                                                      "'medsam-eval compare A B' does")
        self.status = Label(label="A vs B", value="choose run A and run B (two runs over one dataset)")
        wrap_status(self.status)
        # the height its width needs: the least height of its text at its least width (200 pixels) made the tab scroll
        self.status.native.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        #: the A/B overlay's colours, shown once a case is opened (its layer's name is cut short in the list)
        self.legend = Label(label="overlay", value=ab_swatches(), visible=False,
                            tooltip="the opened case's A/B layer: " + ab_legend())
        self.extend([self.run_a, self.run_b, self.compare_button, self.status, self.legend])
        self.view = TwoRunsView(on_open=self.open_case, colors=theme_colors(napari_viewer))
        self.native.layout().addWidget(self.view, 1)
        # its tab's spare height goes to the pairs table (not to a stretch below it)
        self.native.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Expanding)
        self.loader = WorkerRunner(self.status, [self.run_a, self.run_b, self.compare_button])
        self.opener = WorkerRunner(self.status)
        self.compare_button.changed.connect(lambda: self.compare())

    def end_jobs(self) -> None:
        """The dock is going away: end the pairing and the case opening."""
        for runner in (self.loader, self.opener):
            runner.close()

    def compare(self, run_a: str | Path | None = None, run_b: str | Path | None = None) -> Any:
        """Read and pair run A and run B (the folders chosen, or these) in a worker; returns it."""
        if run_a is not None:
            self.run_a.value = run_a
        if run_b is not None:
            self.run_b.value = run_b
        a, b = _path(self.run_a), _path(self.run_b)
        if a is None or b is None:
            return self.loader.error("choose two run folders: run A and run B")
        if self.loader.busy:
            return None
        return self.loader.start(open_run_pair, a, b, text=f"reading and pairing {a.name} and {b.name} ...",
                                 returned=self._show_pair, error_prefix="cannot compare the runs: ")

    def _show_pair(self, pair: RunPair) -> None:
        self.pair = pair
        self.view.show_pair(pair)
        overall = pair.comparison.iloc[-1]
        self.status.value = (f"{int(overall['n_paired'])} pairs, {len(pair.unpaired)} rows that do not pair; "
                             f"median B - A {overall['median_diff']:+.3f}")

    def open_case(self, key: PairKey) -> Any:
        """Open the case of pair ``key`` with both predictions and the A/B overlay; returns the worker."""
        if self.pair is None or self.opener.busy:
            return None
        row_a, row_b = self.pair.rows(key)
        ack, shown = threading.Event(), {}

        return self.opener.start(open_pair_job, self.pair.run_a.path, self.pair.run_b.path, row_a, row_b, ack,
                                 text=f"opening {key[0]} from A and B ...",
                                 yielded=_open_row.paced(self.native, ack, self.viewer, shown,
                                                         lambda opened: self._show_case(opened, shown)),
                                 error_prefix="cannot open the case: ")

    def _show_case(self, pair: CasePair, shown: dict[str, Any]) -> None:
        self.case_pair = pair
        # in view where A and B differ most (the target's slices first); without both predictions, the prompt's
        self.opened = _open_row.finish_open(self.viewer, pair.run_case(), shown, pair.slice_index)
        if "ab_overlay" in self.opened and "image" in self.opened:  # the pair's own view: A vs B, named on the canvas
            compose(self.viewer, "A vs B", self.opened["image"], {"ab_overlay": self.opened["ab_overlay"]})
        where = "" if pair.slice_index is None else f", slice {pair.slice_index} (where A and B differ most)"
        self.status.value = f"opened {pair.case.case_id}{where}" + "".join(f"; {n}" for n in pair.notes)
        self.legend.visible = "ab_overlay" in self.opened
        if pair.notes:
            show_warning(f"{pair.case.case_id}: " + "; ".join(pair.notes))


__all__ = ["TwoRunsWidget", "ab_legend", "ab_swatches", "open_pair_job", "pair_steps"]
