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

**One label map per case.** The script scores what a model hands back for a case: one label map
(``segs``), the classes competing for each voxel. Its ``compute_multi_class_dsc`` takes ``segs == c``
against ``gts == c`` for every class ``c`` the truth holds and averages; its NSD gate looks at that
*case* mean (NSD of every class computed where the mean DSC is above 0.2, all 0 otherwise), so a class at
DSC 0.09 still gets its NSD when the case's mean is higher. Where two classes' masks overlap, the map
holds one of them: :func:`class_map` paints the classes in label order, a later (higher) class over an
earlier one, as the challenge's baseline inference writes ``segs`` (SAM-Med3D's CVPR 2025 baseline,
``final_pred[pred != 0] = category_index`` class by class; the CVPR 2024 LiteMedSAM script likewise).
:func:`case_scores` is one step of the script on that map. A row keeps both views: its class in the map
(``dice_after``, ``dsc_auc`` ..., the case's figure is the mean of its rows, the AUC being linear) and
its own mask (``own_*``, NSD gated on the class's own DSC); ``case_*`` is the script's row for the case.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..core.errors import InputError
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


def class_map(masks: Mapping[int, np.ndarray]) -> np.ndarray:
    """The step's one label map: each class's mask painted in label order, a later (higher) class over an
    earlier one where they overlap (module doc); 0 where no class is."""
    if not masks:
        raise InputError("a label map needs at least one class mask")
    keys = sorted(int(k) for k in masks)
    if keys[0] <= 0:
        raise InputError(f"class values must be above 0 (0 is background), got {keys[0]}")
    shapes = {tuple(np.shape(masks[k])) for k in keys}
    if len(shapes) != 1:
        raise InputError(f"the classes' masks differ in shape: {sorted(shapes)}")
    segs = np.zeros(shapes.pop(), dtype=np.min_scalar_type(keys[-1]))
    for key in keys:
        segs[np.asarray(masks[key], bool)] = key
    return segs


def case_scores(segs: np.ndarray, truths: Mapping[int, np.ndarray], spacing: Sequence[float]) -> dict[str, Any]:
    """One step of the script on the case's map ``segs``: ``{"dice", "nsd", "classes": {c: {"dice", "nsd"}}}``,
    the classes those whose truth is not empty (the script's ``gts``' values), the case's DSC and NSD their
    means, NSD counted only where the case's mean DSC is above :data:`NSD_MIN_DICE` (module doc)."""
    classes = [int(k) for k in sorted(truths) if np.any(truths[k])]
    if not classes:
        raise InputError("the case's truth holds no class to score")
    dice = {c: float(compute_dice(segs == c, np.asarray(truths[c], bool))) for c in classes}
    mean = float(np.mean(list(dice.values())))
    gate = mean > NSD_MIN_DICE
    nsd = {c: float(compute_surface_dice(segs == c, np.asarray(truths[c], bool), tuple(spacing), TOLERANCE_MM))
           if gate else 0.0 for c in classes}
    return {"dice": mean, "nsd": float(np.mean(list(nsd.values()))),
            "classes": {c: {"dice": dice[c], "nsd": nsd[c]} for c in classes}}


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
#: the script's row for the case (the same on each of its rows), and the class's own mask's
CASE_COLUMNS = tuple(f"case_{c}" for c in CHALLENGE_COLUMNS)
OWN_COLUMNS = ("own_dice_after", "own_nsd_after", *(f"own_{c}" for c in CHALLENGE_COLUMNS))


def prefixed(prefix: str, dice_steps: Sequence[float], nsd_steps: Sequence[float]) -> dict[str, float]:
    """:func:`columns` under ``prefix`` (``case_``, ``own_``)."""
    return {f"{prefix}{k}": v for k, v in columns(dice_steps, nsd_steps).items()}


def task_summary(table: Any) -> Any:
    """Per task (a class), over its scored rows with the challenge's columns: n and each column's mean, the
    class's scores in its case's map; an empty table when no row has them."""
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


def case_summary(table: Any) -> Any:
    """Per dataset, the script's figures: each case once (its ``case_*`` columns, the mean over its classes in
    its map), n cases and their means, as the challenge ranks; an empty table when no row has them."""
    import pandas as pd

    names = ["dataset", "n", *CHALLENGE_COLUMNS]
    if not set(CASE_COLUMNS) <= set(table.columns):
        return pd.DataFrame(columns=names)
    rows = table[(table["status"] == "ok") & table["case_dsc_auc"].notna()]
    if rows.empty:
        return pd.DataFrame(columns=names)
    cases = rows.drop_duplicates(["dataset", "case_id"])
    grouped = cases.groupby(cases["dataset"].astype(str))
    summary = grouped[list(CASE_COLUMNS)].mean().rename(columns=dict(zip(CASE_COLUMNS, CHALLENGE_COLUMNS)))
    summary.insert(0, "n", grouped.size())
    return summary.reset_index()


def task_lines(table: Any) -> list[str]:
    """Per dataset the script's case figures, then per task its class's:
    ``data: CVPR 2025 interactive (cases as the script scores them): DSC-AUC 3.330, ... (means over 6 cases)``,
    ``data/liver: CVPR 2025 interactive: DSC-AUC 3.330, ... (means over 6 results, the class in its case's map)``."""
    lines = [f"{r.dataset}: CVPR 2025 interactive (cases as the script scores them): DSC-AUC {r.dsc_auc:.3f}, "
             f"NSD-AUC {r.nsd_auc:.3f}, final DSC {r.dsc_final:.3f}, final NSD {r.nsd_final:.3f} "
             f"(means over {r.n} case{'' if r.n == 1 else 's'})" for r in case_summary(table).itertuples()]
    return lines + [f"{r.task}: CVPR 2025 interactive: DSC-AUC {r.dsc_auc:.3f}, NSD-AUC {r.nsd_auc:.3f}, final DSC "
                    f"{r.dsc_final:.3f}, final NSD {r.nsd_final:.3f} (means over {r.n} results, the class in its "
                    f"case's map)" for r in task_summary(table).itertuples()]


__all__ = ["AUC_STEPS", "CASE_COLUMNS", "CHALLENGE_COLUMNS", "NSD_MIN_DICE", "OWN_COLUMNS", "SPACING_RULES",
           "TOLERANCE_MM", "auc", "case_scores", "case_summary", "class_map", "columns", "prefixed",
           "scoring_spacing", "step_scores", "task_lines", "task_summary"]
