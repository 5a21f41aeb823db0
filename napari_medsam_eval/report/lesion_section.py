"""The report's "Lesions, one by one" section: which lesions were found and which missed, by size.

Only a run with a target taken lesion by lesion (``--targets "NAME=V:lesions"``) gets it; the rule that
matched and sized its lesions (:class:`~napari_medsam_eval.evaluation.lesions.LesionRule`, the run's
``lesions`` options) is stated first. Per task: true lesions, found, missed, false positives (predicted
lesions matching none), detection F1 over the task's lesions together, the mean lesion DSC and the
recall of each size; then every missed lesion, small ones first, with the slices to look at.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from ..benchmark.lesion_table import lesion_table
from ..evaluation.lesions import FALSE_POSITIVE, FOUND, MISSED, SIZES, LesionRule
from . import markup as mk
from .stats import natural_key

#: missed lesions listed at most
MAX_MISSED = 30
TASK_HEADER = ["task", "true lesions", "found", "missed", "false positives", "detection F1", "mean lesion DSC",
               *(f"recall {size}" for size in SIZES)]


def lesion_summary(lesions: pd.DataFrame) -> pd.DataFrame:
    """Per task: the counts, F1 (``2 TP / (2 TP + FP + FN)`` over the task's lesions), mean DSC of its true
    lesions (missed ones 0) and each size's recall as ``found/total`` (``-`` where there is none)."""
    out = []
    for task in sorted(set(lesions["task"].astype(str)), key=natural_key):
        part = lesions[lesions["task"].astype(str) == task]
        true = part[part["source"] == "true"]
        found, missed = int((true["status"] == FOUND).sum()), int((true["status"] == MISSED).sum())
        false = int((part["status"] == FALSE_POSITIVE).sum())
        f1 = 1.0 if found + false + missed == 0 else 2 * found / (2 * found + false + missed)
        recall = []
        for size in SIZES:
            of_size = true[true["size"] == size]
            recall.append(f"{int((of_size['status'] == FOUND).sum())}/{len(of_size)}" if len(of_size) else "-")
        out.append([task, len(true), found, missed, false, f1,
                    float(true["dice"].mean()) if len(true) else float("nan"), *recall])
    return pd.DataFrame(out, columns=TASK_HEADER)


def missed_lesions(lesions: pd.DataFrame) -> pd.DataFrame:
    """The true lesions missed, small ones first (then by volume, then case)."""
    missed = lesions[(lesions["source"] == "true") & (lesions["status"] == MISSED)].copy()
    order = {size: i for i, size in enumerate(SIZES)}
    missed["_size"] = missed["size"].map(lambda s: order.get(s, len(SIZES)))
    return missed.sort_values(["_size", "volume_ml", "case_id"], kind="stable").drop(columns="_size")


def rule_of(manifest: dict[str, Any]) -> LesionRule:
    """The run's lesion rule (its manifest's ``config.lesions``; the defaults when it has none)."""
    options = (manifest.get("config") or {}).get("lesions") or {}
    try:
        return LesionRule(**options)
    except (TypeError, ValueError):
        return LesionRule()


def _slices(row: pd.Series) -> str:
    first, last = row["first_slice"], row["last_slice"]
    if pd.isna(first):
        return ""
    return f"{int(first)}" if first == last else f"{int(first)}-{int(last)}"


def lesion_blocks(table: pd.DataFrame, manifest: dict[str, Any]) -> list[tuple]:
    """The section's blocks, or none when no target was taken lesion by lesion."""
    lesions = lesion_table(table)
    if lesions.empty:
        return []
    summary = lesion_summary(lesions)
    blocks = [mk.heading("Lesions, one by one"),
              mk.paragraph(rule_of(manifest).describe() + ". Detection F1 is 2 TP / (2 TP + FP + FN) over the "
                           "task's lesions; the mean lesion DSC counts a missed lesion as 0; recall per size is "
                           "found/total. Every lesion is in lesions.csv.", note=True),
              mk.table(TASK_HEADER, summary.values.tolist(), numeric=[False] + [True] * (len(TASK_HEADER) - 1))]
    missed = missed_lesions(lesions)
    blocks.append(mk.heading(f"Missed lesions, by size ({len(missed)})", 3))
    if missed.empty:
        return blocks + [mk.paragraph("None: every true lesion was found.")]
    rows = [[r["case_id"], r["task"], int(r["number"]), r["size"] or "-",
             "" if pd.isna(r["volume_ml"]) else round(float(r["volume_ml"]), 3), _slices(r),
             "" if pd.isna(r["largest_slice"]) else int(r["largest_slice"])]
            for _, r in missed.head(MAX_MISSED).iterrows()]
    blocks.append(mk.table(["case", "task", "lesion", "size", "mL", "slices", "largest on slice"], rows,
                           numeric=[False, False, True, False, True, False, True]))
    if len(missed) > MAX_MISSED:
        blocks.append(mk.paragraph(f"... and {len(missed) - MAX_MISSED} more (lesions.csv).", True))
    return blocks


__all__ = ["lesion_blocks", "lesion_summary", "missed_lesions", "rule_of"]
