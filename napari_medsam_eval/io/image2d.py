"""2D images (PNG, JPEG, TIFF, BMP) and their masks.

Images
    Grey stays ``(Y, X)``, colour stays ``(Y, X, 3)`` (grey stored as RGB, like
    the SAM-Med2D CT slices, is kept as RGB: it is what the file holds). An
    alpha channel is dropped (``metadata['alpha_dropped'] = True``). Spacing
    is the pixel size a TIFF states in its resolution tags, in mm; otherwise
    1.0 per pixel on ``y`` and ``x`` (:mod:`.pixel_size`, ``spacing_unit``).

Masks (:func:`mask_to_labels`, also used for video frame masks)
    1. A colour mask is judged by its colours (:mod:`.colour_masks`): grey
       stored as RGB (all channels equal, or nearly: re-saved JPEG noise) is
       made grey (channel 0, else luminance); black plus one colour (and its
       anti-aliased shades) is a binary mask, label 1; several colours stand
       for classes and the mask is refused, naming them (no colour kept or
       dropped silently).
    2. A JPEG mask is binarised at ``> 127`` to label 1 (compression noise makes
       exact values meaningless).
    3. A palette PNG keeps its palette indices as labels.
    4. A mask reaching its dtype's maximum (255 for 8-bit, 65535 for 16-bit),
       i.e. ``{0, 255}`` masks and their anti-aliased versions, is binarised at
       half that maximum to label 1.
    5. Anything else (``{0, 1, 2}``, a label map) keeps its values as labels.

    When rules 2 or 4 apply, ``label_names`` is ``{1: 'foreground'}`` (or the
    name given), ``label_source_values`` records ``{1: 255}`` and
    ``mask_encoding`` says which rule was used.

Reading as another code base does (the 2D prompt-mode study, which must see
the pixels Mazurowski et al.'s scripts saw): :func:`read_mask_gray` is their
``cv2.imread(path, 0)`` (no rule above applied: raw grey values or palette
indices) and :func:`read_image_rgb` their PIL ``convert("RGB")``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import imageio.v3 as iio
import numpy as np
from PIL import Image

from ..core.case import Case
from ..core.decoded_limit import check_ceiling, human_bytes
from ..core.errors import DataError
from .case_builder import check_kind, make_case
from .colour_masks import colour_mask
from .pixel_size import image_spacing
from .formats import JPEG_SUFFIXES, format_suffix, require_file, strip_suffix
from .validation import check_same_shape, label_dtype_for, to_label_array
from ..core.errors import InputError

JPEG_THRESHOLD = 127
FOREGROUND = "foreground"


#: bytes per band of the PIL modes whose bands are not one byte
_BAND_BYTES = {"I": 4, "F": 4, "I;16": 2, "I;16L": 2, "I;16B": 2, "I;16N": 2}


def check_image_header(path: Path, frames: int = 1, where: Path | None = None) -> None:
    """Refuse an image whose header's width x height x bands x pages (x ``frames``: a folder ``where`` of frames
    like it) decodes to more than the decoded-size limit (:mod:`napari_medsam_eval.core.decoded_limit`).

    Only the header is read (PIL opens lazily); a file PIL cannot open is left to the decoder, which names
    the problem.
    """
    try:
        with Image.open(path) as img:
            width, height = img.size
            bands, pages = len(img.getbands()), int(getattr(img, "n_frames", 1) or 1)
            n_bytes = width * height * bands * _BAND_BYTES.get(img.mode, 1) * pages * frames
            mode = img.mode
    except Exception:  # noqa: BLE001 - PIL raises OSError, ValueError, SyntaxError, DecompressionBombError ...
        return
    count = f"{frames} frames of " if frames > 1 else f"{pages} pages of " if pages > 1 else ""
    check_ceiling(n_bytes, f"{count}{width} x {height} pixels of mode {mode} ({human_bytes(n_bytes)})", where or path)


def read_image_array(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Pixels of one 2D image as ``(Y, X)`` or ``(Y, X, 3)``, plus notes for the metadata."""
    path = require_file(path)
    check_image_header(path)
    try:
        pixels = np.asarray(iio.imread(path))
    except Exception as error:  # imageio plugins raise OSError, ValueError, SyntaxError, ...
        raise DataError(f"cannot be read as an image ({type(error).__name__}: {error})", path) from None
    notes: dict[str, Any] = {}
    if pixels.ndim == 3 and pixels.shape[-1] in (2, 4):
        notes["alpha_dropped"] = True
        pixels = pixels[..., :-1]
    if pixels.ndim == 3 and pixels.shape[-1] == 1:
        pixels = pixels[..., 0]
    if not (pixels.ndim == 2 or (pixels.ndim == 3 and pixels.shape[-1] == 3)):
        raise DataError(f"image of shape {pixels.shape} where a single 2D grey or RGB image was expected "
                        "(multi-page TIFF?)", path)
    return pixels, notes


