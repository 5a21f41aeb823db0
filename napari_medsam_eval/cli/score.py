"""``medsam-eval score PRED GT``: per-label DSC, IoU, NSD and HD95 of a prediction.

Refused with a one-line error rather than scored (a score of such input would
be silently wrong):

* the two maps differ in shape, spacing, origin or direction (named as the
  prediction and the ground truth, with their files);
* either file looks like an image rather than a label map: non-integer or
  negative values, or more than :data:`MAX_LABEL_VALUES` distinct values and
  over twice as many as the other file holds;
* the ground truth belongs to a dataset whose ``dataset.json`` declares its
  labels (beside the file, or one folder up: ``<dataset>/labelsTr/x.nii.gz``)
  and either file holds a value it does not declare;
* the NSD tolerance is not a positive number of mm.

A DICOM SEG or RTSTRUCT ground truth is scored segment by segment (ROI by ROI), each its own mask (nested
and overlapping ones too), labelled by its number; its image series must be beside it
(:mod:`napari_medsam_eval.io.dicom_objects`).
"""
from __future__ import annotations

import argparse
import csv
import io as _io
import json
import math
import sys
from pathlib import Path

import numpy as np

from ..core.case import Spacing
from ..datasets.base import root_dataset_json
from ..core.errors import DataError, MedsamEvalError
from ..io import LabelFile, read_label
from ..io.dicom_objects import ground_truth_kind
from ..io.validation import check_geometry, check_same_shape, plain_numbers
from ..evaluation.error_parts import PART_COLUMNS, parts_text
from ..evaluation.conventions import CONVENTIONS, convention_scores
from ..evaluation.metrics import compute_label_metrics
from ..core.targets import Target, check_targets, labels_of, parse_targets
from ..evaluation.lesions import LesionRule, match_lesions
from ..evaluation.metrics import score_pair
from .commands import command_help
from .common import add_targets_argument, lesion_option

COLUMNS = ["label", "name", "dice", "iou", "nsd", "hd95", "gt_voxels", "pred_voxels", "dominant_error", *PART_COLUMNS,
           "error_slices"]
#: a label map with more distinct values than this (and over twice the other map's) is taken for an image
MAX_LABEL_VALUES = 64
ROLES = ("prediction", "ground truth")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("score", help=command_help("score"))
    parser.add_argument("pred", type=Path, help="predicted labels (NIfTI/NRRD/MHA, npz with 'segs', PNG mask, ...)")
    parser.add_argument("gt", type=Path, help="ground-truth labels (same formats; npz with 'gts')")
    parser.add_argument("--tolerance-mm", type=float, default=2.0,
                        help="NSD tolerance in mm, > 0 (default 2.0, as LiteMedSAM)")
    parser.add_argument("--labels", type=int, nargs="+", help="labels to score (default: all in either map)")
    add_targets_argument(parser)
    parser.add_argument("--kind", choices=("volume", "video", "image"),
                        help="how the pair is scored, as `run` scores it: a video's NSD and HD95 per frame (default: "
                             "a video when either is a frame folder or a video file, a 2D map an image, else a volume)")
    out = parser.add_mutually_exclusive_group()
    parser.add_argument("--metrics-convention", choices=CONVENTIONS, default=CONVENTIONS[0],
                        help="compute DSC, IoU, NSD and HD95 as this tool does (medsam-eval: surface-distance's), "
                             "as MONAI does, or as the CVPR 2024/2025 challenge scripts do (docs/metrics.md; "
                             "default medsam-eval)")
    out.add_argument("--json", action="store_true", help="print JSON")
    out.add_argument("--csv", action="store_true", help="print CSV")
    parser.set_defaults(func=run)


def check_tolerance_option(tolerance_mm: float) -> float:
    """The NSD tolerance, or a :class:`MedsamEvalError` unless it is a positive finite number of mm."""
    value = float(tolerance_mm)
    if not math.isfinite(value) or value <= 0:
        raise MedsamEvalError(f"--tolerance-mm must be a positive number of mm, got {value:g}")
    return value


