"""The report's "Prompt sensitivity" section (protocol option ``sensitivity``).

Only a run whose rows hold ``sens_*`` columns gets it; :func:`sensitivity_blocks`
returns nothing otherwise. Per task: the cases, the runs per case, and the
medians over cases of each case's DSC spread (max - min over the perturbed
prompts), lowest and median DSC.
"""
from __future__ import annotations

import pandas as pd

from . import markup as mk

HEADER = ["task", "n", "runs per case", "median spread (max - min)", "median of lowest DSC",
          "median of median DSC", "largest spread", "case with it"]


def sensitivity_table(table: pd.DataFrame) -> pd.DataFrame:
    """One line per task over its ok rows with a sensitivity result (empty when there are none)."""
    if "sens_spread" not in table:
        return pd.DataFrame(columns=HEADER)
    rows = table[table["status"].eq("ok") & table["sens_spread"].notna()]
    out = []
    for task, part in rows.groupby("task", sort=True):
        widest = part.loc[part["sens_spread"].idxmax()]
        runs = sorted({int(v) for v in part["sens_runs"].dropna()})
        out.append([task, len(part), "/".join(str(v) for v in runs), float(part["sens_spread"].median()),
                    float(part["sens_dice_min"].median()), float(part["sens_dice_median"].median()),
                    float(widest["sens_spread"]), str(widest["case_id"])])
    return pd.DataFrame(out, columns=HEADER)


def sensitivity_blocks(table: pd.DataFrame) -> list[tuple]:
    """The section's blocks, or none when the run did not ask for sensitivity."""
    summary = sensitivity_table(table)
    if summary.empty:
        return []
    return [
        mk.heading("Prompt sensitivity"),
        mk.paragraph("Each target's prompt was given again N times, perturbed (boxes shifted and scaled by the "
                     "box-jitter rule, points moved a few pixels; seeded), and segmented as the prompt was. A "
                     "small spread: the result does not hang on the prompt's exact placement; a large one: "
                     "it does. The DSC columns of the other sections are the unperturbed prompt's."),
        mk.table(HEADER, summary.values.tolist(), numeric=[False, True, False, True, True, True, True, False]),
    ]
