"""The Segment widget's controls, built once with their tooltips (the widget wires them up).

Grouped as the widget shows them: the model, the image and its prompt layers
(with the next point's polarity), the object (target label with previous /
next, undo, changes), the ground-truth prompt controls (foldable), the
propagation options, the run buttons with their shortcuts, progress and status.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from magicgui.widgets import CheckBox, ComboBox, FileEdit, Label, ProgressBar, PushButton, SpinBox
from napari.layers import Image, Labels, Points, Shapes

from ..cli.common import PRECISION_CHOICES
from ..models import BACKENDS, DEFAULT_BACKEND
from ..models.device import DEVICE_CHOICES as DEVICES
from ..protocols import GROUND_TRUTH_PROTOCOLS
from . import _layers
from ._anchors import correction_controls
from ._dock_layout import wrap_status
from ._drawing import polarity_control
from ._encode_ahead import encode_ahead_controls
from ._objects import ObjectControls
from ._propagation_options import propagation_controls
from ._shortcuts import with_shortcut

if TYPE_CHECKING:
    import napari

    from .segment import SegmentWidget

#: models offered (those that segment from prompts alone)
MODEL_CHOICES = [name for name in ("litemedsam", "medsam2", "sam2", "sam") if name in BACKENDS]
DEVICE_CHOICES = [name for name in DEVICES if ":" not in name]  # the device option's, but "cuda:N"
PROMPT_SLICE_CHOICES = ["key slice", "current slice"]


def build_controls(widget: "SegmentWidget", viewer: "napari.viewer.Viewer") -> None:
    """Create ``widget``'s controls as its attributes (not yet added to it)."""
    choices = _layers.layer_choices
    widget.model = ComboBox(label="model", choices=MODEL_CHOICES, value=DEFAULT_BACKEND,
                            tooltip="LiteMedSAM runs on the CPU with its shipped weights; the others need a file")
    widget.checkpoint = FileEdit(label="checkpoint", mode="r", nullable=True, value=None,
                                 tooltip="empty: LiteMedSAM's shipped weights; MedSAM2/SAM2/SAM need a file")
    widget.device = ComboBox(label="device", choices=DEVICE_CHOICES, value="auto", tooltip="where the model runs")
    widget.precision = ComboBox(label="precision", choices=list(PRECISION_CHOICES), value="fp32",
                                tooltip="LiteMedSAM's image encoder: fp32 (exact), bf16 or int8 (faster, masks move; "
                                        "README 'Precision'); the status line names the precision of each mask")
    widget.load_button = PushButton(text="Load model", tooltip="build the model now (else on first use)")
    widget.image_layer = ComboBox(label="image", choices=choices(viewer, Image), tooltip="the image to segment")
    widget.box_layer = ComboBox(label="boxes", nullable=True, choices=choices(viewer, Shapes),
                                tooltip="the Shapes layer with box prompts (the one you draw in is picked)")
    widget.point_layer = ComboBox(label="points", nullable=True, choices=choices(viewer, Points),
                                  tooltip="the Points layer with point prompts (the one you draw in is picked)")
    widget.encode_box = encode_ahead_controls()
    widget.polarity = polarity_control()
    widget.new_prompt_layers_button = PushButton(text="New prompt layers", tooltip="a box and a point layer")
    widget.target_label = SpinBox(label="object (label)", min=1, max=65535, value=1,
                                  tooltip="the label value the object gets in the prediction layer")
    widget.objects = ObjectControls(widget)
    widget.use_gt = CheckBox(text="prompts from ground truth", value=True,
                             tooltip="show or fold the ground-truth controls")
    widget.gt_layer = ComboBox(label="ground truth", nullable=True, tooltip="the Labels layer of the truth",
                               choices=choices(viewer, Labels, ("prediction", "overlay", "changes")))
    widget.protocol = ComboBox(label="protocol", choices=list(GROUND_TRUTH_PROTOCOLS), value="medsam2",
                               tooltip="how a prompt is made from the ground truth (docs: Protocols and metrics)")
    widget.prompt_slice = ComboBox(label="on", choices=PROMPT_SLICE_CHOICES, value="key slice",
                                   tooltip="the protocol's key slice, or the slice on screen")
    widget.mode = SpinBox(label="mazurowski mode", min=1, max=5, value=1, visible=False,
                          tooltip="the prompt mode of Mazurowski et al. 2023")
    widget.gt_prompt_button = PushButton(text="Prompt from ground truth", tooltip="draw the protocol's prompt")
    widget.propagation_box = propagation_controls(widget.session.margin)
    widget.margin = widget.propagation_box.margin
    widget.segment_button = PushButton(text="Segment slice", tooltip=with_shortcut(
        "segment the slice on screen from its prompt", "segment_slice"))
    widget.propagate_button = PushButton(text="Propagate", tooltip=with_shortcut(
        "segment the whole volume / video from the prompt", "propagate"))
    widget.correct_button, widget.anchor_list = correction_controls(widget)
    widget.correct_button.tooltip = with_shortcut(widget.correct_button.tooltip, "correct_slice")
    widget.cancel_button = PushButton(text="Cancel", enabled=False, tooltip=with_shortcut(
        "stop the running job after its current slice", "cancel"))
    widget.progress = ProgressBar(label="progress", value=0, min=0, max=1)
    widget.status = Label(label="status", value="no model loaded")
    wrap_status(widget.status)

def made_by(backend: object) -> str:
    """Which model and precision made a mask, as the status line says it (``litemedsam int8``)."""
    describe = getattr(backend, "describe", None)
    facts = describe() if callable(describe) else {}
    return " ".join(str(v) for v in (getattr(backend, "name", "model"), facts.get("precision")) if v)


__all__ = ["DEVICE_CHOICES", "made_by", "MODEL_CHOICES", "PROMPT_SLICE_CHOICES", "build_controls"]
