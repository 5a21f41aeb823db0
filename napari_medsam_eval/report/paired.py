"""Paired comparison of two runs on the same cases (run B against run A).

Rows of the two runs are matched on ``(case_id, task, target_label)``
(:data:`PAIR_KEYS`). A pair is used when both rows are ``ok`` and both scores
are finite; the difference is ``B - A``, rounded to 12 decimals so that
float noise from a CSV round trip is not taken for a real difference.

Per task and over all pairs (the ``(all)`` row, pooled over tasks):

* ``median_diff``: the median of the paired differences (not the difference
  of the medians, which are given too as ``median_a`` and ``median_b``);
* ``ci_low``/``ci_high``: percentile bootstrap confidence interval of that
  median: ``n_boot`` resamples of the pairs with replacement, drawn from
  ``numpy.random.default_rng(seed)`` started afresh for every row, so a
  task's interval does not depend on which other tasks are present;
* ``wilcoxon_p``: two-sided Wilcoxon signed-rank test
  (``scipy.stats.wilcoxon``, zero differences dropped as in Wilcoxon's
  original method). It is NaN, with the reason in ``note``, when every
  difference is zero or fewer than :data:`MIN_WILCOXON` differences are
  non-zero (below 6 the exact two-sided p can never reach 0.05);
* ``n_paired``, ``n_only_a``, ``n_only_b`` (rows without a partner) and
  ``n_unscored`` (matched, but failed or NaN in either run).
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .results import RunResults, load_run
from .stats import natural_key
from ..core.errors import InputError

PAIR_KEYS = ("case_id", "task", "target_label")
MIN_WILCOXON = 6
MIN_BOOTSTRAP = 2
#: the most bootstrap resamples taken (a percentile interval is stable to 3 decimals long before)
MAX_RESAMPLES = 1_000_000
ALL = "(all)"
COLUMNS = ["task", "n_a", "n_b", "n_paired", "n_only_a", "n_only_b", "n_unscored", "median_a", "median_b",
           "median_diff", "ci_low", "ci_high", "mean_diff", "n_b_better", "n_a_better", "wilcoxon_p", "note"]


def check_resamples(n_boot: Any, option: str = "n_boot") -> int:
    """``n_boot`` as a count of bootstrap resamples, 1 to :data:`MAX_RESAMPLES`; an InputError naming ``option``
    otherwise (999999999999 resamples would ask for 8 TB of medians)."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or not 1 <= n_boot <= MAX_RESAMPLES:
        raise InputError(f"{option} must be a whole number of resamples from 1 to {MAX_RESAMPLES:,} (each keeps one "
                         f"median: {MAX_RESAMPLES:,} take {MAX_RESAMPLES * 8 // 10**6} MB), got {n_boot!r}")
    return int(n_boot)


