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
schema gives them, and numbers ``float64``.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

#: columns holding a JSON list of numbers (``null`` allowed): float arrays
ARRAY_COLUMNS: tuple[str, ...] = ("slice_dice", "slice_scores", "dice_after", "nsd_after", "sens_dice")
#: columns holding a JSON list
LIST_COLUMNS: tuple[str, ...] = ("prompt", "stops", "notes", "lesions")
#: columns holding a JSON object
DICT_COLUMNS: tuple[str, ...] = ("attributes", "error_slices")


def parsed_table(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``table`` (:func:`~.store.load_table`'s) with its JSON columns as Python objects (see the
    module's table); columns it lacks are left out, every other column is unchanged."""
    parsed = table.copy()
    for columns, parse in ((ARRAY_COLUMNS, float_array), (LIST_COLUMNS, list), (DICT_COLUMNS, dict)):
        for column in columns:
            if column in parsed.columns:
                parsed[column] = pd.Series([json_cell(value, parse) for value in parsed[column]],
                                           index=parsed.index, dtype=object)
    return parsed


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
    except ValueError:
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
