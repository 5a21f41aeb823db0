"""The results table: one row per (case, target), its columns and types.

Run-level constants (model checkpoint, protocol options, versions ...) live in
``manifest.json``; every row repeats only what a table needs to be grouped
and read on its own. Column meanings:

=====================  ==========================================================
``case_id``            the layout's case id
``dataset``            the dataset folder's name
``task``               ``"<dataset>/<label name>"``
``target_label``       label value in the ground truth (None: case failed before
                       its labels were known, or a target uniting several labels)
``label_name``         the target's name (``"anterior"``; ``"label_<n>"`` if unnamed)
``target_labels``      the label values the target unites (``"1,2,3"``; ``""`` in a run
                       folder made before targets, where it is ``target_label``),
                       :mod:`napari_medsam_eval.core.targets`
``kind``               ``volume`` / ``video`` / ``image``
``model``              backend name; ``protocol`` the prompt protocol's name
``precision``          the model's precision (LiteMedSAM: ``fp32``, ``bf16``, ``int8``;
                       ``""`` for a model that does not say)
``status``             ``"ok"``, ``"failed"`` or ``"empty_gt"`` (the ground truth holds
                       no voxel of the target: nothing to prompt, nothing scored;
                       counted apart from ok and failed); ``error`` the reason
                       (``""`` when ok)
``dice`` ``iou``       overlap of prediction and ground truth, whole case
``nsd`` ``hd95``       NSD at ``nsd_tolerance_mm`` and HD95 (mm); volumes and 2D
                       images in their own spacing; videos per frame in 2D,
                       averaged over frames where either mask is present
``gt_voxels``          foreground voxels of the ground truth / the prediction
``pred_voxels``
``n_slices``           slices/frames of the case (1 for a 2D image)
``prompt_slice``       slice/frame the prompt was given on (None for 2D)
``slice_dice``         JSON list: Dice of every slice along axis 0, 4 decimals,
                       ``null`` where both masks are empty
``prompt``             JSON list of the prompts given (see ``Prompt.to_dict``)
``stops``              JSON list: where each propagation direction ended and why
                       (``direction``, ``last`` slice kept, slice ``at`` which the
                       rule fired, ``reason``: a stop rule, ``end``, ``model``
                       for a native propagation, ``box_3d`` for the official loop)
``slice_scores``       JSON list: the model's own score (predicted IoU) of every
                       slice it segmented, ``null`` elsewhere
``time_*_s``           seconds: image encoder (every pass, the video rule's too) and
                       mask decoder as the backend reports them (summed over slices;
                       NaN when the backend does not report them), wall time of
                       segmentation and propagation for this target (metrics
                       excluded), and the rest of it (``time_other_s``: encoder +
                       decoder + other = total)
``attributes``         JSON object: split, difficulty, view ... of the case
``seed``               the run's seed
``prediction_path``    prediction file relative to the run folder (``""`` if not saved):
                       the case's label map, or the target's own where a later
                       target overwrote some of its voxels in it
``prediction_sha256``  SHA-256 of that file, taken after it was written and read
                       back; ``--resume`` redoes a case whose file is missing or
                       no longer matches
``dice_after``         ``corrections`` protocol only (``""`` otherwise): JSON list of
``nsd_after``          the DSC / NSD after 0, 1, ..., K interactions (``dice``,
                       ``nsd`` are the last); :mod:`napari_medsam_eval.evaluation.interaction_effort`
``noc80`` ``noc85``    interactions until DSC >= 0.80 / 0.85 / 0.90; K + 1 when
``noc90``              never reached (NaN for other protocols)
``dsc_auc``            ``cvpr25-interactive`` only (NaN otherwise): the CVPR 2025 challenge's
``nsd_auc``            AUC of DSC / NSD over the 5 click steps and the final DSC / NSD,
``dsc_final``          by its script's rules (:mod:`napari_medsam_eval.evaluation.cvpr25`), of
``nsd_final``          this class in the case's one label map, NSD gated on the case's mean
                       DSC (``dice_after`` / ``nsd_after`` then hold its per-step scores; the
                       case's figure is the mean of its rows)
``case_dsc_auc`` ...   ``cvpr25-interactive`` only: the script's own row for the case (the mean
``case_nsd_final``     over its classes in the map), the same on each of the case's rows
``own_dice_after``     ``cvpr25-interactive`` only: the class's own mask, overlaps with other
``own_nsd_after``      classes allowed, NSD gated on its own DSC: per step (JSON lists) and
``own_dsc_auc`` ...    its AUCs and final DSC / NSD (not the challenge's figures)
``own_nsd_final``
``sens_runs``          protocol option ``sensitivity`` = N only (NaN / ``""``
``sens_dice``          otherwise): N perturbed copies of the prompt were segmented
``sens_dice_min``      as the prompt was (:mod:`napari_medsam_eval.studies.sensitivity`);
``sens_dice_median``   JSON list of their DSC, min / median / max, and the spread
``sens_dice_max``      (max - min). ``dice`` stays the unperturbed prompt's.
``sens_spread``
``notes``              JSON list of what makes a valid result mean little: a constant
                       image, a prompt that gave an empty mask (``[]`` or ``""``: none)
``error_<part>``       why it missed (:mod:`napari_medsam_eval.evaluation.error_parts`):
                       the share of ``2 TP + FP + FN`` in each part (``leak``,
                       ``missed_slices``, ``off_target``, ``over``, ``under``); they add up
                       to ``1 - dice`` (NaN: not scored, or a run folder from before the parts)
``dominant_error``     the largest part, ``ok`` at DSC >= 0.9 (``""``: not scored)
``prompt_slice_dice``  DSC on the prompt slice alone (NaN for a 2D image)
``error_slices``       JSON object: each non-empty part's slice ranges and its largest slice
``lesions_true``       a target taken lesion by lesion only (None / NaN / ``""``
``lesions_found``      otherwise; :mod:`napari_medsam_eval.evaluation.lesions`): true
``lesions_missed``     lesions, found, missed, predicted lesions matching none
``lesions_false``      (false positives), detection F1, the mean DSC of the true
``lesion_f1``          lesions (a missed one 0), and ``lesions``, a JSON list of every
``lesion_dice``        lesion (true and predicted: status, voxels, mL, size, DSC,
``lesions``            slices); ``lesions.csv`` is that list as a table
``input_sha256``       SHA-256 of the contents of the case's files when it ran:
                       ``--resume`` redoes a case whose files changed since
                       (``""`` in a run folder made before it: trusted)
=====================  ==========================================================

A target the dataset names but this case lacks gives an ``empty_gt`` row
whose metrics are NaN: nothing was asked, nothing is scored, and the report
counts it apart (never in n).
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ..core.errors import DataError
from ..core.targets import INSTANCES_SUFFIX, Target
from ..evaluation.error_parts import PART_COLUMNS, ROW_COLUMNS
from ..core.errors import InputTypeError

#: cvpr25-interactive: the script's row for the case, the class's own mask's (:mod:`.cvpr25_case`)
CVPR25_CASE_COLUMNS = ("case_dsc_auc", "case_nsd_auc", "case_dsc_final", "case_nsd_final")
CVPR25_OWN_COLUMNS = ("own_dice_after", "own_nsd_after", "own_dsc_auc", "own_nsd_auc", "own_dsc_final",
                      "own_nsd_final")
#: a lesion-by-lesion target's counts (:mod:`napari_medsam_eval.evaluation.lesions`)
LESION_COUNT_COLUMNS = ("lesions_true", "lesions_found", "lesions_missed", "lesions_false")

COLUMNS: tuple[str, ...] = (
    "case_id", "dataset", "task", "target_label", "label_name", "kind", "model", "precision", "protocol", "status", "error",
    "dice", "iou", "nsd", "hd95", "nsd_tolerance_mm", "gt_voxels", "pred_voxels", "n_slices", "prompt_slice",
    "slice_dice", "prompt", "stops", "slice_scores", "time_encoder_s", "time_decoder_s", "time_total_s",
    "time_other_s", "attributes", "seed",
    "prediction_path", "prediction_sha256", "dice_after", "nsd_after", "noc80", "noc85", "noc90",
    "dsc_auc", "nsd_auc", "dsc_final", "nsd_final", *CVPR25_CASE_COLUMNS, *CVPR25_OWN_COLUMNS, "sens_runs", "sens_dice", "sens_dice_min", "sens_dice_median", "sens_dice_max", "sens_spread", "notes",
    *ROW_COLUMNS, "target_labels", *LESION_COUNT_COLUMNS, "lesion_f1", "lesion_dice", "lesions", "input_sha256",
)
INT_COLUMNS = ("target_label", "gt_voxels", "pred_voxels", "n_slices", "prompt_slice", "seed", *LESION_COUNT_COLUMNS)
FLOAT_COLUMNS = ("dice", "iou", "nsd", "hd95", "nsd_tolerance_mm", "time_encoder_s", "time_decoder_s",
                 "time_total_s", "time_other_s", "noc80", "noc85", "noc90", "dsc_auc", "nsd_auc", "dsc_final",
                 "nsd_final", *CVPR25_CASE_COLUMNS, *CVPR25_OWN_COLUMNS[2:], "sens_runs", "sens_dice_min", "sens_dice_median",
                 "sens_dice_max", "sens_spread", *PART_COLUMNS, "prompt_slice_dice", "lesion_f1", "lesion_dice")
TEXT_COLUMNS = tuple(c for c in COLUMNS if c not in INT_COLUMNS + FLOAT_COLUMNS)
TIME_COLUMNS = ("time_encoder_s", "time_decoder_s", "time_total_s", "time_other_s")
#: the table's order (a region of several labels has no ``target_label``: its name orders it)
SORT_COLUMNS = ("case_id", "target_label", "label_name")

NAN = float("nan")
STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_EMPTY_GT = "empty_gt"
STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_EMPTY_GT)


def empty_row() -> dict[str, Any]:
    """A row with every column at its 'unknown' value (NaN, None or "")."""
    row: dict[str, Any] = {c: "" for c in TEXT_COLUMNS}
    row.update({c: None for c in INT_COLUMNS})
    row.update({c: NAN for c in FLOAT_COLUMNS})
    row["slice_dice"] = "[]"
    row["prompt"] = "[]"
    row["stops"] = "[]"
    row["slice_scores"] = "[]"
    row["attributes"] = "{}"
    row["lesions"] = "[]"
    return row


def json_dumps(value: Any) -> str:
    """Canonical JSON (sorted keys) for the text columns holding objects."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise InputTypeError(f"cannot store {type(value).__name__} in a results row")