def label_spacing(label: LabelFile, fallback: LabelFile) -> Spacing:
    """Spacing in array order from the file header (ITK x, y, z order), else 1 per axis.

    A header with fewer values than the array has axes is an error, never unit spacing.
    """
    ndim = label.array.ndim
    axes = "zyx"[-ndim:]
    for source in (label, fallback):
        spacing_xyz = source.geometry.get("spacing")
        if spacing_xyz is None:
            continue
        if len(spacing_xyz) < ndim:
            raise DataError(f"spacing has {len(spacing_xyz)} values ({plain_numbers(spacing_xyz)}) for a "
                            f"{ndim}D label map; expected {ndim} (x, y{', z' if ndim == 3 else ''})", source.path)
        return Spacing.from_xyz(tuple(spacing_xyz)[:ndim], axes)
    return Spacing.isotropic(axes)


def read_label_map(path: Path, role: str, beside: LabelFile | None = None) -> LabelFile:
    """``read_label``, with values no label map holds reported as what they likely are: an image. A DICOM SEG or
    RTSTRUCT scored ``beside`` one is placed on that one's series (a prediction's SEG need not lie by it)."""
    try:
        if beside is not None and beside.info.get("dicom_series_folder") and ground_truth_kind(path):
            from ..io import read_dicom_case

            series = read_dicom_case(beside.info["dicom_series_folder"], series_id=beside.info.get("dicom_series_id"))
            return read_label(path, reference=series)
        return read_label(path)
    except DataError as error:
        if "non-integer values" in error.problem or "negative value" in error.problem:
            raise DataError(f"{role} looks like an image, not a label map: {error.problem}", error.path) from None
        raise


def check_label_like(label: LabelFile, other: LabelFile, role: str, other_role: str) -> None:
    """Refuse a map with far more distinct values than a label map has (an intensity image)."""
    n_values, n_other = np.unique(label.array).size, np.unique(other.array).size
    if n_values > MAX_LABEL_VALUES and n_values > 2 * n_other:
        raise DataError(f"{role} looks like an image, not a label map: {n_values} distinct values "
                        f"(the {other_role} has {n_other})", label.path)


def declared_labels(gt_path: Path) -> tuple[Path | None, dict[int, str], set[int]]:
    """The ``dataset.json`` that declares the ground truth's labels, its names ({} without one) and every
    value it declares (a label's, or one of a region's: nnU-Net v2's lists)."""
    for folder in (gt_path.parent, gt_path.parent.parent):
        info = root_dataset_json(folder)
        names, regions = info.get("label_names") or {}, info.get("targets") or []
        if names or regions:
            return folder / "dataset.json", names, set(names) | labels_of(regions)
    return None, {}, set()


def check_declared(labels: list[tuple[LabelFile, str]], gt_path: Path) -> dict[int, str]:
    """The declared label names; a DataError for a value the ground truth's dataset does not declare."""
    source, declared, known = declared_labels(gt_path)
    if not known:
        return {}
    for label, role in labels:
        extra = sorted(int(v) for v in np.unique(label.array) if v != 0 and int(v) not in known)
        if extra:
            listing = ", ".join(["0 background"] + [f"{v} {declared.get(v, 'in a region')}" for v in sorted(known)])
            raise DataError(f"{role} holds label values {extra} that {source} does not declare ({listing})",
                            label.path)
    return declared


def pair_kind(pred: LabelFile, gt: LabelFile, kind: str | None = None) -> str:
    """How a pair is scored: ``kind`` when given; a video when either map was read from frames (a frame
    folder or a video file); a 2D map an image; else a volume."""
    if kind is not None:
        if kind == "image" and gt.array.ndim != 2 or kind != "image" and gt.array.ndim != 3:
            raise DataError(f"--kind {kind} does not fit a {gt.array.ndim}D label map", gt.path)
        return kind
    if any(label.info.get("mask_names") or label.info.get("frames") for label in (pred, gt)):
        return "video"
    return "image" if gt.array.ndim == 2 else "volume"


