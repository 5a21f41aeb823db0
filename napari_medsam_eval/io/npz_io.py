"""MedSAM / CVPR-challenge ``.npz`` files.

Keys: ``imgs`` (3D: ``(D, H, W)``; 2D: ``(H, W, 3)`` or ``(H, W)``), optional
``gts`` (same spatial shape), ``spacing``, ``origin``, ``direction`` and
``boxes``. The pitfall: ``spacing`` is stored **x, y, z** while the arrays are
**z, y, x**, so it goes through :meth:`Spacing.from_xyz`; ``origin`` and
``direction`` stay in that ITK order in the metadata, like every other reader.

A 3-axis ``imgs`` whose last axis has 3 or 4 values is a 2D colour image when
``gts`` (if any) has its first two axes' shape, else a volume. 4D ``imgs``
(a colour sequence) is only accepted with ``kind="video"``.
"""
from __future__ import annotations

import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ..core.case import Case, CaseKind
from ..core.errors import DataError, GeometryMismatchError
from .case_builder import check_kind, make_case, spacing_for_kind
from .formats import require_file, strip_suffix
from .npz_objects import PROMPT_KEYS, challenge_boxes, plain, read_object_array
from .sizes import check_npz_sizes
from .validation import plain_numbers, plain_shape, to_label_array

#: file-name prefixes of the CVPR 2024/2025 challenge data and the modality they mean
MODALITY_PREFIXES = {
    "ct": "CT", "mr": "MR", "mri": "MR", "pet": "PET", "us": "US", "xray": "XRay", "x-ray": "XRay",
    "dermoscopy": "Dermoscopy", "endoscopy": "Endoscopy", "fundus": "Fundus",
    "mammo": "Mammography", "mammography": "Mammography", "microscopy": "Microscopy",
    "oct": "OCT", "microus": "MicroUS",
}

#: keys tried, in order, when an npz is read as a label file
LABEL_KEYS = ("gts", "segs")


def guess_modality(name: str | Path) -> str | None:
    """Modality from a ``CT_...``/``MR_...``-style file name prefix, else None."""
    prefix = strip_suffix(Path(name)).split("_", 1)[0].lower()
    return MODALITY_PREFIXES.get(prefix)


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    """All arrays of an npz, loaded eagerly so corruption surfaces here as a DataError.

    The arrays' headers are checked first (:func:`.sizes.check_npz_sizes`): a
    header declaring more data than its member holds, or than the memory
    ceiling, is refused before numpy allocates it.
    """
    path = require_file(path)
    try:
        check_npz_sizes(path)
        with np.load(path, allow_pickle=False) as data:
            arrays, objects = {}, []
            for key in data.files:
                try:
                    arrays[key] = data[key]
                except ValueError as error:
                    if "allow_pickle" not in str(error):
                        raise
                    objects.append(key)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as error:
        raise DataError(f"cannot be read as an npz archive ({type(error).__name__}: {error})", path) from None
    for key in objects:  # the challenge's pickled prompts, read safely; any other pickle refused
        if key not in PROMPT_KEYS:
            raise DataError(f"array '{key}' holds pickled Python objects, which are not read (only the "
                            f"challenge's prompt keys {', '.join(PROMPT_KEYS)} are)", path)
        arrays[key] = read_object_array(path, key)
    return arrays


def _npz_kind(imgs: np.ndarray, gts: np.ndarray | None, requested: CaseKind | None, path: Path) -> CaseKind:
    if imgs.ndim == 2:
        check_kind(requested, ("image",), path, "2D imgs")
        return "image"
    if imgs.ndim == 4:
        if requested != "video":
            raise DataError(f"4D imgs of shape {plain_shape(imgs.shape)} where a 3D volume was expected; "
                            "use kind='video' for a colour sequence", path)
        return "video"
    if imgs.ndim != 3:
        raise DataError(f"imgs has {imgs.ndim} dimensions (shape {plain_shape(imgs.shape)}); 2, 3 or 4 expected", path)
    colour_2d = imgs.shape[-1] in (3, 4) and (gts is None or gts.shape == imgs.shape[:2])
    if requested is not None:
        ambiguous = colour_2d and gts is None  # (H, W, 3) image or a 3-column volume: the caller knows
        allowed = ("image", "volume", "video") if ambiguous else ("image",) if colour_2d else ("volume", "video")
        check_kind(requested, allowed, path, f"imgs of shape {plain_shape(imgs.shape)}")
        return requested
    return "image" if colour_2d else "volume"


