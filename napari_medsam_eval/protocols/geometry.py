"""Mask geometry shared by the prompt protocols: boxes, parts, interior points.

All functions take 2D binary masks in array order ``(rows, cols)`` = ``(y, x)``
and return prompt coordinates in the :mod:`napari_medsam_eval.core.prompt`
convention: points ``(x, y)``, boxes ``(x0, y0, x1, y1)`` *inclusive*.
Coordinates are returned as Python ``int`` so they serialise to JSON as is.

The interior point follows Mazurowski et al. 2023
(github.com/mazurowski-lab/segment-anything-medical-evaluation, commit 2775b73,
``prompt_gen_and_exec_v2_allmode.py`` l.262-266): the mask padded by one zero
pixel (so the image border counts as background), OpenCV's L2 distance
transform with the 5x5 chamfer mask, every pixel at the maximum listed in
row-major order, one of them picked with ``randint(0, n)`` from a legacy NumPy
``RandomState``.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Literal

import cv2
import numpy as np
from skimage.measure import label as _sk_label
from ..core.errors import InputError

BoxInt = tuple[int, int, int, int]
DtBackend = Literal["opencv-c", "opencv-ipp"]
DT_BACKENDS: tuple[str, ...] = ("opencv-c", "opencv-ipp")


def _as_binary_2d(mask: np.ndarray, what: str = "mask") -> np.ndarray:
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise InputError(f"{what} must be 2D (rows, cols), got shape {mask.shape}")
    return mask != 0 if mask.dtype != bool else mask


def tight_box(mask: np.ndarray) -> BoxInt | None:
    """Inclusive tight box ``(x0, y0, x1, y1)`` of the nonzero pixels; None when empty.

    Same numbers as ``MaskToBoxSimple`` of Mazurowski et al. and the MedSAM
    box helpers: min column, min row, max column, max row.
    """
    mask = _as_binary_2d(mask)
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(mask.any(axis=0))
    return int(cols[0]), int(rows[0]), int(cols[-1]), int(rows[-1])


def round_half_up(value: float) -> int:
    """Nearest integer, halves rounded up (``floor(v + 0.5)``), unlike Python's ``round``."""
    return int(np.floor(float(value) + 0.5))


def clip_box(box: tuple[float, float, float, float], shape_hw: tuple[int, int]) -> BoxInt:
    """Round a box to integers and clip it to the image ``[0, W-1] x [0, H-1]``.

    The result is never inverted: a box lying wholly outside the image collapses
    onto the nearest edge pixel.
    """
    height, width = int(shape_hw[0]), int(shape_hw[1])
    x0, y0, x1, y1 = (round_half_up(v) for v in box)
    x0, x1 = sorted((x0, x1))
    y0, y1 = sorted((y0, y1))
    x0 = min(max(x0, 0), width - 1)
    x1 = min(max(x1, 0), width - 1)
    y0 = min(max(y0, 0), height - 1)
    y1 = min(max(y1, 0), height - 1)
    return x0, y0, x1, y1


def expand_box(box: tuple[float, float, float, float], margin: float, shape_hw: tuple[int, int], *,
               round_to_pixels: bool = True) -> tuple:
    """Widen an inclusive box by ``margin`` pixels on every side, clipped to the image ``(H, W)``.

    ``round_to_pixels`` (the protocols' rule): the result is rounded half up to
    integer pixels by :func:`clip_box`. Without it (propagation, whose margin may
    be fractional) the widened coordinates are only clipped to ``[0, W-1] x
    [0, H-1]``, keeping their fractions, so a box of integers widened by an
    integer margin is the same either way.
    """
    x0, y0, x1, y1 = box
    widened = (x0 - margin, y0 - margin, x1 + margin, y1 + margin)
    if round_to_pixels:
        return clip_box(widened, shape_hw)
    height, width = shape_hw
    return max(0, widened[0]), max(0, widened[1]), min(width - 1, widened[2]), min(height - 1, widened[3])


def tight_box_3d(mask: np.ndarray) -> tuple[int, int, int, int, int, int] | None:
    """Inclusive 3D box ``(x_min, y_min, z_min, x_max, y_max, z_max)`` of a ``(Z, Y, X)`` mask.

    The order of the CVPR 2024 challenge npz ``boxes`` key read by LiteMedSAM's
    ``CVPR24_LiteMedSAM_infer.py``. None when the mask is empty.
    """
    mask = np.asarray(mask)
    if mask.ndim != 3:
        raise InputError(f"mask must be 3D (Z, Y, X), got shape {mask.shape}")
    mask = mask != 0 if mask.dtype != bool else mask
    zs = np.flatnonzero(mask.any(axis=(1, 2)))
    if zs.size == 0:
        return None
    ys = np.flatnonzero(mask.any(axis=(0, 2)))
    xs = np.flatnonzero(mask.any(axis=(0, 1)))
    return int(xs[0]), int(ys[0]), int(zs[0]), int(xs[-1]), int(ys[-1]), int(zs[-1])


