"""Report figures as PNG files, drawn with matplotlib's Agg canvas.

Figures are built with :class:`matplotlib.figure.Figure` and never through
``pyplot``, so no window opens, no global backend is switched (napari's Qt
backend is left alone when this runs inside the viewer) and nothing leaks
between calls. Every PNG is written to a temporary file and renamed.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..benchmark.schema import is_missing, labels_text
from ..core.palette import (ERROR_PART_COLORS, WHITE, REPORT_CATEGORIES, REPORT_MARK, REPORT_POINTS, REPORT_PROMPT, REPORT_REFERENCE,
                            REPORT_SERIES, REPORT_STOP)
from ..evaluation.interaction_effort import curve_summary
from .stats import METRIC_LABELS, natural_key, ok_rows, row_stops, slice_dice_summary
from ..core.temp_files import temporary_beside

DPI = 120
BOX_COLOR = REPORT_SERIES
POINT_COLOR = REPORT_POINTS


def _new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Write ``figure`` as PNG to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = temporary_beside(path.with_name(path.stem), suffix=".png")
    os.close(handle)
    try:
        figure.savefig(temp, format="png")
        os.replace(temp, path)
    finally:
        Path(temp).unlink(missing_ok=True)
    return path


def _tick_style(labels: Sequence[str]) -> dict:
    """Slanted tick labels when there are many or long ones."""
    slanted = len(labels) > 6 or max((len(str(t)) for t in labels), default=0) > 14
    return {"rotation": 35, "ha": "right", "rotation_mode": "anchor"} if slanted else {}


def _jitter(rng: np.random.Generator, n: int, width: float = 0.18) -> np.ndarray:
    return rng.uniform(-width, width, size=n)


def plot_task_boxes(table: pd.DataFrame, path: str | Path, metric: str = "dice", by: str = "task",
                    title: str | None = None, seed: int = 0) -> Path:
    """One box per task with every case as a jittered point, as MedSAM2's Fig. 2a (failed rows left out)."""
    scored = table[ok_rows(table) & np.isfinite(table[metric])]
    groups = sorted(scored[by].astype(str).unique(), key=natural_key)
    data = [scored.loc[scored[by].astype(str) == g, metric].to_numpy(dtype=float) for g in groups]
    figure = _new_figure(max(5.0, 0.55 * len(groups) + 2.0), 4.5)
    axes = figure.add_subplot()
    rng = np.random.default_rng(seed)
    if groups:
        axes.boxplot(data, positions=np.arange(1, len(groups) + 1), widths=0.6, showfliers=False,
                     patch_artist=True, boxprops={"facecolor": BOX_COLOR, "alpha": 0.35},
                     medianprops={"color": REPORT_REFERENCE, "linewidth": 1.5})
        for position, values in enumerate(data, start=1):
            axes.scatter(position + _jitter(rng, values.size), values, s=9, color=POINT_COLOR, alpha=0.6,
                         linewidths=0, zorder=3)
        axes.set_xticks(np.arange(1, len(groups) + 1))
        axes.set_xticklabels([f"{g}\n(n={d.size})" for g, d in zip(groups, data)], fontsize=8,
                             **_tick_style(groups))
    else:
        axes.text(0.5, 0.5, "no scored cases", ha="center", va="center", transform=axes.transAxes)
    label = METRIC_LABELS.get(metric, metric)
    if metric in ("dice", "nsd", "iou"):
        axes.set_ylim(-0.02, 1.02)
    axes.set_ylabel(label)
    axes.grid(axis="y", alpha=0.3)
    axes.set_title(title or f"{label} per {by}")
    return save_figure(figure, path)


def plot_error_parts(parts: pd.DataFrame, path: str | Path) -> Path:
    """One horizontal bar per task (rows of ``report.error_section.task_parts``): each error part's mean
    stacked, so a bar ends at 1 - the task's mean DSC."""
    shown = parts[parts["n"] > 0]
    figure = _new_figure(7.0, max(2.2, 0.45 * len(shown) + 1.4))
    axes = figure.add_subplot()
    names = list(ERROR_PART_COLORS)
    order = [p for p in ("leak", "off_target", "over", "missed_slices", "under") if p in names]
    positions = np.arange(len(shown))[::-1]
    left = np.zeros(len(shown))
    for part in order:
        values = shown[part].to_numpy(dtype=float)
        axes.barh(positions, values, left=left, color=ERROR_PART_COLORS[part], edgecolor=WHITE, linewidth=0.5,
                  label=part.replace("_", " "))
        left += values
    axes.set_yticks(positions)
    axes.set_yticklabels([f"{t} (n={n})" for t, n in zip(shown["task"], shown["n"])], fontsize=8)
    axes.set_xlim(0, max(0.05, float(left.max(initial=0.0)) * 1.05))
    axes.set_xlabel("mean share of the error (the bar's length: 1 - mean DSC)")
    figure.legend(loc="outside lower center", fontsize=7, ncols=len(order))
    axes.grid(axis="x", alpha=0.3)
    axes.set_title("Why it failed: each task's error split into parts")
    return save_figure(figure, path)


