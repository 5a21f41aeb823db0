"""The model backend interface: segment one 2D slice/frame from prompts.

A backend is built by name through :func:`napari_medsam_eval.models.build_backend`;
heavy imports (torch, sam2, segment_anything) happen only inside the builders.
Per-slice backends are turned into 3D/temporal segmenters by
:mod:`napari_medsam_eval.propagation`; backends with their own memory
(SAM2/MedSAM2) set ``propagates_natively`` and implement :meth:`propagate`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Hashable

import numpy as np

from ..core.checksum import sha256_file  # noqa: F401 - re-exported: checkpoints are verified with it
from ..core.progress import SliceProgress
from ..core.prompt import Prompt
from ..core.errors import InputError
from ..core.reprs import number_words, one_line, shape_words


@dataclass
class SegmentResult:
    """What a backend returns for one slice and one prompt.

    ``mask`` is the binary prediction at the slice's full resolution.
    ``logits`` are the pre-threshold values at full resolution when the model
    has them (None for baselines). ``candidates``/``candidate_scores`` hold
    every mask a multi-mask model (SAM) proposes, index 0 first; ``score`` is
    the model's own quality estimate of ``mask`` when it gives one. ``timings``
    holds seconds spent in ``encoder`` and ``decoder``.

    Example::

        result = session.segment_slice(prompt)     # SegmentResult(96x96, 173 pixels, score=0.8871, ...)
        result.mask, result.score
    """

    mask: np.ndarray
    logits: np.ndarray | None = None
    score: float | None = None
    candidates: np.ndarray | None = None
    candidate_scores: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)
    #: which model and precision made ``mask`` (:func:`made_by`), when a session says it
    made_by: str = ""

    def __repr__(self) -> str:
        """``SegmentResult(256x256, 1204 pixels, score=0.91, made_by='litemedsam fp32')``: never the arrays."""
        mask = np.asarray(self.mask)
        named = {} if self.score is None else {"score": number_words(self.score)}
        if self.candidates is not None:
            named["candidates"] = str(len(self.candidates))
        if self.made_by:
            named["made_by"] = repr(self.made_by)
        return one_line("SegmentResult", [shape_words(mask.shape), f"{int(np.count_nonzero(mask))} pixels"], named)


@dataclass
class FeatureGrid:
    """A slice's image features on the encoder's grid (what similarity re-location reads).

    ``features`` is ``(C, gh, gw)`` float32, each cell's vector of unit length,
    covering only the image (not the encoder's padding). The image was resized
    by ``scale`` to ``new_size`` (H, W) before encoding, and a cell spans
    ``cell`` pixels of that resized image.
    """

    features: np.ndarray
    scale: float
    new_size: tuple[int, int]
    original_size: tuple[int, int]
    cell: int


class SegmentationBackend(ABC):
    """One promptable model.

    ``image`` given to :meth:`segment` is one 2D slice/frame, ``(H, W)`` or
    ``(H, W, 3)``, already intensity-prepared (uint8 for the SAM family).
    ``cache_key`` identifies the slice (e.g. ``(case_id, z)``) so a backend can
    reuse its image embedding when the same slice is prompted again.

    Example::

        model = api.build_model("litemedsam", device="cpu")   # LiteMedSAMBackend(litemedsam, engine=..., ...)
        model.segment(case.image[22], prompt).mask           # one slice (a Session prepares intensities first)
        model.describe()                                     # what a run's manifest records
    """

    name: str = "backend"
    #: prompt kinds accepted, a subset of {"box", "points", "mask"}
    accepts: frozenset[str] = frozenset()
    propagates_natively: bool = False
    #: True for a model trained on boxes only (LiteMedSAM): it accepts points but answers them
    #: poorly, so a simulated user corrects it with boxes (protocols.corrections) and a widget says so
    box_trained: bool = False

    @abstractmethod
    def segment(self, image: np.ndarray, prompt: Prompt, *, cache_key: Hashable | None = None) -> SegmentResult:
        """Segment ``image`` from ``prompt``; several boxes are merged by union."""

    def propagate(self, frames: np.ndarray, prompt: Prompt, *, reverse: bool = True,
                  progress: SliceProgress | None = None, **options: object) -> np.ndarray:
        """Native propagation through ``frames`` (T, H, W[, 3]) from ``prompt.slice_index``.

        ``options`` a model with memory may take: ``seed`` (``"box"`` / ``"mask"``, what starts
        each pass) and ``anchors`` (prompts on other frames, all in its state before it propagates).
        """
        raise NotImplementedError(f"{self.name} has no native propagation; use napari_medsam_eval.propagation")

    def feature_grid(self, image: np.ndarray, cache_key: Hashable | None = None) -> FeatureGrid | None:
        """The slice's image features (:class:`FeatureGrid`), or None for a model without them."""
        return None

    def encode(self, image: np.ndarray, cache_key: Hashable) -> bool:
        """Compute and keep the image embedding of one slice ahead of its prompt (encode ahead), so
        that segmenting it later is the decoder alone. False for a model without a per-slice cache
        (SAM2/MedSAM2 keep their features in their own propagation state; the baselines have none)."""
        return False

    def clear_cache(self) -> None:
        """Forget cached image embeddings (a no-op for backends without a cache)."""

    def describe(self) -> dict[str, object]:
        """Facts a run manifest records (name, checkpoint and its SHA-256, device)."""
        return {"name": self.name}

    def __repr__(self) -> str:
        """``LiteMedSAMBackend(litemedsam, engine=openvino, precision=fp32, device=cpu)``: the name and the facts
        :meth:`_repr_facts` gives (cheap: never :meth:`describe`, which may hash a checkpoint)."""
        return one_line(type(self).__name__, [str(self.name)], self._repr_facts())

    def _repr_facts(self) -> dict[str, str]:
        """The facts the repr shows: the encoder engine, precision and device where the backend has them
        (attributes read as they are; a lazily loaded engine is not loaded for it)."""
        facts: dict[str, str] = {}
        engine = getattr(self, "encoder_engine", None)
        if engine is not None:
            facts["engine"] = str(getattr(engine, "name", type(engine).__name__))
        for attribute in ("precision", "device"):
            value = getattr(self, attribute, None)
            if value is not None:
                facts[attribute] = str(value)
        return facts

    def check_prompt(self, prompt: Prompt) -> None:
        """Raise ValueError when ``prompt`` uses a kind this backend does not accept."""
        used = {k for k, present in (("box", prompt.boxes), ("points", prompt.points), ("mask", prompt.mask is not None)) if present}
        unsupported = used - set(self.accepts)
        if unsupported:
            raise InputError(f"{self.name} does not accept {' or '.join(sorted(unsupported))} prompts "
                             f"(accepts {', '.join(sorted(self.accepts))})")
        if not used:
            raise InputError(f"{self.name}: the prompt for label {prompt.target_label} is empty")


def made_by(backend: object) -> str:
    """Which model and precision made a mask, as a status line says it (``litemedsam int8``)."""
    describe = getattr(backend, "describe", None)
    facts = describe() if callable(describe) else {}
    return " ".join(str(v) for v in (getattr(backend, "name", "model"), facts.get("precision")) if v)
