"""How the error parts changed between two runs (:mod:`..evaluation.error_parts`): per task, the mean
change B - A of each part over the pairs scored in both (with parts in both), and a sentence saying it:
"B removes 0.080 of leak and adds 0.020 of under". Changes smaller than :data:`NOTICEABLE` are left out
of the sentence. ``medsam-eval compare`` prints it, ``compare.md`` has it as a table, the two-runs view
shows the pair's."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..evaluation.error_parts import PARTS, part_name
from . import markup as mk
from .paired import ALL, paired_scores

#: a change in a part's share below this is not worth a word
NOTICEABLE = 0.005


def change_sentence(changes: dict[str, float], who: str = "B") -> str:
    """``{"leak": -0.08, "under": 0.02}`` -> ``B removes 0.080 of leak and adds 0.020 of under``."""
    removed = [f"{-v:.3f} of {part_name(p)}" for p, v in changes.items() if v <= -NOTICEABLE]
    added = [f"{v:.3f} of {part_name(p)}" for p, v in changes.items() if v >= NOTICEABLE]
    said = ([f"removes {' and '.join(removed)}"] if removed else []) + ([f"adds {' and '.join(added)}"] if added else [])
    if not said:
        return f"{who} changes no part by {NOTICEABLE} or more"
    return f"{who} " + " and ".join(said)


def part_changes(run_a, run_b) -> pd.DataFrame:
    """Per task, then over all pairs (``(all)``): ``n`` pairs with parts in both runs, ``change_<part>``
    (mean B - A) and ``sentence``; empty when neither run has parts."""
    diffs = {}
    for part in PARTS:
        pairs, _ = paired_scores(run_a, run_b, metric=f"error_{part}")
        diffs[part] = pairs[pairs["paired"]][["task", "case_id", "target_label", "diff"]]
    if diffs[PARTS[0]].empty:
        return pd.DataFrame(columns=["task", "n", *(f"change_{p}" for p in PARTS), "sentence"])
    joined = diffs[PARTS[0]].rename(columns={"diff": PARTS[0]})
    for part in PARTS[1:]:
        joined = joined.merge(diffs[part].rename(columns={"diff": part}), on=["task", "case_id", "target_label"])
    rows = []
    for task, group in [*sorted(joined.groupby(joined["task"].astype(str))), (ALL, joined)]:
        means = {p: float(np.mean(group[p])) for p in PARTS}
        rows.append({"task": task, "n": len(group), **{f"change_{p}": v for p, v in means.items()},
                     "sentence": change_sentence(means)})
    return pd.DataFrame(rows)


def part_change_blocks(changes: pd.DataFrame) -> list[tuple]:
    """``compare.md``'s section on the parts (nothing when neither run has them)."""
    if changes.empty:
        return []
    header = ["task", "pairs", *(part_name(p) for p in PARTS), "in words"]
    rows = [[r["task"], r["n"], *(r[f"change_{p}"] for p in PARTS), r["sentence"]] for _, r in changes.iterrows()]
    return [mk.heading("How the error parts changed (B - A)"),
            mk.paragraph("Mean change of each part's share of the error over the pairs with parts in both runs "
                         "(negative: B has less of it); the changes add up to minus the mean DSC change.", note=True),
            mk.table(header, rows, numeric=[False] + [True] * (len(PARTS) + 1) + [False])]


__all__ = ["NOTICEABLE", "change_sentence", "part_change_blocks", "part_changes"]
