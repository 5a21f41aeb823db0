"""The rows of a case before and around its scores: the columns every row shares, a target's, an empty truth's, a
failure's, and what the oracle baseline answers from (:mod:`.evaluator` fills them in)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.case import present_label_values
from ..core.targets import Target, label_targets, parse_targets
from ..datasets import CaseRef, DatasetLayout, task_name
from ..evaluation.lesion_maps import lesion_boxes, lesion_labels
from ..propagation import PropagationRecord
from .config import RunConfig
from .schema import NAN, STATUS_EMPTY_GT, STATUS_FAILED, STATUS_OK, json_dumps


def error_text(error: BaseException) -> str:
    """``"<Type>: <message>"``, one line."""
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def propagation_columns(record: PropagationRecord, n_slices: int) -> dict[str, str]:
    """The ``stops`` and ``slice_scores`` columns of a row."""
    scores = [None] * max(n_slices, 0)
    for z, value in record.to_dict()["scores"].items():
        if 0 <= z < len(scores):
            scores[z] = value
    return {"stops": json_dumps([s.to_dict() for s in record.stops]), "slice_scores": json_dumps(scores)}


def base_row(ref: CaseRef, kind: str, config: RunConfig) -> dict[str, Any]:
    """The columns every row of ``ref`` shares."""
    return {
        "case_id": ref.case_id, "dataset": ref.dataset, "kind": kind, "model": config.model,
        "precision": config.precision,
        "protocol": config.protocol, "status": STATUS_OK, "error": "",
        "nsd_tolerance_mm": float(config.tolerance_mm), "attributes": json_dumps(ref.attributes),
        "seed": int(config.seed), "prediction_path": "",
    }


def target_row(base: dict[str, Any], target: Target | None) -> dict[str, Any]:
    """``base`` with the target columns; ``target`` None = a case-level row (``"unknown"``)."""
    if target is None:
        return {**base, "target_label": None, "label_name": "unknown", "task": task_name(base["dataset"], "unknown"),
                "target_labels": ""}
    return {**base, "target_label": target.value, "label_name": target.name,
            "task": task_name(base["dataset"], target.name), "target_labels": target.labels_text()}


def empty_gt_row(row: dict[str, Any], why: str) -> dict[str, Any]:
    """A row with nothing to score: the ground truth holds no voxel of its target."""
    return {**row, "status": STATUS_EMPTY_GT, "error": why, "dice": NAN, "iou": NAN, "nsd": NAN, "hd95": NAN}


def fail_row(row: dict[str, Any], error: BaseException | str) -> dict[str, Any]:
    text = error if isinstance(error, str) else error_text(error)
    return {**row, "status": STATUS_FAILED, "error": text}


def named_targets(ref: CaseRef, layout: DatasetLayout, config: RunConfig) -> list[Target]:
    """The targets a run names before a case is read: ``--targets``, else the dataset's regions, else its
    label names, each a target ([] when none is named)."""
    names = layout.label_names(ref.root)
    return (parse_targets(config.targets, names) or layout.dataset_targets(ref.root)
            or label_targets(names, names))


def failed_case_rows(ref: CaseRef, layout: DatasetLayout, config: RunConfig,
                     error: BaseException | str) -> list[dict[str, Any]]:
    """Rows of a case that failed before its labels were known: one per target the
    run or dataset names, else one ``"unknown"`` row."""
    base = base_row(ref, ref.kind, config)
    return [fail_row(target_row(base, t), error) for t in (named_targets(ref, layout, config) or [None])]


def oracle_masks(label_map: np.ndarray, targets: list[Target]) -> dict:
    """What the oracle baseline answers from besides the label map: each region's mask under its key, each
    lesion's under ``(key, lesion number)`` (its prompts' ``info["lesion"]``, in :func:`components`' order)."""
    masks: dict = {}
    for target in targets:
        mask = target.mask(label_map)
        if target.key != target.value:
            masks[target.key] = mask
        if target.lesions:
            lesions, numbers = lesion_labels(label_map, target)
            for number, box in lesion_boxes(lesions, numbers):
                masks[(target.key, number)] = one = np.zeros(mask.shape, dtype=bool)
                one[box] = lesions[box] == number
    return masks


def absent_words(target: Target, label_map: np.ndarray) -> str:
    """Why a target has nothing to score in a case: ``the ground truth holds no voxel of label 3 in this case``."""
    what = f"label {target.value}" if target.value is not None else target.describe()
    present = ", ".join(str(v) for v in present_label_values(label_map)) or "none"
    return f"the ground truth holds no voxel of {what} in this case (labels present: {present})"


__all__ = ["absent_words", "base_row", "empty_gt_row", "error_text", "fail_row", "failed_case_rows", "named_targets", "oracle_masks", "propagation_columns", "target_row"]
