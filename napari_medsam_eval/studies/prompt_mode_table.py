"""The prompt-mode study's table: Fig. 2 of Mazurowski et al. 2023 (one row per task, mean IoU per mode)."""
from __future__ import annotations

import pandas as pd

from ..datasets.prompt_mode_samples import study_task_name

_KEYS = ["dataset", "class"]


def _means(rows: pd.DataFrame, by: str, value: str, name: str) -> pd.DataFrame:
    """Mean of ``value`` per (dataset, class) x ``by``, NaN skipped; columns ``name.format(by value)``."""
    means = rows.pivot_table(index=_KEYS, columns=by, values=value, aggfunc="mean", dropna=False)
    return means.rename(columns=name.format)


def study_table(rows: pd.DataFrame, iterative: pd.DataFrame | None = None, oracle: bool = True) -> pd.DataFrame:
    """Fig. 2 of Mazurowski et al.: one row per task (dataset x class), mean IoU per mode.

    Means are over the images whose class mask is non-empty (NaN ignored, as
    their ``np.nanmean``). Columns: ``task, dataset, class, n_images`` (scored),
    ``n_empty``, ``mode 1`` .. ``mode 5``, then ``mode k (oracle)`` when
    ``oracle``, then ``points k`` (and ``points k (oracle)``) for iterative runs.
    Tasks are in order of first appearance in ``rows``.
    """
    if rows.empty:
        return pd.DataFrame(columns=["task", *_KEYS, "n_images", "n_empty"])
    order = list(dict.fromkeys(zip(rows["dataset"], rows["class"])))
    per_image = rows[rows["mode"] == rows["mode"].iloc[0]]
    parts = [per_image.groupby(_KEYS)["empty"].agg(n_images=lambda e: int((~e.astype(bool)).sum()),
                                                   n_empty=lambda e: int(e.astype(bool).sum())),
             _means(rows, "mode", "iou", "mode {}")]
    if oracle:
        parts.append(_means(rows, "mode", "iou_oracle", "mode {} (oracle)"))
    if iterative is not None and not iterative.empty:
        parts.append(_means(iterative, "n_points", "iou", "points {}"))
        if oracle:
            parts.append(_means(iterative, "n_points", "iou_oracle", "points {} (oracle)"))
    summary = pd.concat(parts, axis=1).reindex(pd.MultiIndex.from_tuples(order, names=_KEYS)).reset_index()
    summary[["n_images", "n_empty"]] = summary[["n_images", "n_empty"]].fillna(0).astype(int)
    summary.insert(0, "task", [study_task_name(d, c) for d, c in zip(summary["dataset"], summary["class"])])
    summary.columns.name = None
    return summary
