"""Intensity preparation of raw volumes to uint8, as the MedSAM challenge data were made.

The CVPR 2024 challenge npz files (and LiteMedSAM's training data) were made by
MedSAM's ``pre_CT_MR.py``; this module reproduces its rule, read from the code:

* **CT**: clip to the window ``[level - width/2, level + width/2]``, then
  rescale the *clipped volume's own* min..max to 0..255
  (``(x - min) / (max - min) * 255``) and cast with ``np.uint8`` (truncation).
  When the volume spans the window (the usual case: air and bone lie outside
  it) min/max are the window bounds. ``rescale="window"`` uses the bounds
  always (MedSAM2's scripts do so).
* **MR, PET and anything else**: ``lo, hi`` = the 0.5 and 99.5 percentiles of
  the voxels ``> 0`` (the official code selects ``image > 0``, so negative
  values are excluded as well as zeros); clip, rescale min..max to 0..255 as
  above, then voxels that were exactly 0 are set back to 0, and cast with
  ``np.uint8``. A volume without positive voxels uses all its voxels.
* **The rule depends on the modality, not on the dtype**, as in ``pre_CT_MR.py``
  (it never checks the dtype): an MR scan stored as uint8 is a raw scan, not a
  prepared one, and is clipped and rescaled like any other. Two
  hippocampus_mri files are such raw uint8 MR crops; the official LiteMedSAM
  hippocampus figures (first 20 cases, anterior median 0.408) are reproduced
  only when they are prepared too (0.4075; passing them through gives 0.3985).
  One exception: a **uint8 CT** passes through, since 8 bits cannot hold
  Hounsfield units (it was windowed already).
* **Data that really is prepared** (0..255 from the challenge's rule, e.g. a
  MedSAM/CVPR ``.npz``, whose ``imgs`` are prepared by the format's definition)
  is passed through with ``intensity="prepared"``: the npz reader records it in
  the case (``metadata["intensity"]``), and ``medsam-eval segment/run
  --intensity prepared`` says it for other files. ``intensity="raw"`` applies
  the rule even to a uint8 CT.

The window defaults to soft tissue (level 40, width 400, the default of
``pre_CT_MR.py``); pick another by name from :data:`CT_WINDOWS` or give
``(level, width)``.
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from .array_blocks import BLOCK_BYTES, blocks, count_nonfinite, count_where
from .case import KINDS
from .errors import InputError

#: named CT windows, (level, width) in HU (radiopaedia.org/articles/windowing-ct)
CT_WINDOWS: dict[str, tuple[float, float]] = {
    "soft_tissue": (40.0, 400.0),
    "abdomen": (40.0, 400.0),
    "lung": (-600.0, 1500.0),
    "mediastinum": (50.0, 350.0),
    "liver": (30.0, 150.0),
    "bone": (400.0, 1800.0),
    "brain": (40.0, 80.0),
}
DEFAULT_CT_WINDOW = "soft_tissue"
#: what is known of an image's intensities: "auto" (the modality's rule), "prepared"
#: (0..255 already; passed through), "raw" (the rule applies, whatever the dtype)
INTENSITY_MODES = ("auto", "prepared", "raw")
#: the percentiles of positive voxels used for MR/PET/other modalities
PERCENTILES = (0.5, 99.5)



def resolve_window(window: str | tuple[float, float] | None) -> tuple[float, float]:
    """``(level, width)`` for a window name, a pair, or None (soft tissue)."""
    if window is None:
        window = DEFAULT_CT_WINDOW
    if isinstance(window, str):
        key = window.strip().lower().replace("-", "_").replace(" ", "_")
        if key not in CT_WINDOWS:
            choices = ", ".join(sorted(CT_WINDOWS))
            raise InputError(f"unknown CT window {window!r}; choose one of {choices} or give (level, width)")
        return CT_WINDOWS[key]
    try:
        level, width = (float(v) for v in window)
    except (TypeError, ValueError):
        raise InputError(f"window must be a name or (level, width), got {window!r}") from None
    if not (np.isfinite(level) and np.isfinite(width)) or width <= 0:
        raise InputError(f"window width must be positive and finite, got level={level}, width={width}")
    return level, width


def is_ct(modality: str | None) -> bool:
    return modality is not None and modality.strip().upper() == "CT"


def _percentiles(volume: np.ndarray) -> tuple[float, float]:
    """:data:`PERCENTILES` of the voxels > 0 (of all voxels when none is), as ``np.percentile`` of their float64
    values gives them, without a float64 copy of the volume.

    Integer voxels > 0 are kept in their dtype: numpy's linear interpolation then works on the same two
    neighbouring values (their difference fits the dtype, both being positive) and gives the same float64
    result. Float voxels are converted, since float32 arithmetic would round the interpolation otherwise.
    """
    integer = np.issubdtype(volume.dtype, np.integer)
    n_positive = count_where(volume, lambda block: block > 0)
    if n_positive:
        sample = np.empty(n_positive, dtype=volume.dtype if integer else np.float64)
        filled = 0
        for part in blocks(volume):
            chosen = volume[part][volume[part] > 0]
            sample[filled:filled + chosen.size] = chosen
            filled += chosen.size
    else:
        sample = volume.astype(np.float64).reshape(-1)  # no positive voxel: all of them (rare; negative ints
        # would overflow their dtype's differences)
    lo, hi = (float(v) for v in np.percentile(sample, PERCENTILES, overwrite_input=True))
    return lo, hi


def _prepare_blocks(volume: np.ndarray, lo: float, hi: float, rescale: str, zero_stays: bool) -> np.ndarray:
    """Clip to ``lo..hi``, rescale to 0..255 and cast, as the whole-volume float64 rule does, one block at a time.

    ``rescale="data"`` rescales the clipped volume's own min..max: clipping is monotonic, so that is the
    clipped min and max of the volume, found without a clipped copy. ``zero_stays``: voxels that were 0 stay 0.
    """
    if rescale == "window":
        vmin, vmax = lo, hi
    else:
        vmin = float(np.clip(np.float64(volume.min()), lo, hi))
        vmax = float(np.clip(np.float64(volume.max()), lo, hi))
    out = np.zeros(volume.shape, dtype=np.uint8)
    if vmax <= vmin:
        return out
    for part in blocks(volume, BLOCK_BYTES // 32):  # float64 temporaries of a few MB (one slice of 512 x 512)
        data = volume[part].astype(np.float64)
        scaled = (np.clip(data, lo, hi) - vmin) / (vmax - vmin) * 255.0
        if zero_stays:
            scaled[data == 0] = 0
        out[part] = np.clip(scaled, 0, 255).astype(np.uint8)
    return out


def prepare_intensity(
    volume: np.ndarray,
    modality: str | None,
    window: str | tuple[float, float] | None = None,
    *,
    rescale: Literal["data", "window"] = "data",
    intensity: str = "auto",
) -> np.ndarray:
    """A raw image/volume as uint8 0..255 by the challenge's rule (see the module doc).

    ``modality`` "CT" (any case) is windowed with ``window`` (a name in
    :data:`CT_WINDOWS`, ``(level, width)``, or None for soft tissue); every
    other modality (MR, MRI, PET, None, ...) is clipped to the 0.5-99.5
    percentiles of its positive voxels. ``window`` is ignored for non-CT.
    ``intensity`` (:data:`INTENSITY_MODES`): "auto" applies the rule to every
    dtype except a uint8 CT, "prepared" returns uint8 input as it is, "raw"
    applies the rule always.
    """
    volume = np.asarray(volume)
    if intensity not in INTENSITY_MODES:
        raise InputError(f"intensity must be one of {INTENSITY_MODES}, got {intensity!r}")
    if intensity == "prepared":
        if volume.dtype != np.uint8:
            raise InputError(f"intensity 'prepared' needs uint8 values 0..255, got dtype {volume.dtype}")
        return volume
    if volume.dtype == np.uint8 and intensity == "auto" and is_ct(modality):
        return volume
    if rescale not in ("data", "window"):
        raise InputError(f"rescale must be 'data' or 'window', got {rescale!r}")
    if volume.dtype == bool or not np.issubdtype(volume.dtype, np.number) or np.iscomplexobj(volume):
        raise InputError(f"cannot prepare intensities of dtype {volume.dtype}")
    if volume.size == 0:
        return volume.astype(np.uint8)
    if count_nonfinite(volume)[0]:
        raise InputError("volume contains NaN or infinite values; fill or mask them before intensity preparation")
    # block by block (:mod:`.array_blocks`): a float64 copy of an int16 volume would be 4x its size
    if is_ct(modality):
        level, width = resolve_window(window)
        return _prepare_blocks(volume, level - width / 2.0, level + width / 2.0, rescale, zero_stays=False)
    lo, hi = _percentiles(volume)
    return _prepare_blocks(volume, lo, hi, rescale, zero_stays=True)


def prepare_image(
    image: np.ndarray,
    kind: str,
    modality: str | None = None,
    window: str | tuple[float, float] | None = None,
    intensity: str = "auto",
) -> np.ndarray:
    """The array a model sees, for an image of any kind: the one preparation the CLI,
    the benchmark and the interactive session share.

    Volumes go through :func:`prepare_intensity` (by modality). Videos and 2D
    images in uint8 (frames, photographs, screenshots) are used as they are;
    other dtypes (a raw 16-bit or float slice) are prepared like a volume. A
    bool image becomes 0/255 uint8.
    """
    if kind not in KINDS:
        raise InputError(f"kind must be one of {KINDS}, got {kind!r}")
    array = np.asarray(image)
    if array.dtype == bool:
        return array.astype(np.uint8) * 255
    if kind != "volume" and array.dtype == np.uint8 and intensity != "raw":
        return array
    return prepare_intensity(array, modality, window, intensity=intensity)


def case_intensity(metadata: dict, override: str | None = None) -> str:
    """The intensity mode of a case: ``override`` when given and not "auto", else what
    its reader recorded (``metadata["intensity"]``, e.g. "prepared" for a MedSAM npz)."""
    if override not in (None, "auto"):
        return str(override)
    return str(metadata.get("intensity", "auto"))


__all__ = ["CT_WINDOWS", "DEFAULT_CT_WINDOW", "INTENSITY_MODES", "PERCENTILES", "case_intensity", "is_ct",
           "prepare_image", "prepare_intensity", "resolve_window"]
