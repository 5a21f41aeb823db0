"""Per-task summaries of a results table, as MedSAM2 reports them (median DSC with IQR).

Rules, applied everywhere in this package:

* A row whose ``status`` is ``"failed"`` counts in ``n_failed`` and never in
  a metric's statistics (it is not scored as 0); an ``"empty_gt"`` row (the
  case holds no voxel of the target) counts in ``n_empty_gt`` only.
* A NaN score of an ok row (e.g. DSC of an empty target that the model also
  left empty) counts in ``<metric>_n_nan`` and is left out, as
  :func:`~napari_medsam_eval.evaluation.aggregate.summarize` does.
* The overall median is given two ways, clearly labelled:
  ``median_of_task_medians`` (each task weighs the same, as in MedSAM2's
  "median DSC across tasks") and ``pooled_median`` (every case weighs the
  same, so large tasks dominate).
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..evaluation.aggregate import summarize
from ..benchmark.schema import STATUS_EMPTY_GT, STATUS_FAILED
from .results import attribute_column, parse_json_cell, slice_dice_values

#: metrics summarised by default (column names of the results table)
DEFAULT_METRICS = ("dice", "nsd")
#: statistics per metric, in table order (``<metric>_<stat>`` columns)
METRIC_STATS = ("n", "n_nan", "median", "q25", "q75", "iqr", "mean")
METRIC_LABELS = {"dice": "DSC", "nsd": "NSD", "iou": "IoU", "hd95": "HD95"}


def natural_key(text: object) -> tuple:
    """Sort key that puts ``task_2`` before ``task_10``."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part.lower())
                 for part in re.split(r"(\d+)", str(text)) if part)


def ok_rows(table: pd.DataFrame) -> pd.Series:
    """Boolean mask of the rows that were scored (status ``ok``)."""
    return table["status"].eq("ok")


