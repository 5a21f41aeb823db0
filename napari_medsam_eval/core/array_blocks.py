"""Whole-image passes in bounded memory: one block of slices (rows for a 2D image) at a time.

``np.unique``, ``np.isfinite`` or a float conversion over a whole volume make
temporaries as large as the volume or larger (``np.unique`` copies and sorts it,
``astype(float64)`` of int16 is 4x). The read path of ``info`` and ``segment``
uses these passes instead, so that reading a volume peaks at about twice its
decoded size (:mod:`.decoded_limit`); each temporary is one block of about
:data:`BLOCK_BYTES`.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

#: the size of one block of the input, in bytes (its float64 temporaries are up to 8x this)
BLOCK_BYTES = 1 << 24


def blocks(array: np.ndarray, block_bytes: int = BLOCK_BYTES) -> Iterator[slice]:
    """Slices along the first axis whose blocks hold about ``block_bytes`` each (at least one index)."""
    if array.ndim == 0:
        yield slice(None)
        return
    n = array.shape[0]
    per_index = max(1, array.nbytes // max(n, 1))
    step = max(1, block_bytes // per_index)
    for start in range(0, n, step):
        yield slice(start, min(start + step, n))


def value_counts(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``array`` and how many elements hold each, ascending: ``np.unique(array,
    return_counts=True)`` without a sorted copy of the whole array."""
    array = np.asarray(array)
    if array.dtype in (np.uint8, np.uint16, np.bool_):  # small values: counted directly (bincount makes
        # an intp copy of its input: 8x a small block)
        counts = np.zeros(1 << (8 * array.dtype.itemsize), dtype=np.intp)
        for part in blocks(array, BLOCK_BYTES // 8):
            block = array[part].reshape(-1)
            counts[: int(block.max()) + 1 if block.size else 0] += np.bincount(block)
        present = np.flatnonzero(counts)
        return present.astype(array.dtype), counts[present]
    totals: dict = {}
    for part in blocks(array):
        values, counts = np.unique(array[part], return_counts=True)
        for value, count in zip(values.tolist(), counts.tolist()):
            totals[value] = totals.get(value, 0) + count
    values = np.array(sorted(totals), dtype=array.dtype)
    return values, np.array([totals[v] for v in values.tolist()], dtype=np.intp)


def count_nonfinite(array: np.ndarray) -> tuple[int, int]:
    """(non-finite elements, of which NaN) of a float array; (0, 0) for other dtypes."""
    array = np.asarray(array)
    if not np.issubdtype(array.dtype, np.floating):
        return 0, 0
    bad = nan = 0
    for part in blocks(array):
        block = array[part]
        finite = np.isfinite(block)
        if not finite.all():
            bad += int(finite.size - np.count_nonzero(finite))
            nan += int(np.count_nonzero(np.isnan(block)))
    return bad, nan


def count_where(array: np.ndarray, test) -> int:
    """How many elements ``test(block)`` (a boolean ufunc-like function) is true for, block by block."""
    return sum(int(np.count_nonzero(test(array[part]))) for part in blocks(array))
