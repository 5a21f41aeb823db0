"""The Benchmark widget's run controls, with their tooltips: dataset, model, protocol, ... Run / Cancel / Resume.

:func:`add_run_controls` makes them as attributes of the widget (``widget.dataset``,
``widget.run_button``, ...), so the widget module keeps to what they do.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

from magicgui.widgets import (CheckBox, ComboBox, Container, FileEdit, Label, LineEdit, ProgressBar, PushButton, SpinBox,
                              Widget)

from ..cli.common import PRECISION_CHOICES
from ..datasets import available_layouts
from ..models import BACKENDS, DEFAULT_BACKEND
from ..propagation.rules import RULE_PRESETS
from ..protocols import GROUND_TRUTH_PROTOCOLS
from ._dock_layout import button_row, wrap_status

AUTO_LAYOUT = "auto-detect"
#: the propagation choice that leaves the rules to the data (volumes and videos have their own)
DATA_DEFAULT = "data's default"
#: models offered, in this order; the first four are promptable models, the last two baselines
MODEL_CHOICES = [name for name in ("litemedsam", "medsam2", "sam2", "sam", "box", "oracle") if name in BACKENDS]


def add_run_controls(widget: Any) -> tuple[list[Widget], Container]:
    """Make the run controls as attributes of ``widget``; returns the inputs (disabled while a run
    goes) and the row of buttons. ``widget.progress`` and ``widget.status`` are made too."""
    tip = {
        "dataset": "the dataset folder (MSD/nnU-Net, MedSAM npz, video or 2D image folders)",
        "layout": "how the dataset folder is laid out; auto-detect reads its files",
        "model": "the model to evaluate; box and oracle are baselines (the prompt box itself, the ground truth)",
        "checkpoint": "the model's weights file (models without shipped weights)",
        "protocol": "how prompts are made from the ground truth (medsam2: a box on the target's middle slice, "
                    "propagated both ways)",
        "limit": "run only the first N cases of the dataset (0: every case)",
        "workers": "processes (or Ray actors) segmenting cases at once; with one local worker, the progress bar "
                   "moves per slice",
        "executor": "where the workers run: local processes of this machine, or Ray actors (a local Ray, or a "
                    "Ray cluster; needs pip install 'napari-medsam-eval[ray]')",
        "ray_address": "a running Ray cluster to join (HOST:PORT as 'ray start --head' prints, or auto); empty: "
                       "a local Ray started for the run. The workers read the cases by path: a shared filesystem",
        "save": "write each case's predicted label map into the run folder, so that a row opens with its prediction",
        "output": "the run folder: new or empty for Run, an earlier run's to Resume it or to browse its rows",
        "run": "start the run the settings describe",
        "cancel": "stop the run within a slice; the rows of finished cases are kept, Resume redoes the case "
                  "that was running",
        "resume": "finish the run in the output folder: only the cases it does not hold yet are run",
        "progress": "cases done, moving with the slices of the case running",
        "propagation": "the propagation rules: the data's measured default (volumes and videos apart) or a preset "
                       "(medsam-eval run --propagation)",
        "margin": "pixels added around a slice's mask for the next slice's box (-1: the rules' own margin)",
        "protocol_options": "the protocol's options as JSON, e.g. {\"margin\": 10} for a box 10 px wider "
                            "(medsam-eval run --protocol-options); empty: its defaults",
        "seed": "the seed of the protocol's random choices (jittered boxes, sampled points)",
        "precision": "LiteMedSAM's image encoder precision: fp32 (exact), bf16 or int8 (faster; masks move: "
                     "README 'Precision'); the rows' precision column records it",
    }
    widget.dataset = FileEdit(label="dataset", mode="d", nullable=True, value=None, tooltip=tip["dataset"])
    widget.layout_choice = ComboBox(label="layout", choices=[AUTO_LAYOUT, *available_layouts()], value=AUTO_LAYOUT,
                                    tooltip=tip["layout"])
    widget.model = ComboBox(label="model", choices=MODEL_CHOICES, value=DEFAULT_BACKEND, tooltip=tip["model"])
    widget.checkpoint = FileEdit(label="checkpoint", mode="r", nullable=True, value=None, visible=False,
                                 tooltip=tip["checkpoint"])
    widget.precision = ComboBox(label="precision", choices=list(PRECISION_CHOICES), value="fp32",
                                tooltip=tip["precision"])
    widget.protocol = ComboBox(label="protocol", choices=list(GROUND_TRUTH_PROTOCOLS), value="medsam2", tooltip=tip["protocol"])
    widget.protocol_options = LineEdit(label="protocol options", value="", tooltip=tip["protocol_options"])
    widget.propagation = ComboBox(label="propagation", choices=[DATA_DEFAULT, *RULE_PRESETS], value=DATA_DEFAULT,
                                  tooltip=tip["propagation"])
    widget.propagation_margin = SpinBox(label="propagation margin (px)", min=-1, max=200, value=-1,
                                        tooltip=tip["margin"])
    widget.seed = SpinBox(label="seed", min=0, max=2**31 - 1, value=0, tooltip=tip["seed"])
    widget.limit = SpinBox(label="limit (0 = all)", min=0, max=1_000_000, value=0, tooltip=tip["limit"])
    widget.workers = SpinBox(label="workers", min=1, max=max(1, os.cpu_count() or 1), value=1,
                             tooltip=tip["workers"])
    widget.executor = ComboBox(label="executor", choices=["local", "ray"], value="local", tooltip=tip["executor"])
    widget.ray_address = LineEdit(label="Ray address", value="", visible=False, tooltip=tip["ray_address"])
    widget.executor.changed.connect(lambda value: _on_executor(widget, value))
    widget.save_predictions = CheckBox(text="save predictions (to open cases)", value=True, tooltip=tip["save"])
    widget.out_dir = FileEdit(label="output", mode="d", nullable=True, value=None, tooltip=tip["output"])
    widget.run_button = PushButton(text="Run", tooltip=tip["run"])
    widget.cancel_button = PushButton(text="Cancel", enabled=False, tooltip=tip["cancel"])
    widget.resume_button = PushButton(text="Resume", tooltip=tip["resume"])
    buttons = button_row(widget.run_button, widget.cancel_button, widget.resume_button)
    widget.progress = ProgressBar(label="progress", min=0, max=1, value=0, tooltip=tip["progress"])
    widget.status = Label(label="status", value="choose a dataset folder and an output folder")
    wrap_status(widget.status)
    inputs = [widget.dataset, widget.layout_choice, widget.model, widget.checkpoint, widget.precision, widget.protocol,
              widget.protocol_options, widget.propagation, widget.propagation_margin, widget.seed, widget.limit, widget.workers, widget.executor, widget.ray_address, widget.save_predictions,
              widget.out_dir]
    return inputs, buttons


def propagation_choice(preset: str, margin: int) -> str | dict[str, Any] | None:
    """``run_benchmark``'s ``propagation`` of the widget's choices: None (the data's default), a preset's
    name, or rule options (a margin on top of the chosen preset)."""
    name = None if preset == DATA_DEFAULT else preset
    if margin < 0:
        return name
    base = {} if name is None else dataclasses.asdict(RULE_PRESETS[name])
    return {**base, "margin": int(margin)}


def _on_executor(widget: Any, executor: str) -> None:
    """Ray: the address field shows, and workers may outnumber this machine's cores (a cluster's)."""
    widget.ray_address.visible = executor == "ray"
    widget.workers.max = 1024 if executor == "ray" else max(1, os.cpu_count() or 1)


__all__ = ["AUTO_LAYOUT", "DATA_DEFAULT", "MODEL_CHOICES", "add_run_controls", "propagation_choice"]
