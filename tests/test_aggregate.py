"""Aggregation: hand-computed medians, quartiles and means, NaN and inf rules."""
from __future__ import annotations

import math

import numpy as np
import pytest

from napari_medsam_eval.evaluation.aggregate import SUMMARY_KEYS, format_median_iqr, summarize, summarize_groups


def test_summarize_by_hand():
    # sorted 1, 2, 4, 10: q25 at position 0.75 -> 1.75, median 3, q75 at 2.25 -> 5.5
    summary = summarize([4, 1, 10, 2])
    assert tuple(summary) == SUMMARY_KEYS
    assert summary["n"] == 4 and summary["n_nan"] == 0 and summary["n_inf"] == 0
    assert summary["median"] == 3.0
    assert summary["q25"] == pytest.approx(1.75) and summary["q75"] == pytest.approx(5.5)
    assert summary["iqr"] == pytest.approx(3.75) and summary["mean"] == pytest.approx(4.25)


def test_summarize_ignores_nan_and_accepts_arrays():
    summary = summarize(np.array([[0.5, np.nan], [0.9, 0.7]]))
    assert summary["n"] == 3 and summary["n_nan"] == 1
    assert summary["median"] == 0.7 and summary["mean"] == pytest.approx(0.7)
    assert summary["q25"] == pytest.approx(0.6) and summary["q75"] == pytest.approx(0.8)


def test_summarize_matches_numpy_linear_percentiles():
    values = np.random.default_rng(0).random(101)
    summary = summarize(values.tolist())
    for key, q in [("q25", 25), ("median", 50), ("q75", 75)]:
        assert summary[key] == np.percentile(values, q)
    assert summary["mean"] == pytest.approx(values.mean())


def test_summarize_empty_and_all_nan():
    for values in ([], [math.nan, math.nan]):
        summary = summarize(values)
        assert summary["n"] == 0 and summary["n_nan"] == len(values)
        assert all(math.isnan(summary[key]) for key in ("median", "q25", "q75", "iqr", "mean"))
    assert format_median_iqr(summarize([])) == "n/a"


def test_summarize_with_inf_hd95():
    # sorted 1, 2, 3, inf: median 2.5, q75 at position 2.25 lies between 3 and inf
    summary = summarize([1.0, math.inf, 3.0, 2.0])
    assert summary["n_inf"] == 1 and summary["n"] == 4
    assert summary["median"] == 2.5 and summary["q25"] == pytest.approx(1.75)
    assert summary["q75"] == math.inf and summary["mean"] == math.inf
    assert math.isnan(summarize([math.inf, math.inf])["iqr"])


def test_groups_and_format():
    groups = summarize_groups({"liver": [0.9, 0.8, 0.95], "lesion": [0.5]})
    assert groups["liver"]["median"] == 0.9 and groups["lesion"]["iqr"] == 0.0
    assert format_median_iqr(groups["liver"], digits=2) == "0.90 [0.85, 0.93]"
