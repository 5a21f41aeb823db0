"""One row of a run folder, opened: its case, the prediction the run saved, the prompt it gave.

What the Benchmark widget's "open a row" needs, without napari: the case is
found through the run's ``manifest.json`` (dataset path and layout of the
run's ``config``), the prediction is the file the runner saved
(``prediction_path``, relative to the run folder: runs with
``save_predictions``), the prompt is the row's recorded ``prompt`` JSON.

A run folder without a usable manifest, a dataset folder that is gone and a
case no longer in the dataset are :class:`~napari_medsam_eval.core.errors.DataError`
naming the file or folder. A prediction that was not saved or cannot be read
is not an error: the case still opens, and :attr:`RunCase.note` says why
there is no prediction (naming the file).

:attr:`RunCase.view_slice` is the slice to show: where the result's dominant error part is largest
(:func:`view_slice`), else the prompt's slice.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.case import Case
from ..datasets import CaseRef, DatasetLayout, get_layout
from ..core.errors import DataError
from ..io import read_label
from ..core.prompt import Prompt, prompts_from_json
from ..evaluation.error_parts import OK, PARTS, error_parts, parse_where
from ..evaluation.mask_comparison import binary_target, largest_error_slice
from .manifest import MANIFEST_FILE, read_manifest
from ..evaluation.lesions import MISSED
from .lesion_table import row_lesions
from .spilled_cells import resolve_cells
from .schema import row_labels


@dataclass
class RunCase:
    """A row's case, prediction and prompt; ``note`` says what could not be loaded (e.g. no prediction);
    ``view_slice`` the slice to show (:func:`view_slice`)."""

    row: dict[str, Any]
    case: Case
    prediction: np.ndarray | None
    prompt: Prompt | None
    note: str = ""
    view_slice: int | None = None


def run_dataset(run_dir: str | Path) -> tuple[DatasetLayout, Path]:
    """The layout and dataset folder a run was made on, from its manifest."""
    run_dir = Path(run_dir)
    path = run_dir / MANIFEST_FILE
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise DataError(f"no {MANIFEST_FILE}: not a benchmark run folder", run_dir)
    config = manifest.get("config") if isinstance(manifest, dict) else None
    if not isinstance(config, dict) or not config.get("layout") or not config.get("dataset_path"):
        raise DataError("the run manifest names no dataset (config.layout and config.dataset_path)", path)
    try:
        layout = get_layout(str(config["layout"]))
    except (KeyError, ValueError) as error:
        raise DataError(f"the run manifest names an unknown layout ({error})", path) from None
    dataset = Path(config["dataset_path"])
    if not dataset.is_dir():
        raise DataError("the run's dataset folder is not found (moved or deleted?)", dataset)
    return layout, dataset


def _find_ref(layout: DatasetLayout, dataset: Path, case_id: str) -> CaseRef:
    for ref in layout.list_cases(dataset):
        if ref.case_id == case_id:
            return ref
    raise DataError(f"case {case_id!r} is no longer in the dataset (layout {layout.name})", dataset)


def row_prompt(row: dict[str, Any]) -> Prompt | None:
    """The first prompt of a row's ``prompt`` JSON; None when it has none or cannot be parsed."""
    text = row.get("prompt") or "[]"
    try:
        prompts = prompts_from_json(text) if isinstance(text, str) else []
    except (ValueError, TypeError):
        return None
    return prompts[0] if prompts else None


def read_prediction(run_dir: Path, row: dict[str, Any], case: Case) -> tuple[np.ndarray | None, str]:
    """The saved prediction of ``row`` and an empty note, or None and why."""
    relative = str(row.get("prediction_path") or "")
    if not relative:
        return None, "no prediction saved for this row (run with 'save predictions')"
    path = run_dir / relative
    if not path.exists():
        return None, f"prediction file not found: {path}"
    try:
        prediction = read_label(path, reference=case).array
    except (DataError, OSError) as error:
        return None, f"prediction not readable: {error}"
    if prediction.shape != case.spatial_shape:
        return None, f"prediction {path} has shape {prediction.shape}, the case {case.spatial_shape}"
    return prediction, ""


def missed_lesion(row: dict[str, Any]) -> dict[str, Any] | None:
    """The row's smallest missed true lesion (:mod:`..evaluation.lesions`; its number, size, mL and slices), or
    None: a small lesion missed is the one a lesion-wise reading most needs to see."""
    missed = [l for l in row_lesions(row) if l.get("source") == "true" and l.get("status") == MISSED]
    return min(missed, key=lambda l: (l.get("voxels") or 0, l.get("number") or 0)) if missed else None


def view_slice(case: Case, prediction: np.ndarray | None, row: dict[str, Any],
               prompt: Prompt | None = None) -> int | None:
    """The slice of ``case`` to show for ``row``: a missed lesion's largest slice (:func:`missed_lesion`),
    else where the result's dominant error part
    (:mod:`..evaluation.error_parts`) is largest, from ``prediction`` or else the row's ``error_slices``;
    for a result without one (``ok``), where ``prediction`` has the most FP + FN voxels of the row's target
    (:func:`largest_error_slice`); else the ``prompt``'s slice; None for 2D cases."""
    found = None
    missed = missed_lesion(row)
    if missed is not None and missed.get("largest_slice") is not None and len(case.spatial_shape) >= 3:
        return int(missed["largest_slice"])
    if prediction is not None and case.label is not None and prediction.shape == case.label.shape:
        target = row_labels(row)
        pred, truth = binary_target(prediction, target, binary_fallback=True), binary_target(case.label, target)
        parts = error_parts(pred, truth) if pred.ndim == 3 else None
        if parts is not None and parts.dominant != OK:
            found = parts.largest_slice[parts.dominant]
        else:
            found = largest_error_slice(pred, truth)
    elif len(case.spatial_shape) >= 3 and str(row.get("dominant_error") or "") in PARTS:
        found = parse_where(row.get("error_slices")).get(str(row["dominant_error"]), {}).get("largest")
    if found is None and prompt is not None and prompt.slice_index is not None and len(case.spatial_shape) >= 3:
        found = int(prompt.slice_index)
    return found


def load_run_case(run_dir: str | Path, row: dict[str, Any]) -> RunCase:
    """Read the case of ``row`` (a row of the run in ``run_dir``), its saved prediction and its prompt."""
    run_dir = Path(run_dir)
    row = resolve_cells([row], run_dir)[0]  # (its long cells, kept in files of their own, read back)
    if "case_id" not in row:
        raise DataError("the row has no case_id: not a row of a benchmark run", run_dir)
    layout, dataset = run_dataset(run_dir)
    case = layout.load(_find_ref(layout, dataset, str(row["case_id"])))
    prediction, note = read_prediction(run_dir, row, case)
    prompt = row_prompt(row)
    return RunCase(row=dict(row), case=case, prediction=prediction, prompt=prompt, note=note,
                   view_slice=view_slice(case, prediction, row, prompt))


__all__ = ["RunCase", "load_run_case", "missed_lesion", "read_prediction", "row_prompt", "run_dataset",
           "view_slice"]
