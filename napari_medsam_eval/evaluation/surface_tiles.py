"""Surface distances of a large crop computed tile by tile: memory bounded by a window, not by the crop.

Why: :func:`~.surface_distance.compute_surface_distances` transforms the whole crop (the union bounding
box of both masks) at once: two float64 volumes of the crop per direction, both directions at once. When
the masks are spread over the whole case (a lesion target of thousands of small components) the crop is
the case, and that is 32 bytes a voxel, many times the case's decoded size (issue 67).

Here the corner grid is cut into tiles; each tile's surfels (the queries) are measured against the
other surface inside a window, the tile plus a margin on every side, with the same distance transform
(:func:`~.distance_transform.distances_to_features`). A distance is kept when it is at most the margin
(in mm) on every side where the window stops short of the grid: any surfel outside the window is then
farther, so the window's nearest is the grid's nearest, found by the same arithmetic as on the whole
crop. The queries left are measured again with the margin doubled, until none is left (a window that
reaches the grid's edge on every side is the whole grid: nothing is farther). The distances come out in
the whole crop's order (``np.nonzero`` of the grid), so NSD and HD95 sum them exactly as before.

Memory: one tile's codes and one window's transform per direction (:data:`TILE`, the margin), and the
surfels' own arrays; a surface far from the other grows its windows (at worst to the whole grid).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .distance_transform import ENGINE, PARALLEL_MIN_VOXELS, _pool, distances_to_features, threads_allowed

#: the corners of a tile, per axis (3D; a 2D grid uses the last two)
TILE = (16, 96, 96)
#: the first margin, in voxels of the finest axis (doubled for the queries it does not resolve)
FIRST_MARGIN = 8


def corner_codes(padded: np.ndarray) -> np.ndarray:
    """Neighbour code of every corner of a block padded by one voxel before each axis (uint8, shape
    ``padded.shape - 1``): corner ``q`` sees voxels ``q`` and ``q + 1`` of ``padded``; the bits are
    ``surface_distance``'s (first corner highest), one axis at a time, last axis first."""
    codes = padded
    for step, axis in enumerate(reversed(range(padded.ndim))):
        low = [slice(None)] * padded.ndim
        high = list(low)
        low[axis], high[axis] = slice(None, -1), slice(1, None)
        codes = (codes[tuple(low)] << np.uint8(1 << step)) | codes[tuple(high)]
    return codes


def region_codes(crop: np.ndarray, lo: tuple[int, ...], hi: tuple[int, ...]) -> np.ndarray:
    """The neighbour codes of corners ``lo`` to ``hi`` (exclusive) of ``crop``'s corner grid (its shape + 1):
    what the whole grid's codes hold there, from the voxels ``lo - 1`` to ``hi`` (outside ones background)."""
    src = tuple(slice(max(l - 1, 0), min(h, n)) for l, h, n in zip(lo, hi, crop.shape))
    block = crop[src].astype(np.uint8)
    pads = [(s.start - (l - 1), (h - l + 1) - (s.start - (l - 1)) - (s.stop - s.start))
            for s, l, h in zip(src, lo, hi)]
    return corner_codes(np.pad(block, pads) if any(a or b for a, b in pads) else block)


def _border(codes: np.ndarray, full: int) -> np.ndarray:
    return (codes != 0) & (codes != full)


def _tiles(grid: tuple[int, ...]):
    """``(lo, hi)`` of every tile of the grid, in C order."""
    size = TILE[-len(grid):]
    starts = [range(0, n, t) for n, t in zip(grid, size)]
    for lo in itertools.product(*starts):
        yield lo, tuple(min(l + t, n) for l, t, n in zip(lo, size, grid))


def _one_way(queries: np.ndarray, features: np.ndarray, grid: tuple[int, ...], sampling: tuple[float, ...],
             table: np.ndarray, full: int) -> tuple[np.ndarray, np.ndarray]:
    """Distance (mm) of every surfel of ``queries`` (a crop) to the surface of ``features`` (the same crop),
    and each surfel's area, in the grid's ``np.nonzero`` order."""
    finest = min(sampling)
    first = [max(1, math.ceil(FIRST_MARGIN * finest / s)) for s in sampling]
    flats, distances, areas = [], [], []
    for lo, hi in _tiles(grid):
        codes = region_codes(queries, lo, hi)
        border = _border(codes, full)
        if not border.any():
            continue
        where = np.nonzero(border)
        areas.append(table[codes[where]])
        del codes
        flats.append(np.ravel_multi_index(tuple(w + l for w, l in zip(where, lo)), grid))
        found = np.full(where[0].size, np.inf)
        left = np.arange(where[0].size)
        margin = list(first)
        while left.size:
            w_lo = tuple(max(l - m, 0) for l, m in zip(lo, margin))
            w_hi = tuple(min(h + m, n) for h, m, n in zip(hi, margin, grid))
            other = _border(region_codes(features, w_lo, w_hi), full)
            asked = np.zeros(other.shape, dtype=bool)
            asked[tuple(where[a][left] + lo[a] - w_lo[a] for a in range(len(grid)))] = True
            d = distances_to_features(other, asked, sampling)  # (the queries' C order: ``left``'s)
            del other, asked
            whole = all(a == 0 and b == n for a, b, n in zip(w_lo, w_hi, grid))
            limit = math.inf if whole else min(
                [m * s for m, s, a, n in zip(margin, sampling, w_lo, grid) if a > 0]
                + [m * s for m, s, b, n in zip(margin, sampling, w_hi, grid) if b < n] or [math.inf])
            sure = d <= limit
            found[left[sure]] = d[sure]
            left = left[~sure]
            margin = [2 * m for m in margin]
        distances.append(found)
    if not flats:
        return np.zeros(0), np.zeros(0)
    flat = np.concatenate(flats)
    order = np.argsort(flat, kind="stable")
    del flat
    return np.concatenate(distances)[order], np.concatenate(areas)[order]


def tiled_distances(pred_crop: np.ndarray, gt_crop: np.ndarray, sampling: tuple[float, ...],
                    table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(gt to pred, pred to gt, gt areas, pred areas)`` of two bool crops of one shape, as the whole
    crop's transform gives them (module doc); the two directions at once on a helper thread when the
    distance transform releases the GIL (numba) and two threads are allowed."""
    grid = tuple(n + 1 for n in gt_crop.shape)
    full = (1 << (1 << gt_crop.ndim)) - 1
    if ENGINE == "numba" and math.prod(grid) >= PARALLEL_MIN_VOXELS and threads_allowed() >= 2:
        other = _pool().submit(_one_way, pred_crop, gt_crop, grid, sampling, table, full)
        gt_to_pred, gt_areas = _one_way(gt_crop, pred_crop, grid, sampling, table, full)
        pred_to_gt, pred_areas = other.result()
    else:
        gt_to_pred, gt_areas = _one_way(gt_crop, pred_crop, grid, sampling, table, full)
        pred_to_gt, pred_areas = _one_way(pred_crop, gt_crop, grid, sampling, table, full)
    return gt_to_pred, pred_to_gt, gt_areas, pred_areas


__all__ = ["FIRST_MARGIN", "TILE", "corner_codes", "region_codes", "tiled_distances"]
