"""``lesions.csv``: every lesion of a run's lesion-by-lesion targets, one row each, from the rows' ``lesions``.

The results rows carry each target's lesions as JSON (:mod:`napari_medsam_eval.evaluation.lesions`), so
they are written, resumed and read with the row; this table is derived from them when a run ends
(:func:`~.store.write_tables`) and by the report, the Benchmark dock and ``api.lesion_table``.
"""
from __future__ import annotations

import json
from typing import Any

import pandas as pd

from .schema import is_missing

#: the table's columns: the row's case and target, then the lesion's (``source`` true or predicted)
LESION_COLUMNS = ("case_id", "task", "label_name", "target_labels", "source", "number", "status", "voxels",
                  "volume_ml", "size", "dice", "iou", "first_slice", "last_slice", "largest_slice", "matched")
_INT = ("number", "voxels", "first_slice", "last_slice", "largest_slice")
_FLOAT = ("volume_ml", "dice", "iou")


def row_lesions(row: Any) -> list[dict[str, Any]]:
    """The lesions of one results row (``[]`` for a target not taken lesion by lesion, or unreadable JSON)."""
    text = row.get("lesions") if hasattr(row, "get") else None
    if is_missing(text) or not str(text).strip():
        return []
    try:
        value = json.loads(text) if isinstance(text, str) else list(text)
    except (TypeError, ValueError):
        return []
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def lesion_table(table: pd.DataFrame) -> pd.DataFrame:
    """One row per lesion of every scored lesion-by-lesion row of ``table`` (true lesions first, then the
    predicted ones, each in their number's order); empty (with the columns) when there is none. Built
    column by column (no dict a lesion): tens of thousands of lesions a case cost their values only."""
    columns: dict[str, list] = {c: [] for c in LESION_COLUMNS}
    if "lesions" in table.columns:
        for _, row in table[table["status"] == "ok"].iterrows():
            lesions = row_lesions(row)
            if not lesions:
                continue
            for c in LESION_COLUMNS[:4]:
                columns[c].extend([row.get(c, "")] * len(lesions))
            for c in LESION_COLUMNS[4:]:
                if c == "matched":
                    columns[c].extend(" ".join(str(v) for v in l.get("matched") or []) for l in lesions)
                elif c == "size":
                    columns[c].extend(l.get("size") or "" for l in lesions)
                else:
                    columns[c].extend(l.get(c) for l in lesions)
            del lesions
    lesions = pd.DataFrame(columns, columns=list(LESION_COLUMNS))
    for column in _INT:
        lesions[column] = pd.array([None if is_missing(v) else int(v) for v in lesions[column]], dtype="Int64")
    for column in _FLOAT:
        lesions[column] = pd.to_numeric(lesions[column], errors="coerce").astype("float64")
    return lesions


__all__ = ["LESION_COLUMNS", "lesion_table", "row_lesions"]
