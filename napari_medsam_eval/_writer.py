"""napari writer: a Labels layer (a prediction, an edited ground truth) to NIfTI/NRRD/MHA/npz.

Thin: :func:`napari_medsam_eval.io.writers.write_mask` writes (atomically), never into a dataset
folder (:func:`napari_medsam_eval.core.ownership.check_may_write`: a ground truth is not saved over).
The geometry comes from the layer's ``metadata['geometry']`` when the layer
came from our reader or our widgets (spacing, origin and direction of the
source file, so the mask overlays the image in any other viewer), else from
the layer's ``scale`` (spacing in array order; ITK's default origin and
direction).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .core.case import Case, Spacing
from .core.errors import MedsamEvalError
from .core.ownership import check_may_write
from .io.writers import write_mask

#: array axes of a layer by its number of dimensions
AXES_BY_NDIM = {2: "yx", 3: "zyx"}


def reference_case(data: np.ndarray, meta: dict[str, Any]) -> Case:
    """A header-only :class:`Case` describing the layer's grid, for :func:`write_mask`."""
    data = np.asarray(data)
    if data.ndim not in AXES_BY_NDIM:
        raise ValueError(f"can only write 2D or 3D label layers, this one has shape {data.shape}")
    axes = AXES_BY_NDIM[data.ndim]
    layer_meta = meta.get("metadata") or {}
    scale = meta.get("scale")
    values = [float(v) for v in scale][-data.ndim:] if scale is not None else [1.0] * data.ndim
    kind = layer_meta.get("kind") if layer_meta.get("kind") in ("volume", "image") else None
    kind = kind or ("volume" if data.ndim == 3 else "image")
    geometry = dict(layer_meta.get("geometry") or {})
    return Case(image=data, label=None, spacing=Spacing.from_array_order(values, axes), kind=kind,
                case_id=str(meta.get("name", "labels")), metadata=geometry)


def write_labels(path: str, data: Any, meta: dict[str, Any]) -> list[str]:
    """npe2 single-layer writer: ``path`` gets the labels; returns the written path(s)."""
    from .datasets.dataset_roots import dataset_holding

    try:
        # napari's save dialog asked before replacing a file; a dataset's files are never replaced
        check_may_write(path, overwrite=True, option="the file", dataset=dataset_holding(path))
        written = write_mask(np.asarray(data), path, reference_case(data, meta))
    except (MedsamEvalError, ValueError) as error:
        raise ValueError(f"cannot write {Path(path).name}: {error}") from error
    return [str(written)]