def read_image2d(path: str | Path, *, kind: str | None = None, modality: str | None = None,
                 case_id: str | None = None) -> Case:
    """A 2D image file as an ``image`` Case (no label); spacing in mm where the file states it (TIFF)."""
    check_kind(kind, ("image",), path, "a 2D image file")
    pixels, notes = read_image_array(path)
    spacing, units = image_spacing(path)
    return make_case(pixels, kind="image", spacing=spacing, path=path,
                     case_id=case_id, modality=modality, metadata={**notes, **units})


def read_mask_pixels(path: str | Path) -> tuple[np.ndarray, bool, str | None]:
    """Mask values (rule 1 of the module docstring), whether they are palette indices, and, for a
    one-colour RGB mask, the rule that already made them labels 0/1 (:mod:`.colour_masks`)."""
    path = require_file(path)
    check_image_header(path)
    try:
        with Image.open(path) as img:
            img.load()
            palette, rgb = img.mode in ("P", "PA"), img.mode in ("RGB", "RGBA")
            values = np.asarray(img.getchannel(0) if img.mode in ("LA", "PA") else img)  # RGB(A): (Y, X, 3|4)
    except Exception as error:  # PIL raises OSError, ValueError, SyntaxError, DecompressionBombError ...
        raise DataError(f"cannot be read as a mask image ({type(error).__name__}: {error})", path) from None
    colour = None
    if rgb:
        values, colour = colour_mask(values, lossy=format_suffix(path) in JPEG_SUFFIXES, path=path)
    if values.ndim != 2:
        raise DataError(f"mask of shape {values.shape} where a 2D mask was expected", path)
    return values, palette, colour