def score_files(pred_path: Path, gt_path: Path, tolerance_mm: float = 2.0,
                labels: list[int] | None = None, kind: str | None = None,
                targets: list[str | Target] | None = None, lesions: LesionRule | None = None,
                convention: str = CONVENTIONS[0]) -> list[dict]:
    """One row per label (or per target: ``targets`` as ``run --targets`` takes them, each target's mask in
    both maps the labels it unites; a lesion-by-lesion target's row has its lesions): the metrics of
    ``pred_path`` against ``gt_path``, scored as ``run`` scores a case of the pair's kind (:func:`pair_kind`;
    refusals: module docstring)."""
    if targets and labels:
        raise MedsamEvalError("give --labels or --targets, not both")
    tolerance_mm = check_tolerance_option(tolerance_mm)
    pred_path, gt_path = Path(pred_path), Path(gt_path)
    gt = read_label_map(gt_path, ROLES[1])
    pred = read_label_map(pred_path, ROLES[0], beside=gt)
    check_same_shape(pred.array.shape, gt.array.shape, pred_path, gt_path, roles=ROLES)
    if pred.geometry and gt.geometry:
        check_geometry(gt.geometry, pred.geometry, pred_path, gt_path, roles=ROLES)
    check_label_like(pred, gt, *ROLES)
    check_label_like(gt, pred, *reversed(ROLES))
    declared = check_declared([(gt, ROLES[1]), (pred, ROLES[0])], gt_path)
    spacing = label_spacing(gt, pred).values
    kind = pair_kind(pred, gt, kind)
    names = {**declared, **pred.info.get("label_names", {}), **gt.info.get("label_names", {})}
    if convention != CONVENTIONS[0] and kind == "video":
        raise MedsamEvalError(f"--metrics-convention {convention}: a video is scored frame by frame here; the "
                              "conventions are for images and volumes")
    if gt.info.get("targets") and not targets and not labels:
        return [_by_convention(row, pred_mask, t.mask(gt.array), spacing, tolerance_mm, convention)
                for row, pred_mask, t in _object_rows(gt, pred, spacing, kind, tolerance_mm)]
    if targets:
        chosen = parse_targets(targets, names)
        check_targets(chosen, (set(np.unique(gt.array).tolist()) | set(declared)) - {0}, f"the ground truth ({gt_path.name})")
        rows = [_target_row(target, pred.array, gt.array, spacing, kind, tolerance_mm, lesions or LesionRule())
                for target in chosen]
        return [_by_convention(row, t.mask(pred.array), t.mask(gt.array), spacing, tolerance_mm, convention)
                for row, t in zip(rows, chosen)]
    if labels:
        present = (set(np.unique(pred.array).tolist()) | set(np.unique(gt.array).tolist())) - {0}
        absent = [v for v in labels if v != 0 and v not in present]
        if absent:
            raise DataError(f"label{'s' if len(absent) > 1 else ''} {', '.join(map(str, absent))} in neither the "
                            f"prediction nor the ground truth (labels they hold: "
                            f"{', '.join(str(v) for v in sorted(present)) or 'none'}): nothing to score", gt_path)
    per_label = compute_label_metrics(pred.array, gt.array, spacing[1:] if kind == "video" else spacing,
                                      labels=labels, tolerance_mm=tolerance_mm, kind=kind)
    return [_by_convention({"label": value, "name": names.get(value, ""), "kind": kind, **metrics},
                           pred.array == value, gt.array == value, spacing, tolerance_mm, convention)
            for value, metrics in per_label.items()]


def _by_convention(row: dict, pred: np.ndarray, gt: np.ndarray, spacing: tuple, tolerance_mm: float,
                   convention: str) -> dict:
    """``row`` with DSC, IoU, NSD and HD95 as ``convention`` computes them (:mod:`..evaluation.conventions`)."""
    if convention == CONVENTIONS[0]:
        return row
    return {**row, **convention_scores(pred, gt, spacing, tolerance_mm, convention), "metrics_convention": convention}


def _target_row(target: Target, pred: np.ndarray, gt: np.ndarray, spacing: tuple, kind: str, tolerance_mm: float,
                rule: LesionRule) -> dict:
    """One target's row: :func:`score_pair` of its masks (the labels it unites in each map), its lesions
    (:func:`match_lesions`) when it is taken lesion by lesion (an instance target: the maps' values)."""
    p, g = target.mask(pred), target.mask(gt)
    row = {"label": target.labels_text(), "name": target.name, "kind": kind,
           **score_pair(p, g, kind, spacing[1:] if kind == "video" else spacing, tolerance_mm)}
    if target.instances:  # an instance map: each value one lesion, on both sides
        row.update(match_lesions(np.where(p, pred, 0), np.where(g, gt, 0), spacing, kind, rule,
                                 instances=True).columns())
    elif target.lesions:
        row.update(match_lesions(p, g, spacing, kind, rule).columns())
    return row


