"""The report's "Effort (corrections)" section: NoC per task and the DSC-vs-interactions figure.

Only a run whose table holds DSC curves (the ``corrections`` protocol's
``dice_after``) gets it; :func:`effort_blocks` returns nothing otherwise, so
the report of any other run is unchanged. The numbers come from
:mod:`napari_medsam_eval.evaluation.interaction_effort`, which the Benchmark widget reads too.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..evaluation.interaction_effort import NOC_COLUMNS, NOC_THRESHOLDS, curves_by_task, effort_table, format_noc
from . import markup as mk
from .figures import plot_dsc_vs_interactions

#: the figure's file name, under the report's ``figures/``
EFFORT_FIGURE = "dsc_vs_interactions.png"


def effort_header() -> list[str]:
    """Columns of the NoC table: task, n, K, median DSC after 0 and after K, then per threshold NoC and reach."""
    header = ["task", "n", "K", "corrections given", "median DSC after 0", "median DSC after K"]
    for threshold in NOC_THRESHOLDS:
        header += [f"median NoC@{threshold:.2f}", f"reached {threshold:.2f} (% of cases)"]
    return header


def effort_rows(effort: pd.DataFrame) -> list[list]:
    """One line per task of :func:`~napari_medsam_eval.evaluation.interaction_effort.effort_table`, NoC as people read it."""
    rows = []
    for _, row in effort.iterrows():
        k = int(row["interactions"])
        # effort_table names the last step's column by its K ("dice_5"), which may differ between tasks
        cells: list = [row["task"], int(row["n"]), k, row.get("corrections", "") or "none", float(row["dice_0"]),
                       float(row[f"dice_{k}"])]
        for name in NOC_COLUMNS:
            cells += [format_noc(float(row[f"median_{name}"]), k), f"{100 * float(row[f'reached_{name}']):.1f} %"]
        rows.append(cells)
    return rows


def effort_blocks(table: pd.DataFrame, figures: Path, prefix: str) -> list[tuple]:
    """The section's blocks (empty without curves); writes the figure to ``figures``.

    ``prefix`` is the figures folder as the report links it (``"figures"``); the
    figure of an earlier report of other rows is removed when the report is
    swapped in (:mod:`.swap`).
    """
    curves = curves_by_task(table)
    if not curves:
        return []
    header = effort_header()
    plot_dsc_vs_interactions(curves, figures / EFFORT_FIGURE)
    thresholds = ", ".join(f"{t:.2f}" for t in NOC_THRESHOLDS)
    return [
        mk.heading("Effort (corrections)"),
        mk.paragraph(f"DSC after each simulated correction, and NoC: the number of interactions until the DSC "
                     f"reaches {thresholds} (0 = the first prompt and its propagation already does)."),
        mk.table(header, effort_rows(effort_table(table)),
                 numeric=[False, True, True, False] + [True] * (len(header) - 4)),
        mk.paragraph("NoC counts K + 1 when a case never reaches the threshold within K interactions, so a median "
                     "above K reads '> K (not reached)'; 'reached' is the share of cases reaching it within K. "
                     "Failed cases are left out.", note=True),
        mk.paragraph("Median DSC per number of interactions (band: q25-q75 over cases; dashed: mean)"),
        mk.image(f"{prefix}/{EFFORT_FIGURE}", "DSC vs interactions per task"),
    ] + challenge_blocks(table)


def challenge_blocks(table: pd.DataFrame) -> list[tuple]:
    """A ``cvpr25-interactive`` run's scores as the CVPR 2025 challenge reports them (empty for other runs):
    per dataset the script's case figures, then per task its class in the case's map."""
    from ..evaluation.cvpr25 import case_summary, task_summary

    summary = task_summary(table)
    if summary.empty:
        return []
    header = ["DSC-AUC", "NSD-AUC", "final DSC", "final NSD"]
    cases = case_summary(table)
    blocks = [mk.heading("CVPR 2025 interactive scores", 3)]
    if not cases.empty:
        figures = [[r.dataset, r.n, r.dsc_auc, r.nsd_auc, r.dsc_final, r.nsd_final] for r in cases.itertuples()]
        blocks += [mk.table(["dataset", "cases", *header], figures, numeric=[False] + [True] * 5),
                   mk.paragraph("The challenge's figures: each case's one label map scored as its script does (the "
                                "mean over its classes, NSD counted where that mean DSC is above 0.2), means over "
                                "cases.", note=True)]
    rows = [[r.task, r.n, r.dsc_auc, r.nsd_auc, r.dsc_final, r.nsd_final] for r in summary.itertuples()]
    return blocks + [
        mk.table(["task", "n", *header], rows, numeric=[False] + [True] * 5),
        mk.paragraph("Per task, its class in its case's map (where classes overlap the map holds the higher "
                     "label), means over the task's results, by the challenge script's rules: the AUC over the 5 "
                     "click steps at unit steps (the box step left out; 4 is perfect), NSD at 2 mm, with the npz's "
                     "spacing as stored. Each class's own mask is in the own_* columns (docs/protocols.md).",
                     note=True)]