def mask_to_labels(values: np.ndarray, *, lossy: bool, palette: bool,
                   path: str | Path | None) -> tuple[np.ndarray, str, dict[int, int]]:
    """Apply rules 2-5 of the module docstring: ``(labels, encoding, {label: file value})``."""
    if values.dtype == bool:
        return values.astype(np.uint8), "binary", {}
    if lossy:
        return (values > JPEG_THRESHOLD).astype(np.uint8), f"JPEG mask binarised at >{JPEG_THRESHOLD}", {1: 255}
    if palette:
        return to_label_array(values, path), "palette indices", {}
    if np.issubdtype(values.dtype, np.integer) and values.dtype.itemsize <= 2:
        top = int(np.iinfo(values.dtype).max)
        if values.size and int(values.max()) == top:
            exact = np.all((values == 0) | (values == top))
            encoding = f"binary 0/{top} mask -> 0/1" if exact else f"grey-level mask binarised at >{top // 2}"
            return (values > top // 2).astype(np.uint8), encoding, {1: top}
    return to_label_array(values, path), "label values kept", {}


def read_mask2d(path: str | Path, *, shape: Sequence[int] | None = None,
                image_path: str | Path | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """A 2D mask file as a label map plus ``mask_encoding``/``label_source_values`` metadata."""
    values, palette, colour = read_mask_pixels(path)
    if colour is not None:
        labels, encoding, sources = values, colour, {}
    else:
        labels, encoding, sources = mask_to_labels(
            values, lossy=format_suffix(path) in JPEG_SUFFIXES, palette=palette, path=path
        )
    if shape is not None:
        check_same_shape(labels.shape, shape, path, image_path)
    info: dict[str, Any] = {"mask_encoding": encoding}
    if sources:
        info["label_source_values"] = sources
    if sources or colour is not None:
        info["label_names"] = {1: FOREGROUND}
    return labels, info


def read_mask_gray(path: str | Path) -> np.ndarray:
    """A mask file as their ``cv2.imread(path, 0)`` sees it: grey values, palette indices kept.

    Grey, palette, 16-bit and 1-bit images keep their stored values (``bool``
    becomes 0/1 ``uint8``); colour is made grey by PIL's ``convert("L")``. None
    of the mask rules of the module docstring is applied.
    """
    check_image_header(Path(path))
    try:
        with Image.open(path) as img:
            if img.mode in ("P", "I", "I;16", "I;16B", "I;16L", "L", "1"):
                values = np.asarray(img)
            else:
                values = np.asarray(img.convert("L"))
    except (OSError, ValueError) as error:
        raise DataError(f"cannot read mask: {error}", path) from None
    return values.astype(np.uint8) if values.dtype == bool else values


def read_image_rgb(path: str | Path) -> np.ndarray:
    """An image file as their PIL ``Image.open(path).convert("RGB")``; 16-bit/float values are kept as stored."""
    check_image_header(Path(path))
    try:
        with Image.open(path) as img:
            values = np.asarray(img)
            if values.dtype == np.uint8 or img.mode in ("P", "1", "CMYK", "YCbCr", "LA", "RGBA", "RGB", "L"):
                return np.asarray(img.convert("RGB"))
            return values
    except (OSError, ValueError) as error:
        raise DataError(f"cannot read image: {error}", path) from None


def object_names(mask_paths: Sequence[str | Path], image_path: str | Path) -> list[str]:
    """Object names from per-object mask files: ``<image>_liver_000.png`` -> ``liver``.

    The image stem prefix is removed, then a trailing ``_000`` index unless two
    masks would share a name (``hip_left_000``/``hip_left_001`` stay distinct).
    """
    stem = strip_suffix(image_path)
    full = [strip_suffix(p)[len(stem) + 1:] if strip_suffix(p).startswith(stem + "_") else strip_suffix(p)
            for p in mask_paths]
    short = [re.sub(r"_\d{3}$", "", name) for name in full]
    return [s if short.count(s) == 1 else f for s, f in zip(short, full)]


def read_image_with_masks(image_path: str | Path, mask_paths: Sequence[str | Path],
                          names: Sequence[str] | None = None, *, case_id: str | None = None,
                          modality: str | None = None) -> Case:
    """One 2D image with one binary mask file per object, merged into a label map.

    Object ``i`` (in ``mask_paths`` order) gets label ``i + 1`` and the name
    ``names[i]`` (default: :func:`object_names`). Where masks overlap the later
    one wins; the number of such pixels is kept as ``metadata['overlap_pixels']``.
    """
    if not mask_paths:
        raise DataError("no mask files given for this image", image_path)
    names = list(names) if names is not None else object_names(mask_paths, image_path)
    if len(names) != len(mask_paths):
        raise InputError(f"{len(names)} names for {len(mask_paths)} masks")
    pixels, notes = read_image_array(image_path)
    shape = pixels.shape[:2]
    label = np.zeros(shape, dtype=label_dtype_for(len(mask_paths)))
    covered = np.zeros(shape, dtype=np.uint16)
    for value, mask_path in enumerate(mask_paths, start=1):
        mask, _ = read_mask2d(mask_path, shape=shape, image_path=image_path)
        label[mask > 0] = value
        covered += mask > 0
    notes.update(
        label_path=str(Path(mask_paths[0]).parent),
        mask_paths=[str(p) for p in mask_paths],
        label_names={value: name for value, name in enumerate(names, start=1)},
        overlap_pixels=int(np.count_nonzero(covered > 1)),
        mask_encoding="one binary mask file per object",
    )
    spacing, units = image_spacing(image_path)
    return make_case(pixels, kind="image", spacing=spacing, path=image_path, label=label,
                     case_id=case_id, modality=modality, metadata={**notes, **units})