def _object_rows(gt: LabelFile, pred: LabelFile, spacing: tuple, kind: str, tolerance_mm: float) -> list:
    """A DICOM SEG's or RTSTRUCT's ground truth: a row per segment or ROI (labelled by its number), with the
    prediction's mask of it: the same-named segment/ROI of a SEG or RTSTRUCT prediction, else the voxels of a
    label map holding its number (as ``run --save-predictions`` writes a target)."""
    by_name = {t.name: t for t in pred.info.get("targets") or []}
    out = []
    for target in gt.info["targets"]:
        if pred.info.get("targets"):
            own = by_name.get(target.name)
            pred_mask = own.mask(pred.array) if own is not None else np.zeros(pred.array.shape, dtype=bool)
        else:
            pred_mask = pred.array == target.key
        row = {"label": target.key, "name": target.name, "kind": kind,
               **score_pair(pred_mask, target.mask(gt.array), kind, spacing, tolerance_mm)}
        out.append((row, pred_mask, target))
    return out


def format_lesions(rows: list[dict]) -> list[str]:
    """Each lesion-by-lesion target's lesions, one line each (true lesions, then the predicted ones)."""
    lines = []
    for row in rows:
        if "lesions" not in row:
            continue
        lines.append(f"{row['name']}: lesions found {row['lesions_found']} of {row['lesions_true']}, "
                     f"{row['lesions_false']} false positive(s), detection F1 {row['lesion_f1']:.4f}, "
                     f"mean lesion DSC {row['lesion_dice']:.4f}")
        for lesion in row["lesions"]:
            size = f" {lesion['volume_ml']:.3f} mL {lesion['size']}" if lesion.get("volume_ml") is not None else ""
            where = "" if lesion["first_slice"] is None else f", slices {lesion['first_slice']}-{lesion['last_slice']}"
            lines.append(f"  {lesion['source']:>9} {lesion['number']:>3}: {lesion['status']:<14} DSC "
                         f"{lesion['dice']:.4f}{size}{where}")
    return lines


def format_table(rows: list[dict], unit: str = "slices") -> str:
    """The rows as a fixed-width table, then one line per label on why it missed (``unit``: slices or frames)."""
    header = f"{'label':>5}  {'name':<14}{'DSC':>8}{'IoU':>8}{'NSD':>8}{'HD95':>9}{'gt vox':>10}{'pred vox':>10}"
    lines = [header]
    for r in rows:
        lines.append(
            f"{r['label']:>5}  {str(r['name'])[:14]:<14}{r['dice']:>8.4f}{r['iou']:>8.4f}{r['nsd']:>8.4f}"
            f"{r['hd95']:>9.3f}{int(r['gt_voxels']):>10}{int(r['pred_voxels']):>10}"
        )
    lines.append("why it missed (each part's share of the error; the parts add up to 1 - DSC):")
    lines.extend(f"{r['label']:>5}  {parts_text(r, unit=unit)}" for r in rows)
    lines.extend(format_lesions(rows))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.labels and 0 in args.labels:  # valid, but it scores the background
        print("warning: label 0 is the background: its DSC says how well the background was left alone, "
              "not how well a target was found", file=sys.stderr)
    options = lesion_option(args)
    rows = score_files(args.pred, args.gt, args.tolerance_mm, args.labels, args.kind, targets=args.targets,
                       lesions=LesionRule(**options) if options else None, convention=args.metrics_convention)
    for row in rows:
        if str(row["label"]) != "0" and int(row["pred_voxels"]) == 0:
            print(f"warning: label {row['label']}: the prediction is empty", file=sys.stderr)
    if args.json:
        print(json.dumps({"tolerance_mm": args.tolerance_mm, "labels": rows}, indent=2))
    elif args.csv:
        buffer = _io.StringIO()
        lesion_columns = ["lesions_true", "lesions_found", "lesions_missed", "lesions_false", "lesion_f1",
                          "lesion_dice"] if any("lesions" in row for row in rows) else []
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS + lesion_columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        sys.stdout.write(buffer.getvalue())
    else:
        convention = "" if args.metrics_convention == CONVENTIONS[0] else f"; metrics as {args.metrics_convention} computes them"
        print(f"NSD tolerance {args.tolerance_mm} mm{convention}")
        print(format_table(rows, unit="frames" if rows and rows[0]["kind"] == "video" else "slices"))
    return 0
