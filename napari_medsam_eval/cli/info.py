"""``medsam-eval info PATH``: what a file holds (kind, shape, spacing, labels)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ..core.array_blocks import value_counts
from ..core.case import Case
from ..io import read_case
from .common import SERIES_HELP
from .commands import command_help


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("info", help=command_help("info"))
    parser.add_argument("path", type=Path, help="image file or folder (NIfTI, NRRD, MHA, DICOM folder, npz, PNG/JPG, video, frame folder)")
    parser.add_argument("--label", type=Path, help="ground-truth file to pair with the image")
    parser.add_argument("--kind", choices=["volume", "video", "image"], help="override the detected kind")
    parser.add_argument("--series-id", metavar="UID", help=SERIES_HELP)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.set_defaults(func=run)


def describe_case(case: Case) -> dict:
    """Plain facts about a case, as printed by ``info``."""
    image = case.image
    facts: dict = {
        "case_id": case.case_id,
        "kind": case.kind,
        "modality": case.modality,
        "shape": list(image.shape),
        "axes": case.axes.upper() + ("C" if case.has_channels else ""),
        "dtype": str(image.dtype),
        "spacing_axes": list(case.spacing.axes),
        "spacing": [_rounded(v) for v in case.spacing.values],
        "spacing_unit": spacing_unit(case),
        "intensity": {"min": float(image.min()), "max": float(image.max()), "mean": round(float(image.mean()), 3)},
    }
    if case.label is not None:
        values, counts = value_counts(case.label)  # np.unique would sort a copy of the whole label map
        names = case.label_names
        voxel_volume = float(np.prod(case.spacing.values)) if case.kind == "volume" else None
        facts["labels"] = [
            {
                "value": int(v),
                "name": names.get(int(v), ""),
                "voxels": int(n),
                **({"volume_ml": round(n * voxel_volume / 1000.0, 3)} if voxel_volume else {}),
            }
            for v, n in zip(values, counts)
        ]
    if case.label is not None and case.metadata.get("targets"):
        facts["targets"] = [{"number": t.key, "name": t.name, "labels": list(t.labels),
                             "voxels": int(np.count_nonzero(t.mask(case.label)))} for t in case.metadata["targets"]]
        facts["source"] = case.metadata.get("dicom_objects")
    if case.metadata.get("notes"):
        facts["notes"] = list(case.metadata["notes"])
    return facts


def spacing_unit(case: Case) -> str:
    """``"mm"`` or ``"pixel"``: what the case's spacing counts, as its reader recorded it.

    Readers that know say so (``metadata['spacing_unit']``: a TIFF stating its
    pixel size gives mm, as a single image and as a folder of frames alike);
    otherwise volumes and videos from a header are in mm and 2D images in pixels.
    """
    return str(case.metadata.get("spacing_unit") or ("pixel" if case.kind == "image" else "mm"))


def _rounded(value: float) -> float:
    """3 decimals, or 3 significant digits below 0.1 (a microscope's 0.00024 mm stays 0.00024)."""
    return round(value, 3) if abs(value) >= 0.1 else float(f"{value:.3g}")


def _spacing_line(facts: dict) -> str:
    axes = ", ".join(facts["spacing_axes"])
    spacing = ", ".join(str(v) for v in facts["spacing"])
    unit = "mm" if facts["spacing_unit"] == "mm" else "pixels"
    frames = " (t: frames)" if "t" in facts["spacing_axes"] else ""
    return f"spacing ({axes}) = ({spacing}) {unit}{frames}"


def format_text(facts: dict) -> str:
    lines = [
        f"case      {facts['case_id']}",
        f"kind      {facts['kind']}" + (f" ({facts['modality']})" if facts["modality"] else ""),
        f"shape     {tuple(facts['shape'])}  axes {facts['axes']}  dtype {facts['dtype']}",
        _spacing_line(facts),
        f"intensity min {facts['intensity']['min']:g}  max {facts['intensity']['max']:g}  mean {facts['intensity']['mean']:g}",
    ]
    if "labels" in facts:
        lines.append("labels")
        for row in facts["labels"]:
            extra = f"  {row['volume_ml']} mL" if "volume_ml" in row else ""
            name = f" ({row['name']})" if row["name"] else ""
            lines.append(f"  {row['value']:>4}{name}: {row['voxels']} voxels{extra}")
    else:
        lines.append("labels    none")
    if "targets" in facts:  # a SEG's segments or an RTSTRUCT's ROIs: each its own mask, overlaps included
        lines.append(f"targets   ({facts.get('source') or 'objects'}: each its own mask)")
        for row in facts["targets"]:
            shared = f" (labels {', '.join(map(str, row['labels']))})" if len(row["labels"]) > 1 else ""
            lines.append(f"  {row['number']:>4} {row['name']}: {row['voxels']} voxels{shared}")
    lines.extend(f"note      {note}" for note in facts.get("notes", []))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    case = read_case(args.path, args.label, kind=args.kind, series_id=args.series_id)
    facts = describe_case(case)
    print(json.dumps(facts, indent=2) if args.json else format_text(facts))
    return 0
