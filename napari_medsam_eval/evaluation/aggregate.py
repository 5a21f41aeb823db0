"""Summaries of per-case scores, kept apart from their computation.

MedSAM2 reports the median with the interquartile range over cases; LiteMedSAM
and most tables also give a mean. :func:`summarize` gives all of them from a
plain list or array (no pandas), with NaN-aware counting:

* NaN marks "no score" (for example per-slice Dice of an empty slice): it is
  counted in ``n_nan`` and left out of every statistic; ``n`` counts the
  scores used.
* ``inf`` is a real score (HD95 when exactly one mask is empty): it is kept,
  counted in ``n_inf``, and makes the mean ``inf``; a percentile is ``inf``
  when it falls at or next to an infinite value, and the IQR is NaN when
  both quartiles are ``inf``.

Percentiles are numpy's default "linear" method (``np.percentile``), written
out so that interpolation next to an ``inf`` gives ``inf`` rather than NaN.
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping

import numpy as np

#: keys of :func:`summarize`'s result, in table order
SUMMARY_KEYS = ("n", "n_nan", "n_inf", "median", "q25", "q75", "iqr", "mean")


def _percentile_linear(sorted_values: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (method 'linear') of already sorted values."""
    position = (sorted_values.size - 1) * q / 100.0
    lo = math.floor(position)
    hi = min(lo + 1, sorted_values.size - 1)
    low, high = float(sorted_values[lo]), float(sorted_values[hi])
    frac = position - lo
    if frac == 0.0 or low == high:
        return low
    if math.isinf(low) or math.isinf(high):  # numpy gives NaN here (inf - inf)
        return float("nan") if math.isinf(low) and math.isinf(high) else (low if math.isinf(low) else high)
    if frac >= 0.5:  # numpy's _lerp switches end at 0.5; same rounding
        return high - (high - low) * (1.0 - frac)
    return low + (high - low) * frac


def summarize(values: Iterable[float]) -> dict[str, float]:
    """Count, median, quartiles, IQR and mean of ``values``, ignoring NaN.

    Returns the keys of :data:`SUMMARY_KEYS`; counts are ints. With no
    non-NaN value every statistic is NaN.
    """
    array = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float).ravel()
    nan = np.isnan(array)
    kept = np.sort(array[~nan])
    result: dict[str, float] = {"n": int(kept.size), "n_nan": int(nan.sum()), "n_inf": int(np.isinf(kept).sum())}
    if kept.size == 0:
        result.update({key: float("nan") for key in SUMMARY_KEYS[3:]})
        return result
    q25, median, q75 = (_percentile_linear(kept, q) for q in (25.0, 50.0, 75.0))
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, the spread is unknown
        iqr = q75 - q25
        mean = float(np.mean(kept))
    result.update({"median": median, "q25": q25, "q75": q75, "iqr": iqr, "mean": mean})
    return result


def summarize_groups(groups: Mapping[str, Iterable[float]]) -> dict[str, dict[str, float]]:
    """:func:`summarize` for each named group (e.g. per target or per label)."""
    return {name: summarize(values) for name, values in groups.items()}


def format_median_iqr(summary: Mapping[str, float], digits: int = 3) -> str:
    """``'0.912 [0.850, 0.941]'``: the median with its quartiles, as MedSAM2 reports."""
    if summary["n"] == 0:
        return "n/a"
    return f"{summary['median']:.{digits}f} [{summary['q25']:.{digits}f}, {summary['q75']:.{digits}f}]"
