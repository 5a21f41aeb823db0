"""A run's table with its JSON text columns as Python objects: what ``api.load_table`` gives a notebook.

The run folder stores lists and objects as canonical JSON text (:mod:`.schema`), and every reader inside the
package (the store, the report, the docks) works on that text: :func:`~.store.load_table` keeps it.
:func:`parsed_table` turns a copy of such a table into what a person plots and filters:

=========================================================  ==========================================================
``slice_dice``, ``slice_scores``, ``dice_after``,          a float ``numpy`` array per row (``null`` -> NaN; an
``nsd_after``, ``sens_dice``                               empty cell -> an empty array)
``prompt``, ``stops``, ``notes``, ``lesions``              a list (of dicts: ``Prompt.from_dict`` makes a prompt)
``attributes``, ``error_slices``                           a dict
=========================================================  ==========================================================

A cell that is not JSON (a hand-edited table) stays its text. Counts stay the nullable ``Int64`` columns the
schema gives them, and numbers ``float64``. A ``target`` column (after ``label_name``) holds each row's
:class:`~napari_medsam_eval.core.targets.Target` (its name, the labels it unites, lesion by lesion or not; None
for a case that failed before its labels were known).

:func:`chosen_columns` keeps the columns a reader asked for (``api.load_table(columns=...)``): ``"all"`` (every
column of the schema), ``"core"`` (:data:`CORE_COLUMNS` and every other column some row fills: a plain run's 76
columns come down to under 40; a lesion run keeps its lesion columns, an interactive run its curves) or a list
of names.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
import pandas as pd

#: columns holding a JSON list of numbers (``null`` allowed): float arrays
ARRAY_COLUMNS: tuple[str, ...] = ("slice_dice", "slice_scores", "dice_after", "nsd_after", "sens_dice")
#: columns holding a JSON list
LIST_COLUMNS: tuple[str, ...] = ("prompt", "stops", "notes", "lesions")
#: columns holding a JSON object
DICT_COLUMNS: tuple[str, ...] = ("attributes", "error_slices")
#: the columns ``columns="core"`` keeps even when every row leaves them empty: who, what and the scores
CORE_COLUMNS: tuple[str, ...] = ("case_id", "dataset", "task", "target", "target_label", "label_name",
                                 "target_labels", "kind", "model", "protocol", "status", "dice", "iou", "nsd",
                                 "hd95", "gt_voxels", "pred_voxels")
#: what ``columns=`` takes besides a list of names
COLUMN_CHOICES = ("all", "core")


def parsed_table(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``table`` (:func:`~.store.load_table`'s) with its JSON columns as Python objects (see the
    module's table); columns it lacks are left out, every other column is unchanged."""
    parsed = table.copy()
    for columns, parse in ((ARRAY_COLUMNS, float_array), (LIST_COLUMNS, list), (DICT_COLUMNS, dict)):
        for column in columns:
            if column in parsed.columns:
                parsed[column] = pd.Series([json_cell(value, parse) for value in parsed[column]],
                                           index=parsed.index, dtype=object)
    if "label_name" in parsed.columns and "target" not in parsed.columns:
        parsed.insert(parsed.columns.get_loc("label_name") + 1, "target", target_column(table))
    return parsed


def target_column(table: pd.DataFrame) -> pd.Series:
    """Each row's :class:`~napari_medsam_eval.core.targets.Target` (:func:`~.schema.row_target`), an object
    column."""
    from .schema import row_target

    wanted = [c for c in ("target_labels", "target_label", "label_name", "lesions_true") if c in table.columns]
    records = table[wanted].to_dict("records")
    return pd.Series([row_target(record) for record in records], index=table.index, dtype=object)


def chosen_columns(table: pd.DataFrame, columns: str | Sequence[str]) -> pd.DataFrame:
    """``table`` with the columns asked for (module doc); an unknown choice or column refused, naming it."""
    from ..core.errors import OptionError

    if isinstance(columns, str):
        if columns == "all":
            return table
        if columns != "core":
            raise OptionError(f"columns must be one of {', '.join(COLUMN_CHOICES)} or a list of column names, "
                              f"got {columns!r}")
        return table[[c for c in table.columns if c in CORE_COLUMNS or not empty_column(table[c])]]
    names = list(columns)
    unknown = [c for c in names if c not in table.columns]
    if unknown:
        raise OptionError(f"columns: no column {', '.join(map(repr, unknown))} in the table (its columns: "
                          f"{', '.join(table.columns)})")
    return table[names]


def empty_column(values: pd.Series) -> bool:
    """True when no row fills the column: missing, ``""``, an empty list, dict or array (or their JSON text), a
    float array of NaN only."""
    for value in values:
        if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
            continue
        if isinstance(value, str):
            if value.strip() in ("", "[]", "{}"):
                continue
            return False
        if isinstance(value, np.ndarray) and value.dtype.kind == "f" and np.isnan(value).all():
            continue  # a float array of NaN only (a baseline's model scores): nothing in it
        if isinstance(value, (list, dict, tuple, np.ndarray)):
            if len(value) == 0:
                continue
            return False
        return False
    return True


def json_cell(value: Any, kind: Any) -> Any:
    """One cell: ``kind`` (:func:`float_array`, ``list`` or ``dict``) of its JSON; an empty or missing cell is an
    empty one; a cell that is not JSON of that shape stays as it is."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        text = ""
    elif isinstance(value, str):
        text = value.strip()
    else:
        return value
    if not text:
        return kind([])
    try:
        loaded = json.loads(text)
    except (ValueError, RecursionError):  # nested past Python's limit: the table checks refuse it by name first
        return value
    if kind is dict:
        return loaded if isinstance(loaded, dict) else value
    if not isinstance(loaded, list):
        return value
    try:
        return kind(loaded)
    except (TypeError, ValueError):  # a list that is not of numbers
        return value


def float_array(values: list[Any]) -> np.ndarray:
    """A JSON list of numbers as a float array, ``None`` (JSON ``null``) as NaN."""
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)
