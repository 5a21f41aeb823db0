"""The CVPR 2025 interactive challenge's scores, as ``CVPR25_iter_eval.py`` computes them.

Per step (the box, then each click): DSC, and NSD at 2 mm where that DSC is above 0.2 (0 otherwise: "NSD
is also low when dice is too low"); the script averages over a case's classes, a run row here holds one
target (the case's figure is the mean of its rows). After the 6 steps: the AUC of DSC and of NSD over the
5 click steps only (``cumulative_trapezoid(dscs[-5:], arange(5))[-1]``: the box step is left out, unit
steps, so a perfect curve scores 4) and the final DSC and NSD.

The script's DSC and NSD are surface-distance's (``SurfaceDice.py``), which ours equal
(:mod:`.surface_distance`). Its spacing is the npz's ``spacing`` as stored: for the MedSAM/CVPR npz files
that is x, y, z beside z, y, x arrays, so the challenge's NSD of an anisotropic volume is measured with its
axes' spacings swapped. ``spacing="as-stored"`` (the protocol's default) reproduces that;
``spacing="array"`` uses each axis's own spacing.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .metrics import compute_dice
from .surface_distance import compute_surface_dice

#: the challenge's NSD tolerance, and the DSC at or below which its NSD is taken as 0
TOLERANCE_MM = 2.0
NSD_MIN_DICE = 0.2
#: the steps the AUC covers (the clicks), and how the spacing is taken
AUC_STEPS = 5
SPACING_RULES = ("as-stored", "array")


def step_scores(pred: np.ndarray, gt: np.ndarray, spacing: Sequence[float]) -> dict[str, float]:
    """One step's ``{"dice", "nsd"}`` by the script's rule (module doc)."""
    dice = float(compute_dice(pred, gt))
    nsd = float(compute_surface_dice(pred, gt, tuple(spacing), TOLERANCE_MM)) if dice > NSD_MIN_DICE else 0.0
    return {"dice": dice, "nsd": nsd}


def auc(values: Sequence[float]) -> float:
    """The script's AUC: the trapezoids under the last :data:`AUC_STEPS` values at unit steps."""
    last = np.asarray(list(values)[-AUC_STEPS:], dtype=float)
    if len(last) < 2:
        return float("nan")
    return float(np.sum((last[1:] + last[:-1]) / 2.0))


def scoring_spacing(case: Any, rule: str = "as-stored") -> tuple[float, ...]:
    """The spacing the NSD is computed with: an npz's ``spacing`` as stored (``as-stored``, the challenge's),
    else the case's spacing in array order."""
    stored = case.metadata.get("spacing_xyz") if rule == "as-stored" else None
    return tuple(float(v) for v in (stored if stored is not None else case.spacing.values))


def columns(dice_steps: Sequence[float], nsd_steps: Sequence[float]) -> dict[str, float]:
    """The row's challenge columns: ``dsc_auc``, ``nsd_auc``, ``dsc_final``, ``nsd_final``."""
    return {"dsc_auc": auc(dice_steps), "nsd_auc": auc(nsd_steps),
            "dsc_final": float(dice_steps[-1]) if len(dice_steps) else float("nan"),
            "nsd_final": float(nsd_steps[-1]) if len(nsd_steps) else float("nan")}


CHALLENGE_COLUMNS = ("dsc_auc", "nsd_auc", "dsc_final", "nsd_final")


def task_summary(table: Any) -> Any:
    """Per task, over its scored rows with the challenge's columns: n and each column's mean (the challenge
    ranks by means over cases); an empty table when no row has them."""
    import pandas as pd

    if not set(CHALLENGE_COLUMNS) <= set(table.columns):
        return pd.DataFrame(columns=["task", "n", *CHALLENGE_COLUMNS])
    rows = table[(table["status"] == "ok") & table["dsc_auc"].notna()]
    if rows.empty:
        return pd.DataFrame(columns=["task", "n", *CHALLENGE_COLUMNS])
    grouped = rows.groupby(rows["task"].astype(str))
    summary = grouped[list(CHALLENGE_COLUMNS)].mean()
    summary.insert(0, "n", grouped.size())
    return summary.reset_index()


def task_lines(table: Any) -> list[str]:
    """``task: CVPR 2025 interactive: DSC-AUC 3.330, NSD-AUC 3.952, final DSC 0.830, final NSD 0.988 (means)``."""
    return [f"{r.task}: CVPR 2025 interactive: DSC-AUC {r.dsc_auc:.3f}, NSD-AUC {r.nsd_auc:.3f}, final DSC "
            f"{r.dsc_final:.3f}, final NSD {r.nsd_final:.3f} (means over {r.n} results)"
            for r in task_summary(table).itertuples()]


__all__ = ["CHALLENGE_COLUMNS", "task_lines", "task_summary","AUC_STEPS", "NSD_MIN_DICE", "SPACING_RULES", "TOLERANCE_MM", "auc", "columns", "scoring_spacing",
           "step_scores"]
