"""The report's "Why it failed" section: each task's error split into parts (:mod:`..evaluation.error_parts`).

Per task, over its scored results: each part's mean (they add up to ``1 - mean DSC``, shown beside
them and drawn as one stacked bar per task), and how many results each part dominates (``ok`` at
DSC >= 0.9). Then, for each part, the three results where it is largest, with the slices it lies on.
Rows from a run folder made before the parts have none: they are counted as ``n/a``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..evaluation.error_parts import OK, OK_DICE, PART_COLUMNS, PART_MEANINGS, PARTS, parse_where, part_name, ranges_text
from ..benchmark.schema import labels_text
from . import markup as mk
from .figures import plot_error_parts
from .stats import natural_key, ok_rows

#: the figure of each task's parts (under the report's ``figures/``)
ERROR_PARTS_FIGURE = "error_parts.png"

#: results listed per part
WORST_PER_PART = 3
NOT_AVAILABLE = "n/a"


def with_parts(table: pd.DataFrame) -> pd.DataFrame:
    """The scored rows whose parts are known (every ``error_<part>`` a number)."""
    scored = table[ok_rows(table)]
    if scored.empty or not set(PART_COLUMNS) <= set(scored.columns):
        return scored.iloc[0:0]
    return scored[scored[list(PART_COLUMNS)].notna().all(axis=1)]


def task_parts(table: pd.DataFrame) -> pd.DataFrame:
    """Per task: n, mean DSC, 1 - mean DSC, each part's mean, and the count of results by dominant part
    (``n/a``: scored results without parts)."""
    scored, known = table[ok_rows(table)], with_parts(table)
    out = []
    for task in sorted(set(scored["task"].astype(str)), key=natural_key):
        rows = known[known["task"].astype(str) == task]
        entry: dict[str, object] = {"task": task, "n": len(rows),
                                    "mean_dice": float(rows["dice"].mean()) if len(rows) else float("nan")}
        entry["error"] = 1.0 - entry["mean_dice"]
        entry.update({part: float(rows[f"error_{part}"].mean()) if len(rows) else float("nan") for part in PARTS})
        dominant = rows["dominant_error"].astype(str).value_counts()
        entry.update({f"dominant_{key}": int(dominant.get(key, 0)) for key in (OK, *PARTS)})
        entry[f"dominant_{NOT_AVAILABLE}"] = int((scored["task"].astype(str) == task).sum()) - len(rows)
        out.append(entry)
    return pd.DataFrame(out)


def worst_by_part(table: pd.DataFrame, part: str, k: int = WORST_PER_PART) -> pd.DataFrame:
    """The ``k`` results where ``part`` takes the largest share (only those where it is not empty)."""
    known = with_parts(table)
    column = f"error_{part}"
    return known[known[column] > 0].sort_values(column, ascending=False, kind="stable").head(k)


def error_blocks(table: pd.DataFrame, figures: Path, figures_name: str, unit: str = "slices") -> list[tuple]:
    """The section's blocks; writes the stacked bar figure under ``figures``."""
    blocks = [mk.heading("Why it failed"),
              mk.paragraph("Every false-positive and false-negative voxel of a result belongs to one part; a "
                           "part's share is its voxels over 2 TP + FP + FN, so the parts add up to 1 - DSC. "
                           + "; ".join(f"{part_name(p)}: {PART_MEANINGS[p]}" for p in PARTS) + ".", note=True)]
    parts = task_parts(table)
    if parts.empty:
        return blocks + [mk.paragraph("No scored results.")]
    if not parts["n"].any():
        return blocks + [mk.paragraph("n/a: this run's rows hold no error parts (a run folder from before them, "
                                      "with no saved predictions to compute them from).")]
    header = ["task", "n", "1 - mean DSC", *(part_name(p) for p in PARTS)]
    rows = [[r["task"], r["n"], r["error"], *(r[p] for p in PARTS)] for _, r in parts.iterrows()]
    blocks += [mk.paragraph("Each part's mean over the task's scored results:"),
               mk.table(header, rows, numeric=[False] + [True] * (len(header) - 1))]
    keys = [OK, *PARTS] + ([NOT_AVAILABLE] if parts[f"dominant_{NOT_AVAILABLE}"].any() else [])
    counts = [[r["task"], *(r[f"dominant_{key}"] for key in keys)] for _, r in parts.iterrows()]
    blocks += [mk.paragraph(f"Results by their dominant part (the largest share; ok: DSC >= {OK_DICE:g}):"),
               mk.table(["task", *(part_name(k) for k in keys)], counts, numeric=[False] + [True] * len(keys))]
    path = plot_error_parts(parts, figures / ERROR_PARTS_FIGURE)
    blocks += [mk.image(f"{figures_name}/{path.name}", "each task's mean error split into parts")]
    for part in PARTS:
        worst = worst_by_part(table, part)
        if worst.empty:
            continue
        listed = [[r["case_id"], r["task"], labels_text(r), r["dice"], r[f"error_{part}"],
                   ranges_text(parse_where(r.get("error_slices")).get(part, {}).get("ranges", [])) or NOT_AVAILABLE]
                  for _, r in worst.iterrows()]
        blocks += [mk.heading(f"Most {part_name(part)}", 3),
                   mk.table(["case", "task", "label", "DSC", "share", unit], listed,
                            numeric=[False, False, False, True, True, False])]
    return blocks


__all__ = ["error_blocks", "task_parts", "with_parts", "worst_by_part"]
