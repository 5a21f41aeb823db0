"""Physical pixel size of 2D images and frames, from the file where it states one.

A TIFF states its pixel size in its resolution tags: ``XResolution`` /
``YResolution`` (pixels per unit) and ``ResolutionUnit`` (2 inch, 3 cm; 1 no
unit). Microscopy software names the unit elsewhere: ImageJ writes
``unit=micron`` in ``ImageDescription`` with ``ResolutionUnit`` 1, OME-TIFF
``PhysicalSizeX``/``PhysicalSizeXUnit`` in its XML. Any of these gives the
case a spacing in mm (a TIFF stating 0.24 um/px: 0.00024 mm), recorded as
``metadata['spacing_unit'] = "mm"`` with ``spacing_xyz`` and ``spacing_source``.

Not a measurement, so left as pixels: no tags, ``ResolutionUnit`` 1 without a
named unit, and the screen resolutions image editors write by default (72 and
96 dpi). Other formats (PNG, JPEG, BMP) carry pixels only: their density
fields are display settings. Pixel cases say ``spacing_unit = "pixel"``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from PIL import Image

from ..core.case import Spacing
from ..core.errors import DataError
from .formats import format_suffix

#: metadata of a case whose spacing is in pixels (no physical size in the file)
PIXEL_UNITS: dict[str, Any] = {"spacing_unit": "pixel"}
#: dots per inch that editors write by default: a display setting, not a pixel size
SCREEN_DPI = (72.0, 96.0)
_TIFF_SUFFIXES = (".tif", ".tiff")
_TAG_X, _TAG_Y, _TAG_UNIT, _TAG_DESCRIPTION = 282, 283, 296, 270
_MM_PER_UNIT = {"inch": 25.4, "in": 25.4, "cm": 10.0, "centimeter": 10.0, "mm": 1.0, "millimeter": 1.0,
                "um": 1e-3, "µm": 1e-3, "μm": 1e-3, "micron": 1e-3, "microns": 1e-3, "micrometer": 1e-3,
                "\\u00b5m": 1e-3, "nm": 1e-6, "nanometer": 1e-6, "m": 1e3, "meter": 1e3}
_RESOLUTION_UNIT = {2: "inch", 3: "cm"}


def _unit_in_description(description: str) -> str | None:
    """The unit ImageJ (``unit=micron``) or OME-XML (``PhysicalSizeXUnit="µm"``, default µm) names."""
    imagej = re.search(r"^unit=(\S+)\s*$", description, re.MULTILINE)
    if imagej:
        return imagej.group(1).strip().lower()
    if "PhysicalSizeX=" in description:
        ome = re.search(r'PhysicalSizeXUnit="([^"]+)"', description)
        return ome.group(1).lower() if ome else "µm"
    return None


def _ome_sizes(description: str) -> tuple[float, float] | None:
    """OME-XML ``PhysicalSizeY``/``PhysicalSizeX`` (the unit's own numbers), when both are stated."""
    found = [re.search(rf'PhysicalSize{a}="([0-9.eE+-]+)"', description) for a in "YX"]
    return (float(found[0].group(1)), float(found[1].group(1))) if all(found) else None


def tiff_pixel_size_mm(path: str | Path) -> tuple[float, float] | None:
    """``(y, x)`` pixel size in mm a TIFF states (see the module doc), or None."""
    try:
        with Image.open(path) as img:
            tags = dict(getattr(img, "tag_v2", {}) or {})
    except (OSError, ValueError, SyntaxError):
        return None  # the pixel reader reports an unreadable file
    description = tags.get(_TAG_DESCRIPTION, "")
    description = description if isinstance(description, str) else ""
    unit_code = int(tags.get(_TAG_UNIT, 2) or 2)
    named = _unit_in_description(description)
    ome = _ome_sizes(description)
    if ome and named in _MM_PER_UNIT:
        return _positive((ome[0] * _MM_PER_UNIT[named], ome[1] * _MM_PER_UNIT[named]))
    try:
        per_unit = (float(tags[_TAG_Y]), float(tags[_TAG_X]))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    unit = _RESOLUTION_UNIT.get(unit_code) if unit_code != 1 else named
    if unit == "inch" and per_unit[0] == per_unit[1] and per_unit[0] in SCREEN_DPI:
        return None
    if unit not in _MM_PER_UNIT or not all(v > 0 for v in per_unit):
        return None
    return _positive((_MM_PER_UNIT[unit] / per_unit[0], _MM_PER_UNIT[unit] / per_unit[1]))


def _positive(values: tuple[float, float]) -> tuple[float, float] | None:
    return values if all(0 < v < float("inf") for v in values) else None


def pixel_size_mm(path: str | Path) -> tuple[float, float] | None:
    """``(y, x)`` mm of one 2D image file, where its format states one (TIFF only), else None."""
    return tiff_pixel_size_mm(path) if format_suffix(path) in _TIFF_SUFFIXES else None


def spacing_notes(size_yx: tuple[float, float] | None, path: str | Path) -> dict[str, Any]:
    """Metadata saying where a 2D spacing comes from (``spacing_unit``, ``spacing_xyz``, ``spacing_source``)."""
    if size_yx is None:
        return dict(PIXEL_UNITS)
    return {"spacing_unit": "mm", "spacing_xyz": (size_yx[1], size_yx[0]),
            "spacing_source": f"TIFF resolution tags of {Path(path).name}"}


def image_spacing(path: str | Path) -> tuple[Spacing, dict[str, Any]]:
    """The ``yx`` spacing of a 2D image file (mm when it states one, else unit pixels) and its notes."""
    size = pixel_size_mm(path)
    spacing = Spacing.from_array_order(size, "yx") if size else Spacing.isotropic("yx")
    return spacing, spacing_notes(size, path)


def frames_pixel_size(files: list[Path]) -> tuple[float, float] | None:
    """The pixel size every frame of a folder states (None: none states one); frames that differ are refused."""
    sizes = [pixel_size_mm(path) for path in files]
    if any(size != sizes[0] for size in sizes):
        index = next(i for i, size in enumerate(sizes) if size != sizes[0])
        raise DataError(f"frame states pixel size {_text(sizes[index])}, the first frame {files[0].name} "
                        f"{_text(sizes[0])}: one video has one pixel size", files[index])
    return sizes[0]


def _text(size: tuple[float, float] | None) -> str:
    return "none (pixels)" if size is None else f"{size[0]:.6g} x {size[1]:.6g} mm (y, x)"