def connected_parts(mask: np.ndarray, connectivity: int = 2) -> tuple[np.ndarray, list[int], list[int]]:
    """Connected parts of a mask, largest first, ordered as Mazurowski et al. order them.

    Returns ``(labels, ids, sizes)``: the ``skimage.measure.label`` map (0 =
    background; ``connectivity=2`` is 8-neighbour in 2D), the part ids sorted
    by pixel count, largest first, and their pixel counts. Their code sorts
    ``(share, label id)`` pairs and reverses the list (v2 l.239-251), so among
    parts of equal size the one with the *higher* label id, i.e. whose first
    pixel comes later in raster order, comes first. No minimum size: a
    1-pixel part is a part.
    """
    mask = _as_binary_2d(mask)
    labels = _sk_label(mask, connectivity=connectivity)
    counts = np.bincount(labels.ravel())
    ids = np.arange(1, counts.size)
    sizes = counts[1:]
    # lexsort: last key is primary -> ascending (size, id); reverse for descending both
    order = np.lexsort((ids, sizes))[::-1]
    return labels, [int(i) for i in ids[order]], [int(s) for s in sizes[order]]


@contextlib.contextmanager
def _ipp(enabled: bool) -> Iterator[None]:
    previous = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(enabled)
    try:
        yield
    finally:
        cv2.ipp.setUseIPP(previous)


def distance_transform(mask: np.ndarray, backend: DtBackend = "opencv-c", crop: bool | None = None) -> np.ndarray:
    """OpenCV L2 5x5-chamfer distance of every foreground pixel to the background.

    The mask is padded by one zero pixel first, so pixels on the image border
    are at distance 1 (Mazurowski et al.'s rule; OpenCV alone treats the
    outside of the image as infinitely far). Returns a float32 array of the
    mask's shape.

    ``backend``: ``"opencv-c"`` switches Intel IPP off for the call (OpenCV's
    portable C chamfer, bit-reproducible on every machine, the previous IPP
    setting is restored afterwards); ``"opencv-ipp"`` switches it on (the
    default of the x86_64 wheels; its last bits differ and depend on the CPU).

    ``crop`` (default: True for ``opencv-c``, False for ``opencv-ipp``):
    compute only inside the foreground's bounding box plus the zero ring. For
    the C chamfer the values equal the full-image ones bit for bit (the chamfer
    distance grows with ``|dx|`` and ``|dy|``, so the nearest zero is always on
    the ring or inside; checked against the full image in the tests), and it is
    much faster for small parts of large images. IPP's float arithmetic gives
    different last bits on a crop, so the IPP path runs on the whole image as
    the original code did.
    """
    if crop is None:
        crop = backend == "opencv-c"
    if backend not in DT_BACKENDS:
        raise InputError(f"dt backend must be one of {DT_BACKENDS}, got {backend!r}")
    mask = _as_binary_2d(mask)
    out = np.zeros(mask.shape, dtype=np.float32)
    box = tight_box(mask)
    if box is None:
        return out
    if crop:
        x0, y0, x1, y1 = box
        window = mask[y0 : y1 + 1, x0 : x1 + 1]
    else:
        x0, y0, x1, y1 = 0, 0, mask.shape[1] - 1, mask.shape[0] - 1
        window = mask
    padded = np.pad(window.astype(np.uint8), 1, mode="constant")
    with _ipp(backend == "opencv-ipp"):
        dist = cv2.distanceTransform(padded, cv2.DIST_L2, 5)
    out[y0 : y1 + 1, x0 : x1 + 1] = dist[1:-1, 1:-1]
    return out


def interior_candidates(mask: np.ndarray, backend: DtBackend = "opencv-c") -> tuple[np.ndarray, np.ndarray]:
    """``(xs, ys)`` of every pixel at the maximal distance, in row-major order.

    Empty for an empty mask.
    """
    mask = _as_binary_2d(mask)
    if not mask.any():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    dist = distance_transform(mask, backend)
    ys, xs = np.nonzero(dist == dist.max())
    return xs, ys


def pick_index(n: int, rng: np.random.RandomState | np.random.Generator | None) -> int:
    """One index in ``range(n)``, drawn as Mazurowski et al. draw it.

    Legacy ``RandomState``: ``rng.randint(0, n)``, exactly their call. For
    ``n == 1`` no draw is made (legacy NumPy returns 0 without touching the
    stream for an empty range; we skip the call so the rule holds whatever the
    generator). A ``Generator`` uses ``rng.integers(0, n)``; ``None`` takes
    the first candidate (deterministic, row-major first).
    """
    if n < 1:
        raise InputError("no candidates to pick from")
    if n == 1 or rng is None:
        return 0
    if isinstance(rng, np.random.Generator):
        return int(rng.integers(0, n))
    return int(rng.randint(0, n))


def interior_point(
    mask: np.ndarray,
    rng: np.random.RandomState | np.random.Generator | None = None,
    backend: DtBackend = "opencv-c",
) -> tuple[int, int, int] | None:
    """The pixel farthest from the background, ``(x, y, n_ties)``; None when empty.

    ``n_ties`` is how many pixels share the maximal distance; one of them is
    picked with :func:`pick_index` (one RNG draw when ``n_ties > 1``).
    """
    xs, ys = interior_candidates(mask, backend)
    n = int(xs.size)
    if n == 0:
        return None
    i = pick_index(n, rng)
    return int(xs[i]), int(ys[i]), n
