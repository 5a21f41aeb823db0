"""Effort metrics: how many interactions a case needs before its segmentation is good enough.

A run of the ``corrections`` protocol records, per target, the DSC after 0, 1, ..., K
interactions (``dice_after``, a JSON list of K + 1 values: 0 = the first prompt and its
propagation). From it:

* ``NoC@t`` (number of clicks / interactions to reach DSC ``t``, as in RITM, SimpleClick,
  SAM-Med3D): the first i in 0..K with ``dice_after[i] >= t``; **K + 1 when never
  reached** (counted and reported as "not reached", never as K);
* per task: the median NoC, the share of cases reaching each threshold within K, and the
  DSC-vs-interactions curve (mean, median and IQR over the cases at each step).

Core module: no Qt, no napari; the benchmark rows, the report and the Benchmark widget
read these functions.
"""
from __future__ import annotations

import json
import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

#: the thresholds NoC is reported at
NOC_THRESHOLDS: tuple[float, ...] = (0.80, 0.85, 0.90)
#: result columns written by the corrections protocol (NaN / "" for other protocols)
CURVE_COLUMNS = ("dice_after", "nsd_after")
NOC_COLUMNS = tuple(f"noc{round(t * 100)}" for t in NOC_THRESHOLDS)


def noc(curve: Sequence[float], threshold: float) -> int:
    """Interactions needed to reach ``threshold``: the first index whose DSC is >= it,
    ``len(curve)`` (K + 1) when none is."""
    for index, value in enumerate(curve):
        if value is not None and not math.isnan(float(value)) and float(value) >= threshold:
            return index
    return len(curve)


def noc_columns(curve: Sequence[float]) -> dict[str, int]:
    """``{"noc80": ..., "noc85": ..., "noc90": ...}`` of one DSC curve."""
    return {name: noc(curve, t) for name, t in zip(NOC_COLUMNS, NOC_THRESHOLDS)}


def parse_curve(text: Any) -> list[float] | None:
    """A ``dice_after`` cell as a list of floats (None for an empty cell or another protocol's row)."""
    if text is None or (isinstance(text, float) and math.isnan(text)) or text == "":
        return None
    values = json.loads(text) if isinstance(text, str) else list(text)
    return [float("nan") if v is None else float(v) for v in values]


def curves_by_task(table: pd.DataFrame, column: str = "dice_after") -> dict[str, np.ndarray]:
    """Per task, the ``ok`` rows' curves as a (cases, K + 1) array; tasks without curves are left out.

    Rows of one task must have curves of one length (one K per run); a shorter curve (a case
    whose run ended early) is carried forward with its last value.
    """
    if column not in table.columns:
        return {}
    out: dict[str, np.ndarray] = {}
    ok = table[table["status"] == "ok"] if "status" in table.columns else table
    for task, group in ok.groupby("task", sort=True):
        curves = [c for c in (parse_curve(v) for v in group[column]) if c]
        if not curves:
            continue
        steps = max(len(c) for c in curves)
        out[str(task)] = np.array([c + [c[-1]] * (steps - len(c)) for c in curves], dtype=float)
    return out


def curve_summary(curves: np.ndarray) -> pd.DataFrame:
    """Per interaction step: n, mean, median, q25, q75 of the DSC over cases."""
    rows = []
    for step in range(curves.shape[1]):
        values = curves[:, step]
        values = values[np.isfinite(values)]
        if values.size:
            q25, q50, q75 = np.percentile(values, [25, 50, 75])
            rows.append({"interactions": step, "n": int(values.size), "mean": float(values.mean()),
                         "median": float(q50), "q25": float(q25), "q75": float(q75)})
        else:
            rows.append({"interactions": step, "n": 0, "mean": np.nan, "median": np.nan, "q25": np.nan,
                         "q75": np.nan})
    return pd.DataFrame(rows)


def correction_tools(table: pd.DataFrame) -> dict[str, str]:
    """Per task, what the corrections were (the anchors' ``info["correction"]`` of the ``ok`` rows'
    ``prompt`` column, erased slices apart): ``"28 paint, 2 absent"``; {} without a prompt column."""
    if "prompt" not in table.columns or "task" not in table.columns:
        return {}
    ok = table[table["status"] == "ok"] if "status" in table.columns else table
    out: dict[str, str] = {}
    for task, group in ok.groupby("task", sort=True):
        counts: dict[str, int] = {}
        for text in group["prompt"]:
            try:
                anchors = json.loads(text) if isinstance(text, str) and text else []
            except ValueError:
                continue
            for anchor in anchors if isinstance(anchors, list) else []:
                info = (anchor.get("info") or {}) if isinstance(anchor, dict) else {}
                tool = "absent" if info.get("absent") else info.get("correction")
                if tool:
                    counts[tool] = counts.get(tool, 0) + 1
        out[str(task)] = ", ".join(f"{n} {tool}" for tool, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return out


def effort_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per task: n, K, what the corrections were (:func:`correction_tools`), the median DSC after 0
    and after K interactions, and for each threshold the median NoC (K + 1 = not reached) and the
    share of cases that reached it."""
    rows = []
    tools = correction_tools(table)
    for task, curves in curves_by_task(table).items():
        k = curves.shape[1] - 1
        row: dict[str, Any] = {"task": task, "n": int(curves.shape[0]), "interactions": k,
                               "corrections": tools.get(task, ""),
                               "dice_0": float(np.nanmedian(curves[:, 0])),
                               f"dice_{k}": float(np.nanmedian(curves[:, -1]))}
        for name, threshold in zip(NOC_COLUMNS, NOC_THRESHOLDS):
            counts = np.array([noc(c, threshold) for c in curves])
            row[f"median_{name}"] = float(np.median(counts))
            row[f"reached_{name}"] = float(np.mean(counts <= k))
        rows.append(row)
    return pd.DataFrame(rows)


def has_curves(table: pd.DataFrame) -> bool:
    """Whether a results table holds DSC-vs-interactions curves (a corrections run): a non-empty
    ``dice_after`` cell in an ``ok`` row (no curve is parsed)."""
    if "dice_after" not in table.columns:
        return False
    ok = table[table["status"] == "ok"] if "status" in table.columns else table
    cells = ok["dice_after"].dropna().astype(str).str.strip()
    return bool((cells != "").any() and (cells != "[]").any())


def format_noc(value: float, interactions: int) -> str:
    """A NoC for people: ``"3"``, or ``"> 5 (not reached)"`` for K + 1."""
    if value > interactions:
        return f"> {interactions} (not reached)"
    return f"{value:g}"

