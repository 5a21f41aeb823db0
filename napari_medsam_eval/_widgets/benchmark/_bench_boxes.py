"""The benchmark widget's box plot: DSC per task, a box and every case as a point.

:func:`box_data` (pandas, any thread) picks the scored DSC values of each task
from the typed table of the run folder's reader, as the report's box plot does
(failed rows left out); :func:`draw_boxes` draws them on a matplotlib axes.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from napari_medsam_eval.core.palette import PLOT_SERIES, PLOT_SUMMARY
from napari_medsam_eval.report.stats import natural_key
from napari_medsam_eval._widgets.benchmark._bench_items import distinct_names
from napari_medsam_eval._widgets.common._theme import style_axes

#: per task (in natural order), its short name and its scored DSC values
Boxes = tuple[list[np.ndarray], list[str]]


def box_data(table: pd.DataFrame | None) -> Boxes:
    """The DSC values of the ``ok`` rows with a finite DSC, per task, and the tasks' short names."""
    if table is None or table.empty:
        return [], []
    scored = table[table["status"].eq("ok") & np.isfinite(table["dice"].to_numpy(dtype=float))]
    tasks = sorted(scored["task"].astype(str).unique(), key=natural_key)
    data = [scored.loc[scored["task"].astype(str) == t, "dice"].to_numpy(dtype=float) for t in tasks]
    return data, distinct_names(tasks)


def draw_boxes(ax: Axes, boxes: Boxes, text_color: str) -> None:
    """A box per task (IQR, orange median) with every case as a jittered point; a note when there are none."""
    ax.clear()
    style_axes(ax, ax.figure.get_facecolor(), text_color)
    ax.set_ylabel("DSC", fontsize=8, color=text_color)
    ax.set_ylim(-0.05, 1.05)
    data, names = boxes
    if not data:
        ax.text(0.5, 0.5, "no scored cases yet", ha="center", va="center", transform=ax.transAxes,
                color=text_color, fontsize=8)
        ax.set_xticks([])
        return
    positions = np.arange(1, len(data) + 1)
    ax.boxplot(data, positions=positions, widths=0.5, showfliers=False, patch_artist=True,
               boxprops={"facecolor": PLOT_SERIES, "alpha": 0.4, "edgecolor": text_color},
               medianprops={"color": PLOT_SUMMARY, "linewidth": 1.5},
               whiskerprops={"color": text_color}, capprops={"color": text_color})
    rng = np.random.default_rng(0)
    for position, values in zip(positions, data):
        ax.scatter(position + rng.uniform(-0.12, 0.12, values.size), values, s=8,
                   color=text_color, alpha=0.7, linewidths=0, zorder=3)
    ax.set_xticks(positions)
    ax.set_xticklabels([f"{n}\n(n={d.size})" for n, d in zip(names, data)], fontsize=7)


__all__ = ["Boxes", "box_data", "draw_boxes"]
