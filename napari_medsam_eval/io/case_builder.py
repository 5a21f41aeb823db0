"""Small helpers every reader uses to turn arrays into a validated :class:`Case`."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..core.case import KINDS, Case, CaseKind, Spacing
from ..core.errors import DataError
from .formats import strip_suffix
from .validation import check_finite_image
from ..core.errors import InputError

#: spacing of the time axis of every video case: one frame (see :mod:`.video`)
FRAME_SPACING = 1.0



def check_kind(kind: str | None, allowed: Sequence[str], path: str | Path, what: str) -> None:
    """Raise when a requested ``kind`` cannot apply to this data."""
    if kind is not None and kind not in KINDS:
        raise InputError(f"kind must be one of {KINDS} or None, got {kind!r}")
    if kind is not None and kind not in allowed:
        raise DataError(f"{what} cannot be read as kind={kind!r} (possible: {', '.join(allowed)})", path)


def spacing_for_kind(kind: CaseKind, values_xyz: Sequence[float] | None) -> Spacing:
    """A case's :class:`Spacing` from file spacing in ITK/npz ``x, y[, z]`` order.

    A video's third file value is not a time step (NIfTI's third pixdim is a
    length), so ``t`` is always :data:`FRAME_SPACING`; ``None`` means "the file
    has no spacing" and gives unit pixels.
    """
    axes = {"volume": "zyx", "video": "tyx", "image": "yx"}[kind]
    if values_xyz is None:
        return Spacing.isotropic(axes)
    values = [float(v) for v in values_xyz]
    if not all(np.isfinite(v) and v > 0 for v in values):
        values = [1.0] * len(values)
    if kind == "video":
        return Spacing.from_array_order((FRAME_SPACING, values[1], values[0]), "tyx")
    if kind == "image":
        return Spacing.from_xyz(values[:2], "yx")
    return Spacing.from_xyz(values[:3], "zyx")


def default_case_id(path: str | Path) -> str:
    """File name without format suffix, or the folder name for a folder."""
    path = Path(path)
    return path.name if path.is_dir() else strip_suffix(path)


def make_case(
    image: np.ndarray,
    *,
    kind: CaseKind,
    spacing: Spacing,
    path: str | Path,
    case_id: str | None,
    modality: str | None,
    metadata: dict[str, Any],
    label: np.ndarray | None = None,
) -> Case:
    """Build a Case after the image checks; Case's own ValueErrors become DataErrors on ``path``."""
    check_finite_image(image, path)
    metadata = {"image_path": str(path), **metadata}
    try:
        return Case(
            image=image,
            label=label,
            spacing=spacing,
            kind=kind,
            case_id=case_id or default_case_id(path),
            modality=modality,
            metadata=metadata,
        )
    except (ValueError, TypeError) as error:
        raise DataError(str(error), path) from None
