"""napari writer: a Labels layer (a prediction, an edited ground truth) to NIfTI/NRRD/MHA/npz or a DICOM SEG.

Thin: :func:`napari_medsam_eval.io.writers.write_mask` writes (atomically), never into a dataset
folder (:func:`napari_medsam_eval.core.ownership.check_may_write`: a ground truth is not saved over).
The geometry comes from the layer's ``metadata['geometry']`` when the layer
came from our reader or our widgets (spacing, origin and direction of the
source file, so the mask overlays the image in any other viewer), else from
the layer's ``scale`` (spacing in array order; ITK's default origin and
direction).

Objects may nest (:mod:`._widgets.common._object_masks`): a prediction layer that keeps each object's own
mask and draws an inner object over an outer one cannot be one label map without hiding part of the
outer one. Then the label map is written as drawn, every object it does not show whole gets a file of its
own beside it (``<name>.label<value>.nii.gz``, its whole mask as its value), and a warning says so:
nothing is dropped silently.

``.dcm``: a DICOM SEG (:mod:`.io.dicom_seg_write`), for a layer whose image came from a DICOM series (the
reader's ``geometry`` names the series' folder and UID; anything else is refused, saying so). A SEG holds
overlapping segments, so it is one file: a segment per object, its whole mask, named by the layer's
``label_names`` or ``object <value>``, the model (``metadata['model']``) and the objects' prompt protocol
recorded in it.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .core.case import Case, Spacing
from .core.errors import DataError, MedsamEvalError
from .core.ownership import check_may_write
from .io.formats import format_suffix, strip_suffix
from .io.writers import write_mask
from .core.errors import InputError

#: array axes of a layer by its number of dimensions
AXES_BY_NDIM = {2: "yx", 3: "zyx"}


def reference_case(data: np.ndarray, meta: dict[str, Any]) -> Case:
    """A header-only :class:`Case` describing the layer's grid, for :func:`write_mask`."""
    data = np.asarray(data)
    if data.ndim not in AXES_BY_NDIM:
        raise InputError(f"can only write 2D or 3D label layers, this one has shape {data.shape}")
    axes = AXES_BY_NDIM[data.ndim]
    layer_meta = meta.get("metadata") or {}
    scale = meta.get("scale")
    values = [float(v) for v in scale][-data.ndim:] if scale is not None else [1.0] * data.ndim
    kind = layer_meta.get("kind") if layer_meta.get("kind") in ("volume", "image") else None
    kind = kind or ("volume" if data.ndim == 3 else "image")
    geometry = dict(layer_meta.get("geometry") or {})
    return Case(image=data, label=None, spacing=Spacing.from_array_order(values, axes), kind=kind,
                case_id=str(meta.get("name", "labels")), metadata=geometry)


def object_paths(path: str | Path, values: list[int]) -> dict[int, Path]:
    """``<name>.label<value><suffix>`` beside ``path`` for each object value."""
    path = Path(path)
    suffix = format_suffix(path)
    return {v: path.with_name(f"{strip_suffix(path)}.label{v}{suffix}") for v in values}


def write_labels(path: str, data: Any, meta: dict[str, Any]) -> list[str]:
    """npe2 single-layer writer: ``path`` gets the labels, each object hidden in them a file of its own;
    returns the written path(s)."""
    from .datasets.dataset_roots import dataset_holding
    from ._widgets.common._object_masks import hidden_objects

    data = np.asarray(data)
    if format_suffix(Path(path)) == ".dcm":
        return [_write_seg(path, data, meta)]
    masks = (meta.get("metadata") or {}).get("masks")
    hidden = hidden_objects(masks, data) if isinstance(masks, dict) else {}
    files = {None: (Path(path), data)}
    files.update({v: (p, masks[v].astype(data.dtype) * v) for v, p in object_paths(path, sorted(hidden)).items()})
    written = []
    try:
        for _value, (target, labels) in files.items():
            # napari's save dialog asked before replacing a file; a dataset's files are never replaced
            check_may_write(target, overwrite=True, option="the file", dataset=dataset_holding(target))
            written.append(str(write_mask(labels, target, reference_case(labels, meta))))
    except (MedsamEvalError, ValueError) as error:
        raise InputError(f"cannot write {Path(path).name}: {error}") from error
    if hidden:
        listed = "; ".join(f"object {v}: {n} voxels under another object, whole in {Path(written[i + 1]).name}"
                           for i, (v, n) in enumerate(sorted(hidden.items())))
        warnings.warn(f"{Path(path).name} holds one label map, where objects overlap: {listed}", UserWarning,
                      stacklevel=2)
    return written


def _write_seg(path: str, data: np.ndarray, meta: dict[str, Any]) -> str:
    """The layer as one DICOM SEG: each object's whole mask a segment (they may overlap)."""
    from .datasets.dataset_roots import dataset_holding
    from .io.dicom_seg_write import SegAlgorithm, SegSegment
    from .io.writers import write_dicom_seg

    layer_meta = meta.get("metadata") or {}
    masks = layer_meta.get("masks")
    if not isinstance(masks, dict):
        masks = {int(v): data == v for v in np.unique(data) if v > 0}
    names = {int(k): str(v) for k, v in (layer_meta.get("label_names") or {}).items() if str(k).isdigit()}
    segments = [SegSegment(names.get(int(v)) or f"object {int(v)}", masks[v], int(v)) for v in sorted(masks)]
    objects = [o for o in (layer_meta.get("objects") or {}).values() if isinstance(o, dict)]
    protocols = sorted({str((o.get("prompt") or {}).get("protocol")) for o in objects
                        if isinstance(o.get("prompt"), dict) and (o.get("prompt") or {}).get("protocol")})
    algorithm = SegAlgorithm(str(layer_meta.get("model") or "napari-medsam-eval"), ", ".join(protocols) or None)
    try:
        check_may_write(path, overwrite=True, option="the file", dataset=dataset_holding(path))
        return str(write_dicom_seg(segments, path, reference_case(data, meta), algorithm))
    except (MedsamEvalError, ValueError) as error:  # not a ValueError: napari would take it for 'not a valid writer'
        raise DataError(f"cannot write {Path(path).name}: {error}") from error