def _grouped(table: pd.DataFrame, by: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """``table`` with a column for each key of ``by`` (attributes pulled out of ``attributes``)."""
    keys = list(by)
    table = table.copy()
    for key in keys:
        table[key] = attribute_column(table, key).astype(str)
    return table, keys


def metric_summary(values: Iterable[float], prefix: str) -> dict:
    """:func:`summarize` of ``values`` as ``<prefix>_<stat>`` entries."""
    summary = summarize(np.asarray(list(values), dtype=float))
    return {f"{prefix}_{stat}": summary[stat] for stat in METRIC_STATS}


def summarize_tasks(table: pd.DataFrame, by: Sequence[str] = ("task",),
                    metrics: Sequence[str] = DEFAULT_METRICS) -> pd.DataFrame:
    """One row per group of ``by``: ``n`` (rows), ``n_ok``, ``n_failed``, ``n_empty_gt`` and ``<metric>_<stat>``.

    ``by`` names columns of the table or keys of the rows' ``attributes``
    (``by=("task", "difficulty")`` splits SUN-SEG into easy and hard). Groups
    are in natural order of their keys (``task_2`` before ``task_10``).
    """
    table, keys = _grouped(table, by)
    rows = []
    for group, part in table.groupby(keys, sort=True, dropna=False):
        group = group if isinstance(group, tuple) else (group,)
        ok = ok_rows(part)
        row = dict(zip(keys, group))
        empty = part["status"].eq(STATUS_EMPTY_GT)
        row.update(n=int(len(part) - empty.sum()), n_ok=int(ok.sum()), n_failed=int((~ok & ~empty).sum()),
                   n_empty_gt=int(empty.sum()))
        for metric in metrics:
            row.update(metric_summary(part.loc[ok, metric], metric))
        rows.append(row)
    columns = keys + ["n", "n_ok", "n_failed", "n_empty_gt"] + [f"{m}_{s}" for m in metrics for s in METRIC_STATS]
    rows.sort(key=lambda row: tuple(natural_key(row[k]) for k in keys))
    return pd.DataFrame(rows, columns=columns)


def overall_summary(table: pd.DataFrame, by: Sequence[str] = ("task",),
                    metrics: Sequence[str] = DEFAULT_METRICS) -> pd.DataFrame:
    """One row per metric: the median of the group medians and the pooled median over all cases.

    Columns: ``n_tasks`` (groups with at least one score),
    ``median_of_task_medians`` with ``q25``/``q75`` of the task medians, and
    ``pooled_n``, ``pooled_median``, ``pooled_q25``, ``pooled_q75``,
    ``pooled_mean`` over every scored row.
    """
    tasks = summarize_tasks(table, by=by, metrics=metrics)
    ok = ok_rows(table)
    rows = []
    for metric in metrics:
        medians = tasks[f"{metric}_median"].to_numpy(dtype=float)
        across = summarize(medians)
        pooled = summarize(table.loc[ok, metric].to_numpy(dtype=float))
        rows.append({
            "metric": metric, "n_tasks": across["n"], "median_of_task_medians": across["median"],
            "task_medians_q25": across["q25"], "task_medians_q75": across["q75"],
            "pooled_n": pooled["n"], "pooled_median": pooled["median"], "pooled_q25": pooled["q25"],
            "pooled_q75": pooled["q75"], "pooled_mean": pooled["mean"],
        })
    return pd.DataFrame(rows).set_index("metric")


def failed_cases(table: pd.DataFrame) -> pd.DataFrame:
    """The failed rows: case, task, target and the error message."""
    columns = [c for c in ("case_id", "task", "target_label", "label_name", "target_labels", "error") if c in table]
    return table.loc[table["status"].eq(STATUS_FAILED), columns].reset_index(drop=True)


def worst_cases(table: pd.DataFrame, k: int = 5, metric: str = "dice") -> pd.DataFrame:
    """The ``k`` scored rows with the lowest ``metric`` (NaN scores excluded), lowest first."""
    scored = table[ok_rows(table) & table[metric].notna()]
    return scored.sort_values([metric, "task", "case_id"], kind="stable").head(max(int(k), 0)).reset_index(drop=True)


def slice_dice_summary(row: pd.Series) -> dict:
    """Per-slice DSC of one row with its minimum and the slice where it occurs."""
    values = slice_dice_values(row.get("slice_dice"))
    finite = np.where(np.isfinite(values))[0]
    if finite.size == 0:
        return {"values": values, "min": float("nan"), "argmin": None}
    argmin = int(finite[np.argmin(values[finite])])
    return {"values": values, "min": float(values[argmin]), "argmin": argmin}


def row_stops(row: pd.Series | dict) -> list[dict]:
    """Where each propagation direction of a row ended (the ``stops`` column; [] for older runs)."""
    stops = parse_json_cell(row.get("stops"), [])
    return [s for s in stops if isinstance(s, dict)] if isinstance(stops, list) else []


def stops_text(row: pd.Series | dict) -> str:
    """``up: brightness changed at 17; down: end reached`` - one row's stops, short
    (:data:`~napari_medsam_eval.propagation.stop_words.STOP_LABELS`)."""
    from ..propagation.stop_words import STOP_LABELS

    parts = []
    for stop in row_stops(row):
        where = "" if stop.get("at") is None else f" at {stop['at']}"
        reason = str(stop.get("reason"))
        parts.append(f"{stop.get('direction')}: {STOP_LABELS.get(reason, reason)}{where}")
    return "; ".join(parts) or "n/a"


def stop_reason_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Per task: how many propagation directions ended by each reason (scored rows)."""
    counts: dict[tuple[str, str], int] = {}
    for _, row in table[ok_rows(table)].iterrows():
        for stop in row_stops(row):
            key = (str(row["task"]), str(stop.get("reason")))
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return pd.DataFrame(columns=["task"])
    frame = pd.Series(counts).unstack(fill_value=0)
    frame.index.name = "task"
    return frame.reset_index()
