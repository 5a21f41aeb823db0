"""The Segment widget's model section: model, checkpoint, device, precision and *Load model*.

It builds the chosen model in the widget's worker runner (off the GUI thread)
and hands it to the session; :meth:`ModelSection.with_model` runs an action
once the chosen model is loaded (loading it first when it is not).
"""
from __future__ import annotations

from typing import Any, Callable

from magicgui.widgets import ComboBox, FileEdit, PushButton

from napari_medsam_eval.cli.common import PRECISION_CHOICES
from napari_medsam_eval.models import BACKENDS, DEFAULT_BACKEND
from napari_medsam_eval.models.base import made_by
from napari_medsam_eval.core.options import DEVICE_CHOICES as DEVICES
from napari_medsam_eval.session.session import Session
from napari_medsam_eval._widgets.common._section import Section
from napari_medsam_eval._widgets.common._words import TIPS
from napari_medsam_eval._widgets.common._worker import WorkerRunner

#: models offered (those that segment from prompts alone)
MODEL_CHOICES = [name for name in ("litemedsam", "medsam2", "sam2", "sam") if name in BACKENDS]
DEVICE_CHOICES = [name for name in DEVICES if ":" not in name]  # the device option's, but "cuda:N"


class ModelSection(Section):
    """Choose, load and describe the session's model."""

    def __init__(self, session: Session, runner: WorkerRunner) -> None:
        self.session, self.runner = session, runner
        self.model = ComboBox(label="model", choices=MODEL_CHOICES, value=DEFAULT_BACKEND,
                              tooltip="LiteMedSAM runs on the CPU with its shipped weights; the others need a file")
        self.checkpoint = FileEdit(label="checkpoint", mode="r", nullable=True, value=None, tooltip=TIPS["checkpoint"])
        self.device = ComboBox(label="device", choices=DEVICE_CHOICES, value="auto", tooltip=TIPS["device"])
        self.precision = ComboBox(label="precision", choices=list(PRECISION_CHOICES), value="fp32",
                                  tooltip=TIPS["precision"])
        self.load_button = PushButton(text="Load model", tooltip="build the model now (else on first use)")
        super().__init__([self.model, self.checkpoint, self.device, self.precision, self.load_button],
                         name="model_section")
        self.load_button.changed.connect(lambda *_a: self.load_model())
        session.backend_changed.connect(self._on_backend)

    @property
    def locked(self) -> list:
        return list(self)

    def spec(self) -> tuple[str, str | None, str, str]:
        """``(model, checkpoint or None, device, precision)`` as chosen (precision: LiteMedSAM's only)."""
        checkpoint = self.checkpoint.value
        checkpoint = str(checkpoint) if checkpoint not in (None, "") and str(checkpoint) not in ("", ".") else None
        precision = self.precision.value if self.model.value == "litemedsam" else "fp32"
        return self.model.value, checkpoint, self.device.value, precision

    def set_backend(self, backend: Any) -> None:
        """Use an already built backend (a script's or a test's) as the chosen model."""
        if getattr(backend, "name", None) in MODEL_CHOICES:
            self.model.value = backend.name
        if getattr(backend, "precision", None) in PRECISION_CHOICES:
            self.precision.value = backend.precision
        self.session.set_backend(backend, self.spec())

    def _on_backend(self, backend: Any) -> None:
        facts = backend.describe()
        loaded = ", ".join(str(facts[k]) for k in ("device", "precision") if facts.get(k))
        self.runner.status.value = f"model {self.session.model_name} loaded ({loaded})"

    def load_model(self, then: Callable[[], Any] | None = None) -> Any:
        """Build the chosen model in a worker; ``then`` runs once it is loaded."""
        if self.runner.busy:
            return None
        spec = self.spec()
        if spec[0] != "litemedsam" and spec[1] is None:
            return self.runner.error(f"{spec[0]} needs a checkpoint file: choose it in the 'checkpoint' field "
                                     "(LiteMedSAM needs none)")

        def after() -> None:  # once this worker has finished and freed the UI
            if then is not None and self.session.has_backend(spec):
                then()
        return self.runner.start(Session.build_backend, *spec, text=f"loading {spec[0]} ...",
                                 returned=lambda backend: self.session.set_backend(backend, spec), finished=after)

    def with_model(self, then: Callable[[], Any]) -> Any:
        """Call ``then`` now if the chosen model is loaded, else after loading it off-thread."""
        return then() if self.session.has_backend(self.spec()) else self.load_model(then=then)


__all__ = ["DEVICE_CHOICES", "MODEL_CHOICES", "ModelSection", "made_by"]