def check_npz_spacing(spacing: Any, n_axes: int, path: str | Path) -> tuple[float, ...]:
    """The ``spacing`` of an npz whose arrays have ``n_axes`` spatial axes, validated.

    A 3D array needs exactly 3 values (x, y, z); a 2D one 2 (x, y) or 3 (a
    slice that kept its volume's z spacing, which is ignored). Every value
    must be a positive finite number of mm. Anything else is a DataError: a
    spacing cut or padded to fit would make every distance metric wrong.
    """
    values = tuple(float(v) for v in np.asarray(spacing, dtype=float).ravel())
    allowed = (3,) if n_axes >= 3 else (2, 3)
    if len(values) not in allowed:
        expected = "3 (x, y, z)" if n_axes >= 3 else "2 (x, y) or 3 (x, y, z)"
        raise DataError(f"spacing has {len(values)} value{'s' if len(values) != 1 else ''} "
                        f"({plain_numbers(values)}) for a {n_axes}D image; expected {expected}", path)
    if not all(np.isfinite(v) and v > 0 for v in values):
        raise DataError(f"spacing {plain_numbers(values)} (x, y, z) holds a value that is not a positive "
                        "number of mm", path)
    return values


def _npz_spacing_xyz(data: dict[str, np.ndarray], kind: CaseKind, path: Path) -> tuple[float, ...] | None:
    if "spacing" not in data:
        return None
    return check_npz_spacing(data["spacing"], 2 if kind == "image" else 3, path)


def npz_geometry(data: dict[str, np.ndarray]) -> dict[str, Any]:
    """ITK-order ``spacing``/``origin``/``direction`` of an npz, where present."""
    return {key: tuple(float(v) for v in np.asarray(data[key], dtype=float).ravel())
            for key in ("spacing", "origin", "direction") if key in data}


def read_medsam_npz(path: str | Path, *, kind: CaseKind | None = None, modality: str | None = None,
                    case_id: str | None = None) -> Case:
    """Read a MedSAM/CVPR npz (image, ``gts`` label, spacing, boxes) as a Case."""
    path = Path(path)
    data = load_npz(path)
    if "imgs" not in data:
        raise DataError(f"not a MedSAM npz: no 'imgs' key (keys: {', '.join(sorted(data)) or 'none'})", path)
    imgs, gts = data["imgs"], data.get("gts")
    kind = _npz_kind(imgs, gts, kind, path)
    label = None
    if gts is not None:
        spatial = imgs.shape[:-1] if (kind == "image" and imgs.ndim == 3) or imgs.ndim == 4 else imgs.shape
        if gts.shape != spatial:
            raise GeometryMismatchError(f"gts shape {plain_shape(gts.shape)} does not match imgs spatial shape "
                                        f"{plain_shape(spatial)}", path)
        label = to_label_array(gts, path)
    geometry = npz_geometry(data)
    metadata: dict[str, Any] = {key: geometry[key] for key in ("origin", "direction") if key in geometry}
    if "spacing" in geometry:
        metadata["spacing_xyz"] = geometry["spacing"]
    metadata["spacing_unit"] = "mm" if "spacing" in geometry else "pixel"
    if "boxes" in data or "bbox" in data:
        key = "boxes" if "boxes" in data else "bbox"
        boxes = data[key]
        challenge = challenge_boxes(boxes, path, key)
        if challenge is not None:  # CVPR 2025: one box dictionary per class (the cvpr25-interactive protocol)
            metadata["cvpr25_boxes"] = challenge
        else:
            metadata["boxes"] = np.asarray(boxes)
    if "clicks" in data:
        metadata["clicks"] = plain(data["clicks"])
    if label is not None:
        metadata["label_path"] = str(path)
    metadata["npz_keys"] = sorted(data)
    metadata["intensity"] = "prepared"  # the format's imgs are 0..255 by the challenge's rule
    return make_case(
        imgs,
        kind=kind,
        spacing=spacing_for_kind(kind, _npz_spacing_xyz(data, kind, path)),
        path=path,
        case_id=case_id,
        modality=modality or guess_modality(path),
        metadata=metadata,
        label=label,
    )


def read_npz_label(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """A label array from an npz (key ``gts``, else ``segs``) and its geometry (ITK order).

    The spacing is checked against the array's axes (:func:`check_npz_spacing`).
    """
    data = load_npz(path)
    key = next((k for k in LABEL_KEYS if k in data), None)
    if key is None:
        raise DataError(f"npz has no label key ({' or '.join(LABEL_KEYS)}); keys: {', '.join(sorted(data))}", path)
    if "spacing" in data:
        check_npz_spacing(data["spacing"], min(np.ndim(data[key]), 3), path)
    return data[key], npz_geometry(data)
