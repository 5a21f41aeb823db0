"""Model backends, built by name; heavy imports happen only when one is built.

>>> backend = build_backend("litemedsam")            # CPU, shipped weights
>>> backend = build_backend("medsam2", checkpoint="MedSAM2_latest.pt", device="cuda")
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from ..core.options import check_call_options
from ._native_libs import load_triton_isolated
from .base import SliceProgress, SegmentationBackend, SegmentResult
from ..core.errors import InputError

#: name -> "module:builder"; the module is imported only when that backend is built
BACKENDS: dict[str, str] = {
    "litemedsam": "napari_medsam_eval.models.litemedsam:build",
    "medsam2": "napari_medsam_eval.models.sam2_backend:build_medsam2",
    "sam2": "napari_medsam_eval.models.sam2_backend:build_sam2",
    "sam": "napari_medsam_eval.models.sam_backend:build",
    "box": "napari_medsam_eval.models.baselines:build_box",
    "oracle": "napari_medsam_eval.models.baselines:build_oracle",
}

DEFAULT_BACKEND = "litemedsam"


def available_backends() -> list[str]:
    return sorted(BACKENDS)


def build_backend(name: str = DEFAULT_BACKEND, **options: Any) -> SegmentationBackend:
    """Build the backend registered as ``name`` with builder ``options``
    (``checkpoint``, ``device``, ``dtype``, ...): an option the builder does not take, or of another
    type than its parameter's, is refused first (:class:`~napari_medsam_eval.core.errors.OptionError`)."""
    try:
        target = BACKENDS[name]
    except KeyError:
        raise InputError(f"unknown model {name!r}; choose one of {', '.join(available_backends())}") from None
    module_name, func_name = target.split(":")
    load_triton_isolated()  # before torch's compiler stack loads next to a napari viewer
    builder = getattr(import_module(module_name), func_name)
    check_call_options(builder, options, f"model {name}: options")  # before the (slow) build
    return builder(**options)


__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "SliceProgress",
    "SegmentResult",
    "SegmentationBackend",
    "available_backends",
    "build_backend",
]