def plot_slice_dice(row: pd.Series, path: str | Path) -> Path:
    """Per-slice (volume, along z) or per-frame (video, along t) DSC of one case, the prompt slice marked."""
    summary = slice_dice_summary(row)
    values = summary["values"]
    figure = _new_figure(6.0, 3.0)
    axes = figure.add_subplot()
    axis_name = "frame (t)" if str(row.get("kind")) == "video" else "slice (z)"
    if values.size:
        index = np.arange(values.size)
        axes.plot(index, values, marker="o", markersize=3, linewidth=1.2, color=BOX_COLOR)
        prompt = row.get("prompt_slice")
        if not is_missing(prompt):
            axes.axvline(float(prompt), color=REPORT_PROMPT, linestyle="--", linewidth=1, label="prompt")
            axes.legend(loc="lower right", fontsize=8)
        if summary["argmin"] is not None:
            axes.scatter([summary["argmin"]], [summary["min"]], color=REPORT_MARK, zorder=4, s=20)
        for stop in row_stops(row):  # where each direction stopped, and why
            if stop.get("at") is not None:
                axes.axvline(float(stop["at"]), color=REPORT_STOP, linestyle=":", linewidth=1)
                axes.annotate(str(stop.get("reason")), (float(stop["at"]), 0.02), fontsize=7, color=REPORT_STOP,
                              rotation=90, va="bottom", ha="right")
    else:
        axes.text(0.5, 0.5, "no per-slice DSC recorded", ha="center", va="center", transform=axes.transAxes)
    axes.set_ylim(-0.02, 1.02)
    axes.set_xlabel(axis_name)
    axes.set_ylabel("DSC")
    axes.grid(alpha=0.3)
    dice = row.get("dice")
    axes.set_title(f"{row.get('case_id')} - {row.get('task')} (label {labels_text(row)}): DSC {dice:.3f}",
                   fontsize=9)
    return save_figure(figure, path)


def plot_paired_differences(pairs: pd.DataFrame, comparison: pd.DataFrame, path: str | Path,
                            metric: str = "dice", names: Sequence[str] = ("A", "B"), seed: int = 0) -> Path:
    """Paired differences (B - A) per task, jittered, with the median and its bootstrap CI."""
    paired = pairs[pairs["paired"]]
    tasks = [t for t in comparison["task"] if t != "(all)"]
    figure = _new_figure(max(5.0, 0.55 * len(tasks) + 2.0), 4.5)
    axes = figure.add_subplot()
    rng = np.random.default_rng(seed)
    for position, task in enumerate(tasks, start=1):
        diffs = paired.loc[paired["task"] == task, "diff"].to_numpy(dtype=float)
        axes.scatter(position + _jitter(rng, diffs.size), diffs, s=9, color=POINT_COLOR, alpha=0.5, linewidths=0)
        row = comparison[comparison["task"] == task].iloc[0]
        if np.isfinite(row["median_diff"]):
            low, high = row["ci_low"], row["ci_high"]
            if np.isfinite(low) and np.isfinite(high):
                axes.errorbar([position], [row["median_diff"]], fmt="none", ecolor=REPORT_MARK, capsize=4,
                              yerr=[[row["median_diff"] - low], [high - row["median_diff"]]], zorder=4)
            axes.scatter([position], [row["median_diff"]], marker="D", color=REPORT_MARK, s=25, zorder=5)
    axes.axhline(0.0, color=REPORT_REFERENCE, linewidth=0.8)
    axes.set_xticks(np.arange(1, len(tasks) + 1))
    axes.set_xticklabels(tasks, fontsize=8, **_tick_style(tasks))
    label = METRIC_LABELS.get(metric, metric)
    axes.set_ylabel(f"{label}: {names[1]} - {names[0]}")
    level = int(round(100 * comparison.attrs.get("confidence", 0.95)))
    axes.set_title(f"Paired {label} difference per task\nred: median and {level}% bootstrap CI", fontsize=10)
    axes.grid(axis="y", alpha=0.3)
    return save_figure(figure, path)


def plot_dsc_vs_interactions(curves: dict[str, np.ndarray], path: str | Path) -> Path:
    """DSC after 0..K interactions per task, as the DSC-vs-clicks curves of RITM / SimpleClick.

    ``curves``: task -> (cases, K + 1) DSC array (:func:`napari_medsam_eval.evaluation.interaction_effort.curves_by_task`).
    Per task: the median (solid, with markers), the IQR as a band and the mean (dashed), one colour.
    """
    figure = _new_figure(6.0, 4.0)
    axes = figure.add_subplot()
    colors = [REPORT_CATEGORIES[i % len(REPORT_CATEGORIES)] for i in range(len(curves))]
    steps = 0
    for (task, values), color in zip(sorted(curves.items(), key=lambda item: natural_key(item[0])), colors):
        summary = curve_summary(values)
        x = summary["interactions"].to_numpy()
        steps = max(steps, int(x[-1]) if x.size else 0)
        axes.fill_between(x, summary["q25"], summary["q75"], color=color, alpha=0.2, linewidth=0)
        axes.plot(x, summary["median"], marker="o", markersize=3, linewidth=1.5, color=color,
                  label=f"{task} (n={values.shape[0]})")
        axes.plot(x, summary["mean"], linestyle="--", linewidth=1, color=color)
    axes.set_xlim(-0.2, steps + 0.2)
    axes.set_xticks(np.arange(steps + 1))
    axes.set_ylim(-0.02, 1.02)
    axes.set_xlabel("interactions (0 = first prompt and its propagation)")
    axes.set_ylabel("DSC")
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right", fontsize=8)
    axes.set_title("DSC vs interactions: median (band: IQR; dashed: mean)", fontsize=10)
    return save_figure(figure, path)