def bootstrap_median_ci(diffs: np.ndarray, n_boot: int = 10_000, confidence: float = 0.95,
                        seed: int = 0, chunk: int = 1000) -> tuple[float, float]:
    """Percentile bootstrap CI of the median of ``diffs`` (NaN, NaN with fewer than 2 values)."""
    diffs = np.asarray(diffs, dtype=float)
    if diffs.size < MIN_BOOTSTRAP or n_boot < 1:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    medians = np.empty(n_boot)
    for start in range(0, n_boot, chunk):
        stop = min(start + chunk, n_boot)
        index = rng.integers(0, diffs.size, size=(stop - start, diffs.size))
        medians[start:stop] = np.median(diffs[index], axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(medians, [alpha, 1.0 - alpha])
    return float(low), float(high)


def wilcoxon_test(diffs: np.ndarray) -> tuple[float, str]:
    """Two-sided Wilcoxon signed-rank p of ``diffs`` and a note when it is NaN (or approximate)."""
    diffs = np.asarray(diffs, dtype=float)
    nonzero = int(np.count_nonzero(diffs))
    if diffs.size == 0:
        return float("nan"), "no pairs"
    if nonzero == 0:
        return float("nan"), "all differences are zero"
    if nonzero < MIN_WILCOXON:
        return float("nan"), f"only {nonzero} non-zero difference(s); Wilcoxon needs >= {MIN_WILCOXON}"
    from scipy import stats as sps  # here: scipy.stats takes half a second to load (the Benchmark dock loads this module)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ties/zeros: scipy switches to the normal approximation and says so
        try:
            result = sps.wilcoxon(diffs, zero_method="wilcox", alternative="two-sided")
        except ValueError as error:  # e.g. a scipy version that refuses the input
            return float("nan"), f"Wilcoxon not computed: {error}"
    return float(result.pvalue), ""


def _keyed(run: RunResults, keys: Sequence[str], metric: str) -> tuple[pd.DataFrame, int]:
    """Rows with the pair keys as typed (``target_label`` ``Int64``: a missing label pairs with a missing
    one) and the score (the last of any duplicate kept), and how many were dropped."""
    table = run.table.copy()
    table["_score"] = table[metric].where(table["status"].eq("ok"))
    table["_task"] = table["task"].astype(str)
    deduped = table.drop_duplicates(list(keys), keep="last")
    return deduped[list(keys) + ["_score", "_task"]], len(table) - len(deduped)


def paired_scores(run_a, run_b, metric: str = "dice", on: Sequence[str] = PAIR_KEYS) -> tuple[pd.DataFrame, list[str]]:
    """Outer join of the two runs on ``on``: columns ``a``, ``b``, ``diff`` (B - A), ``side``, and notes."""
    run_a, run_b = load_run(run_a), load_run(run_b)
    keys = list(on)
    a, dup_a = _keyed(run_a, keys, metric)
    b, dup_b = _keyed(run_b, keys, metric)
    merged = a.merge(b, on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    merged = merged.rename(columns={"_score_a": "a", "_score_b": "b", "_merge": "side"})
    if "task" not in keys:  # group by A's task, else B's
        merged["task"] = merged["_task_a"].fillna(merged["_task_b"])
    merged = merged.drop(columns=["_task_a", "_task_b"])
    merged["side"] = merged["side"].map({"both": "both", "left_only": "only_a", "right_only": "only_b"})
    both = merged["side"].eq("both") & np.isfinite(merged["a"]) & np.isfinite(merged["b"])
    merged["paired"] = both
    merged["diff"] = np.where(both, np.round(merged["b"] - merged["a"], 12), np.nan)
    notes = [f"run {name}: {n} duplicate row(s) on {', '.join(keys)}; the last of each was kept"
             for name, n in (("A", dup_a), ("B", dup_b)) if n]
    return merged.sort_values(keys, kind="stable").reset_index(drop=True), notes


def _compare_group(task: str, part: pd.DataFrame, n_boot: int, confidence: float, seed: int) -> dict:
    paired = part[part["paired"]]
    diffs = paired["diff"].to_numpy(dtype=float)
    low, high = bootstrap_median_ci(diffs, n_boot=n_boot, confidence=confidence, seed=seed)
    p, note = wilcoxon_test(diffs)
    if 0 < diffs.size < MIN_BOOTSTRAP:
        note = "; ".join(filter(None, [note, "one pair: no confidence interval"]))
    nan = float("nan")
    return {
        "task": task,
        "n_a": int(part["side"].isin(["both", "only_a"]).sum()),
        "n_b": int(part["side"].isin(["both", "only_b"]).sum()),
        "n_paired": int(diffs.size),
        "n_only_a": int(part["side"].eq("only_a").sum()),
        "n_only_b": int(part["side"].eq("only_b").sum()),
        "n_unscored": int((part["side"].eq("both") & ~part["paired"]).sum()),
        "median_a": float(np.median(paired["a"])) if diffs.size else nan,
        "median_b": float(np.median(paired["b"])) if diffs.size else nan,
        "median_diff": float(np.median(diffs)) if diffs.size else nan,
        "ci_low": low, "ci_high": high,
        "mean_diff": float(np.mean(diffs)) if diffs.size else nan,
        "n_b_better": int((diffs > 0).sum()), "n_a_better": int((diffs < 0).sum()),
        "wilcoxon_p": p, "note": note,
    }


def compare_runs(run_a, run_b, metric: str = "dice", on: Sequence[str] = PAIR_KEYS, n_boot: int = 10_000,
                 confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Paired comparison B - A per task and over all pairs (the last row, task ``(all)``).

    ``run_a`` and ``run_b`` are run directories, results files, tables or
    :class:`~napari_medsam_eval.report.results.RunResults`. Notes about
    duplicate rows are in ``result.attrs["notes"]``; the pairs themselves
    come from :func:`paired_scores`.
    """
    if metric not in ("dice", "nsd", "iou", "hd95"):
        raise InputError(f"metric must be dice, nsd, iou or hd95, not {metric!r}")
    check_resamples(n_boot)
    pairs, notes = paired_scores(run_a, run_b, metric=metric, on=on)
    groups = sorted(pairs.groupby("task", sort=False), key=lambda item: natural_key(item[0]))
    rows = [_compare_group(task, part, n_boot, confidence, seed) for task, part in groups]
    rows.append(_compare_group(ALL, pairs, n_boot, confidence, seed))
    result = pd.DataFrame(rows, columns=COLUMNS)
    result.attrs.update(metric=metric, notes=notes, n_boot=n_boot, confidence=confidence, seed=seed)
    return result
