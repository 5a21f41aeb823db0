"""``medsam-eval score PRED GT``: per-label DSC, IoU, NSD and HD95 of a prediction."""
from __future__ import annotations

import argparse
import csv
import io as _io
import json
import sys
from pathlib import Path

from ..case import Spacing
from ..errors import GeometryMismatchError
from ..io import LabelFile, read_label
from ..io.validation import check_geometry
from ..metrics import compute_label_metrics

COLUMNS = ["label", "name", "dice", "iou", "nsd", "hd95", "gt_voxels", "pred_voxels"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("score", help="score a predicted label map against ground truth")
    parser.add_argument("pred", type=Path, help="predicted labels (NIfTI/NRRD/MHA, npz with 'segs', PNG mask, ...)")
    parser.add_argument("gt", type=Path, help="ground-truth labels (same formats; npz with 'gts')")
    parser.add_argument("--tolerance-mm", type=float, default=2.0, help="NSD tolerance in mm (default 2.0, as LiteMedSAM)")
    parser.add_argument("--labels", type=int, nargs="+", help="labels to score (default: all in either map)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON")
    out.add_argument("--csv", action="store_true", help="print CSV")
    parser.set_defaults(func=run)


def label_spacing(label: LabelFile, fallback: LabelFile) -> Spacing:
    """Spacing in array order from the file header (ITK x, y, z order), else 1 per axis."""
    axes = "zyx"[-label.array.ndim:]
    for source in (label, fallback):
        spacing_xyz = source.geometry.get("spacing")
        if spacing_xyz is not None and len(spacing_xyz) == label.array.ndim:
            return Spacing.from_xyz(spacing_xyz, axes)
    return Spacing.isotropic(axes)


def score_files(pred_path: Path, gt_path: Path, tolerance_mm: float = 2.0, labels: list[int] | None = None) -> list[dict]:
    """One row per label: the metrics of ``pred_path`` against ``gt_path``."""
    gt = read_label(gt_path)
    pred = read_label(pred_path)
    if pred.array.shape != gt.array.shape:
        raise GeometryMismatchError(f"prediction shape {pred.array.shape} != ground truth shape {gt.array.shape} ({gt_path})", pred_path)
    if pred.geometry and gt.geometry:
        check_geometry(gt.geometry, pred.geometry, pred_path, gt_path)
    spacing = label_spacing(gt, pred)
    names = {**pred.info.get("label_names", {}), **gt.info.get("label_names", {})}
    per_label = compute_label_metrics(pred.array, gt.array, spacing, labels=labels, tolerance_mm=tolerance_mm)
    return [{"label": value, "name": names.get(value, ""), **metrics} for value, metrics in per_label.items()]


def format_table(rows: list[dict]) -> str:
    header = f"{'label':>5}  {'name':<14}{'DSC':>8}{'IoU':>8}{'NSD':>8}{'HD95':>9}{'gt vox':>10}{'pred vox':>10}"
    lines = [header]
    for r in rows:
        lines.append(
            f"{r['label']:>5}  {str(r['name'])[:14]:<14}{r['dice']:>8.4f}{r['iou']:>8.4f}{r['nsd']:>8.4f}"
            f"{r['hd95']:>9.3f}{int(r['gt_voxels']):>10}{int(r['pred_voxels']):>10}"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    rows = score_files(args.pred, args.gt, args.tolerance_mm, args.labels)
    if args.json:
        print(json.dumps({"tolerance_mm": args.tolerance_mm, "labels": rows}, indent=2))
    elif args.csv:
        buffer = _io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
        sys.stdout.write(buffer.getvalue())
    else:
        print(f"NSD tolerance {args.tolerance_mm} mm")
        print(format_table(rows))
    return 0
