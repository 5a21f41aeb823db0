"""Synthetic run directories with hand-checkable scores, shared by the report tests (no tests here).

Run A (13 scored rows, 1 failed, 1 ok-but-NaN):

* liver: DSC 0.9, 0.8, 0.7, 0.6 and one failed row -> median 0.75, q25 0.675, q75 0.825, mean 0.75
* kidney: DSC 0.5, 0.6, 0.9 and one NaN (empty target) -> median 0.6, q25 0.55, q75 0.75
* polyp: DSC 0.99, 0.97, 0.95, 0.93, 0.91, 0.89 (easy: 0.99, 0.95, 0.91; hard: 0.97, 0.93, 0.89)
  -> median 0.94; easy median 0.95, hard median 0.93

Median of task medians: median(0.75, 0.6, 0.94) = 0.75; pooled median of the 13
scores: 0.9. NSD is DSC + 0.01 everywhere.
"""
from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path

import numpy as np
import pandas as pd

from napari_medsam_eval.benchmark.manifest import MANIFEST_FILE
from napari_medsam_eval.benchmark.store import CSV_FILE, PARQUET_FILE, ROWS_FILE, encode_case

SCORES = {
    "liver": [0.9, 0.8, 0.7, 0.6],
    "kidney": [0.5, 0.6, 0.9, float("nan")],
    "polyp": [0.99, 0.97, 0.95, 0.93, 0.91, 0.89],
}
MANIFEST = {
    "format": 1, "status": "completed",
    "model": {"name": "medsam2", "checkpoint": "MedSAM2_latest.pt", "sha256": "0123abcd"},
    "protocol": "medsam2-middle-box",
    "dataset": "synthetic",
    "versions": {"napari_medsam_eval": "0.1.0", "torch": "2.4.0"},
    "times": {"started": "2025-05-01T10:00:00", "finished": "2025-05-01T10:05:00"},
}


def make_row(case_id: str, task: str, dice: float, **extra) -> dict:
    kind = "video" if task == "polyp" else "volume"
    slice_dice = [None, dice - 0.1, dice, dice + 0.05] if np.isfinite(dice) else [None, None]
    row = {
        "case_id": case_id, "dataset": "synthetic", "task": task, "target_label": 1, "label_name": task,
        "kind": kind, "model": "medsam2", "protocol": "medsam2-middle-box", "status": "ok", "error": None,
        "dice": dice, "iou": dice / (2 - dice) if np.isfinite(dice) else float("nan"),
        "nsd": round(dice + 0.01, 10) if np.isfinite(dice) else float("nan"), "hd95": 2.0,
        "nsd_tolerance_mm": 2.0, "gt_voxels": 100, "pred_voxels": 95, "n_slices": 4, "prompt_slice": 2,
        "slice_dice": json.dumps(slice_dice), "prompt": json.dumps({"box": [1, 2, 10, 12], "slice": 2}),
        "time_encoder_s": 0.2, "time_decoder_s": 0.05, "time_total_s": 0.4, "attributes": json.dumps({}),
        "seed": 0, "prediction_path": f"predictions/{case_id}.nii.gz",
    }
    row.update(extra)
    return row


def rows_a() -> list[dict]:
    rows = []
    for task, scores in SCORES.items():
        for i, dice in enumerate(scores):
            extra = {}
            if task == "polyp":
                extra["attributes"] = json.dumps({"difficulty": "easy" if i % 2 == 0 else "hard", "split": "unseen"})
            rows.append(make_row(f"{task}_{i:02d}", task, dice, **extra))
    failed = make_row("liver_99", "liver", float("nan"), status="failed", error="CUDA out of memory",
                      slice_dice=None, nsd=float("nan"))
    rows.insert(4, failed)
    return rows


def jsonl_bytes(rows: list[dict]) -> bytes:
    """``rows`` as the runner's ``results.jsonl``: each run of rows of one case written as one block."""
    return b"".join(encode_case(list(block)) for _case, block in groupby(rows, key=lambda row: row["case_id"]))


def write_run(run_dir: Path, rows: list[dict], formats=("parquet", "csv"), manifest: dict | None = MANIFEST) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(rows)
    if "parquet" in formats:
        table.to_parquet(run_dir / PARQUET_FILE, index=False)
    if "csv" in formats:
        table.to_csv(run_dir / CSV_FILE, index=False)
    if "jsonl" in formats:
        (run_dir / ROWS_FILE).write_bytes(jsonl_bytes(rows))
    if manifest is not None:
        (run_dir / MANIFEST_FILE).write_text(json.dumps(manifest))
    (run_dir / "run.log").write_text("synthetic\n")
    return run_dir


def shifted(rows: list[dict], delta: float) -> list[dict]:
    """The same rows with every finite DSC raised by ``delta``."""
    out = []
    for row in rows:
        row = dict(row)
        if np.isfinite(row["dice"]):
            row["dice"] = row["dice"] + delta
        out.append(row)
    return out
