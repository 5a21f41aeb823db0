"""Two corrections runs side by side: the effort part of ``medsam-eval compare``.

When both runs hold DSC-vs-interactions curves (the ``corrections`` protocol, e.g. box
corrections as A and painted ones as B), the comparison adds per task and run: what
the corrections were, the median DSC after 0, 1, ..., K interactions and the median
NoC@80/85/90 (K + 1 = not reached, :mod:`napari_medsam_eval.evaluation.interaction_effort`). The paired table of
the final DSC stays as it is: it compares the DSC after the last interaction.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..evaluation.interaction_effort import NOC_THRESHOLDS, correction_tools, curves_by_task, format_noc, noc
from . import markup as mk


def effort_comparison(a: pd.DataFrame, b: pd.DataFrame) -> tuple[list[str], list[list]]:
    """Header and rows (two per task both runs have curves for, A then B); no rows without curves."""
    header = ["task", "run", "n", "corrections given", "median DSC after 0, 1, ..., K"]
    header += [f"median NoC@{t:.2f}" for t in NOC_THRESHOLDS]
    curves_a, curves_b = curves_by_task(a), curves_by_task(b)
    tools = {"A": correction_tools(a), "B": correction_tools(b)}
    rows: list[list] = []
    for task in sorted(set(curves_a) & set(curves_b)):
        for run, curves in (("A", curves_a[task]), ("B", curves_b[task])):
            k = curves.shape[1] - 1
            medians = " ".join(f"{v:.3f}" for v in np.nanmedian(curves, axis=0))
            nocs = [format_noc(float(np.median([noc(c, t) for c in curves])), k) for t in NOC_THRESHOLDS]
            rows.append([task, run, int(curves.shape[0]), tools[run].get(task) or "none", medians, *nocs])
    return header, rows


def effort_blocks(a: pd.DataFrame, b: pd.DataFrame) -> list[tuple]:
    """The compare report's effort section (empty unless both runs hold curves)."""
    header, rows = effort_comparison(a, b)
    if not rows:
        return []
    return [mk.heading("Effort (corrections): A and B", 2),
            mk.table(header, rows, numeric=[False, False, True, False, False] + [True] * len(NOC_THRESHOLDS)),
            mk.paragraph("Median over each run's cases of the task (not paired); NoC counts K + 1 when a case never "
                         "reaches the threshold within K interactions ('> K (not reached)').", note=True)]


__all__ = ["effort_blocks", "effort_comparison"]
