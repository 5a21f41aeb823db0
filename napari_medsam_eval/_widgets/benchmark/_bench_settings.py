"""The Benchmark widget's run settings section: dataset, model, checkpoint, precision, protocol, ... output.

:class:`RunSettings` holds the inputs (each with its tooltip), keeps the
checkpoint and Ray address shown only where they apply, and turns them into
the run's :class:`~napari_medsam_eval.benchmark.config.RunConfig`
(:meth:`RunSettings.request`). It runs nothing: the widget's run
(:mod:`._bench_run`) asks it for the request and locks its inputs while a
run goes.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from magicgui.widgets import CheckBox, ComboBox, Container, FileEdit, Label, LineEdit, SpinBox, Widget

from napari_medsam_eval.benchmark.config import RunConfig
from napari_medsam_eval.benchmark.gui_job import NEEDS_CHECKPOINT, checked_request
from napari_medsam_eval.benchmark.prediction_files import PREDICTION_FORMATS
from napari_medsam_eval.cli.common import PRECISION_CHOICES
from napari_medsam_eval.core.options import json_object
from napari_medsam_eval.datasets import available_layouts
from napari_medsam_eval.models import BACKENDS, DEFAULT_BACKEND
from napari_medsam_eval.propagation.rules import RULE_PRESETS
from napari_medsam_eval.protocols import GROUND_TRUTH_PROTOCOLS
from napari_medsam_eval._widgets.common._words import TIPS as WORDS

AUTO_LAYOUT = "auto-detect"
#: the propagation choice that leaves the rules to the data (volumes and videos have their own)
DATA_DEFAULT = "data's default"
#: models offered, in this order; the first four are promptable models, the last two baselines
MODEL_CHOICES = [name for name in ("litemedsam", "medsam2", "sam2", "sam", "box", "oracle") if name in BACKENDS]
#: the settings' names, top to bottom (the Benchmark widget shows each as its own attribute too)
SETTINGS = ("dataset", "layout_choice", "model", "checkpoint", "precision", "protocol", "protocol_options",
            "targets", "propagation", "propagation_margin", "seed", "limit", "workers", "executor", "ray_address",
            "save_predictions", "prediction_format", "out_dir")

#: the tooltips of the run settings (the terms of the field in plain words: :mod:`._words`)
TIPS = {
    "dataset": "the dataset folder (MSD/nnU-Net, MedSAM npz, video or 2D image folders)",
    "layout": WORDS["layout"],
    "model": "the model to evaluate; box and oracle are yardsticks, not models: box fills the prompt's box "
             "(what a model must beat), oracle answers each slice with its ground truth (the best score "
             "propagation can reach)",
    "checkpoint": WORDS["checkpoint"],
    "protocol": WORDS["bench protocol"],
    "limit": "run only the first N cases of the dataset (0: every case)",
    "workers": WORDS["workers"],
    "executor": WORDS["executor"],
    "ray_address": WORDS["ray address"],
    "save": "write each case's predicted label map into the run folder, so that a row opens with its prediction",
    "format": "how each prediction is written: NIfTI (or npz / png beside such a source), or a DICOM SEG on the "
              "case's own DICOM series (cases read from DICOM only), each target a named segment",
    "output": "the run folder: new or empty for Run, an earlier run's to Resume it or to browse its rows",
    "propagation": WORDS["propagation rules"],
    "margin": WORDS["propagation margin"],
    "protocol_options": WORDS["protocol options"],
    "seed": WORDS["seed"],
    "targets": WORDS["targets"],
    "precision": WORDS["bench precision"],
}


def path_of(widget: FileEdit) -> Path | None:
    """The path a file field holds (None when empty)."""
    value = widget.value
    if value is None or str(value) in ("", "."):
        return None
    return Path(value).expanduser()


def propagation_choice(preset: str, margin: int) -> str | dict[str, Any] | None:
    """``run_benchmark``'s ``propagation`` of the widget's choices: None (the data's default), a preset's
    name, or rule options (a margin on top of the chosen preset)."""
    name = None if preset == DATA_DEFAULT else preset
    if margin < 0:
        return name
    base = {} if name is None else dataclasses.asdict(RULE_PRESETS[name])
    return {**base, "margin": int(margin)}


def targets_choice(text: str) -> list[str] | None:
    """``run``'s ``targets`` of the widget's field: its targets separated by spaces or ``;`` (None: empty)."""
    parts = [part for part in str(text or "").replace(";", " ").split() if part]
    return parts or None


def _local_cores() -> int:
    return max(1, os.cpu_count() or 1)


class RunSettings(Container):
    """The inputs of a benchmark run, top to bottom; :attr:`inputs` lists them (locked while a run goes)."""

    def __init__(self) -> None:
        super().__init__(labels=True)
        self.margins = (0, 0, 0, 0)  # a section of the dock: the dock's own margins suffice
        self.dataset = FileEdit(label="dataset", mode="d", nullable=True, value=None, tooltip=TIPS["dataset"])
        self.layout_choice = ComboBox(label="layout", choices=[AUTO_LAYOUT, *available_layouts()],
                                      value=AUTO_LAYOUT, tooltip=TIPS["layout"])
        self.model = ComboBox(label="model", choices=MODEL_CHOICES, value=DEFAULT_BACKEND, tooltip=TIPS["model"])
        self.checkpoint = FileEdit(label="checkpoint", mode="r", nullable=True, value=None, visible=False,
                                   tooltip=TIPS["checkpoint"])
        self.precision = ComboBox(label="precision", choices=list(PRECISION_CHOICES), value="fp32",
                                  tooltip=TIPS["precision"])
        self.protocol = ComboBox(label="protocol", choices=list(GROUND_TRUTH_PROTOCOLS), value="medsam2",
                                 tooltip=TIPS["protocol"])
        self.protocol_options = LineEdit(label="protocol options", value="", tooltip=TIPS["protocol_options"])
        self.targets = LineEdit(label="targets", value="", tooltip=TIPS["targets"])
        self.targets.native.setPlaceholderText("the dataset's; or e.g. liver=1,3 lesion=3:lesions")
        self.propagation = ComboBox(label="propagation", choices=[DATA_DEFAULT, *RULE_PRESETS], value=DATA_DEFAULT,
                                    tooltip=TIPS["propagation"])
        self.propagation_margin = SpinBox(label="propagation margin (px)", min=-1, max=200, value=-1,
                                          tooltip=TIPS["margin"])
        self.seed = SpinBox(label="seed", min=0, max=2**31 - 1, value=0, tooltip=TIPS["seed"])
        self.limit = SpinBox(label="limit (0 = all)", min=0, max=1_000_000, value=0, tooltip=TIPS["limit"])
        self.workers = SpinBox(label="workers", min=1, max=_local_cores(), value=1, tooltip=TIPS["workers"])
        self.executor = ComboBox(label="executor", choices=["local", "ray"], value="local", tooltip=TIPS["executor"])
        self.ray_address = LineEdit(label="Ray address", value="", visible=False, tooltip=TIPS["ray_address"])
        self.save_predictions = CheckBox(text="save predictions (to open cases)", value=True, tooltip=TIPS["save"])
        self.prediction_format = ComboBox(label="as", choices=list(PREDICTION_FORMATS), value="nifti",
                                          tooltip=TIPS["format"])
        self.out_dir = FileEdit(label="output", mode="d", nullable=True, value=None, tooltip=TIPS["output"])
        self.inputs: list[Widget] = [getattr(self, name) for name in SETTINGS]
        self.prediction_format.native.setAccessibleName("save predictions as")
        saving = Container(widgets=[self.save_predictions, Label(value="as", tooltip=TIPS["format"]),
                                    self.prediction_format], layout="horizontal", labels=False, label="")
        # one row: the tick and its format
        saving.margins = (0, 0, 0, 0)
        self.extend([getattr(self, name) for name in SETTINGS if name not in ("save_predictions", "prediction_format",
                                                                             "out_dir")] + [saving, self.out_dir])
        self.model.changed.connect(lambda value: setattr(self.checkpoint, "visible", value in NEEDS_CHECKPOINT))
        self.executor.changed.connect(self._on_executor)

    def _on_executor(self, executor: str) -> None:
        """Ray: the address field shows, and workers may outnumber this machine's cores (a cluster's)."""
        self.ray_address.visible = executor == "ray"
        self.workers.max = 1024 if executor == "ray" else _local_cores()

    def request(self, resume: bool = False) -> RunConfig:
        """The run the settings describe; ValueError naming what is missing or wrong."""
        layout = None if self.layout_choice.value == AUTO_LAYOUT else self.layout_choice.value
        return checked_request(path_of(self.dataset), path_of(self.out_dir), self.model.value, self.protocol.value,
                               checkpoint=path_of(self.checkpoint), resume=resume, layout=layout,
                               precision=self.precision.value if self.model.value == "litemedsam" else "fp32",
                               limit=int(self.limit.value) or None, workers=int(self.workers.value),
                               save_predictions=bool(self.save_predictions.value),
                               prediction_format=self.prediction_format.value,
                               protocol_options=json_object(self.protocol_options.value, "protocol options"),
                               propagation=propagation_choice(self.propagation.value,
                                                              int(self.propagation_margin.value)),
                               seed=int(self.seed.value), executor=self.executor.value,
                               ray_address=self.ray_address.value, targets=targets_choice(self.targets.value))


__all__ = ["AUTO_LAYOUT", "DATA_DEFAULT", "MODEL_CHOICES", "SETTINGS", "RunSettings", "path_of", "propagation_choice"]
