"""One row of the benchmark widget's table as cells: texts, tooltips, the scores and sort keys (no Qt, any
thread: made once when the row arrives, :mod:`._rows_model` shows them). The why column holds the row's
dominant error part (:mod:`napari_medsam_eval.evaluation.error_parts`), its tooltip the parts in words."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from napari_medsam_eval._widgets.benchmark._bench_items import fmt, target_text
from napari_medsam_eval.evaluation.error_parts import part_name, parts_text
from napari_medsam_eval._widgets.common._unit_words import in_units, unit_of

#: the why column of a row without error parts (failed, not scored, or from before them)
WHY_NONE = "n/a"
#: the columns holding scores (right-aligned, sorted by value)
NUMERIC = frozenset({"DSC", "NSD"})


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


@dataclass(frozen=True)
class RowCells:
    """One row's cells: texts, tooltips, the numbers behind the scores and the sort keys."""

    texts: tuple[str, ...]
    tips: tuple[str, ...]
    numbers: tuple[Any, ...]  # the score behind a numeric cell (NaN for none), None for a text cell
    keys: tuple[Any, ...]
    #: the row's dominant error part (``ok``, a part, or ``n/a``): what the why filter keeps
    why: str = WHY_NONE
    #: lesions the row's prediction missed (a lesion-by-lesion target's): the "missed lesions" filter keeps > 0
    missed_lesions: int = 0


def row_cells(row: dict[str, Any], headers: tuple[str, ...]) -> RowCells:
    """The cells of ``row`` for the columns ``headers`` (case, target, DSC, NSD, status); no Qt, any thread."""
    status = str(row.get("status", ""))
    why = str(row.get("dominant_error") or "") or WHY_NONE
    unit = unit_of(row.get("kind"))  # a video's parts in frames
    values = {"case": str(row.get("case_id", "")), "target": target_text(row), "DSC": row.get("dice"),
              "NSD": row.get("nsd"), "why": in_units(part_name(why), unit), "status": status}
    texts, tips, numbers, keys = [], [], [], []
    for header in headers:
        value = values[header]
        if header in NUMERIC:
            number = _number(value)
            text = fmt(value)
            numbers.append(number)
            keys.append(math.inf if math.isnan(number) else number)
        else:
            text = str(value)
            numbers.append(None)
            keys.append(text)
        texts.append(text)
        if header == "why":
            tips.append(f"why it missed: {in_units(parts_text(row, unit + 's'), unit)}")
        else:
            tips.append(f"{status}: {row.get('error', '')}" if header == "status" and status != "ok" else text)
    missed = _number(row.get("lesions_missed"))
    return RowCells(tuple(texts), tuple(tips), tuple(numbers), tuple(keys), why,
                    0 if math.isnan(missed) else int(missed))


__all__ = ["NUMERIC", "RowCells", "WHY_NONE", "row_cells"]