def check_row(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` restricted to :data:`COLUMNS` (missing ones filled); KeyError on unknown columns."""
    unknown = sorted(set(row) - set(COLUMNS))
    if unknown:
        raise KeyError(f"not results columns: {unknown}")
    return {**empty_row(), **row}


def to_dataframe(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a typed table in :data:`COLUMNS` order, sorted by case and target.

    Integer columns are pandas nullable ``Int64`` (None stays missing), float
    columns ``float64`` (NaN and ``inf`` kept), text columns ``str`` (the
    default string dtype, as parquet reads them back).
    """
    table = pd.DataFrame([check_row({k: v for k, v in r.items() if k in COLUMNS}) for r in rows],
                         columns=list(COLUMNS))
    for column in INT_COLUMNS:
        table[column] = pd.array([None if is_missing(v) else int(v) for v in table[column]], dtype="Int64")
    for column in FLOAT_COLUMNS:
        table[column] = pd.to_numeric(table[column], errors="coerce").astype("float64")
    for column in TEXT_COLUMNS:
        table[column] = table[column].map(lambda v: "" if is_missing(v) else str(v)).astype(str)
    if len(table):
        table = table.sort_values(list(SORT_COLUMNS), kind="stable", na_position="first")
    return table.reset_index(drop=True)


def is_missing(value: Any) -> bool:
    """None, NaN or pandas' NA (nullable integer columns of a parquet table)."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def whole_number(value: Any, column: str, source: Any = None) -> int | None:
    """``1``, ``1.0``, ``"1"`` and ``"1.0"`` as ``1``; missing or blank as None; anything else a DataError."""
    if is_missing(value) or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)  # exact, however large
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not number.is_integer():
        raise DataError(f"column {column} holds {value!r}, not a whole number", source)
    return int(number)


def comparable(table: pd.DataFrame) -> pd.DataFrame:
    """The table without timings, sorted: what two runs with one seed must agree on."""
    return (table.drop(columns=[c for c in TIME_COLUMNS if c in table.columns])
            .sort_values(list(SORT_COLUMNS), kind="stable").reset_index(drop=True))


def row_target(row: Any) -> Target | None:
    """The target a row scored (``target_labels``, else ``target_label`` in a run folder made before
    targets), named by its ``label_name``; None for a case that failed before its labels were known."""
    def get(column: str) -> Any:
        return row.get(column) if hasattr(row, "get") else getattr(row, column, None)

    text = get("target_labels")
    if not is_missing(text) and str(text).strip() == INSTANCES_SUFFIX:  # every value of an instance map
        name = get("label_name")
        return Target(str(name) if not is_missing(name) and str(name) else INSTANCES_SUFFIX, (), instances=True)
    values = [int(v) for v in str(text).split(",") if v.strip()] if not is_missing(text) and str(text).strip() else []
    if not values:
        label = get("target_label")
        if is_missing(label):
            return None
        values = [int(label)]
    name = get("label_name")
    lesions = not is_missing(get("lesions_true"))
    return Target(str(name) if not is_missing(name) and str(name) else f"label_{values[0]}", tuple(values),
                  lesions=lesions)


def row_labels(row: Any) -> tuple[int, ...] | None:
    """The label values a row's target unites (:func:`row_target`), None for a case-level row: what
    :func:`~napari_medsam_eval.evaluation.mask_comparison.binary_target` takes."""
    target = row_target(row)
    return None if target is None else target.labels


def labels_text(row: Any) -> str:
    """The label value(s) of a row's target as a table writes them: ``2``, ``1,2,3`` for a region, ``n/a`` for
    a case that failed before its labels were known."""
    labels = row_labels(row)
    return "n/a" if labels is None else ",".join(str(v) for v in labels)
