"""``medsam-eval propagation-study DATASET --out DIR``: a grid of propagation rules on a dataset.

Writes ``rows.csv`` (DSC, NSD and stops per case, target and setting),
``table.csv`` and ``table.md`` (per task and setting: median DSC [IQR] / median
NSD), with the official LiteMedSAM 3D-box loop (given the z-extent) beside the
volume settings. Each slice is encoded once for the whole grid.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..datasets import available_layouts
from ..models import build_backend
from .common import (add_embeddings_argument, add_overwrite_argument, add_precision_argument, add_targets_argument,
                     check_calibration_apart, targets_option,
                     embeddings_option, positive_int, precision_option)
from .commands import command_help


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "propagation-study",
        help=command_help("propagation-study"),
        description="Propagate the MedSAM2 protocol's prompt of every target with each setting of a grid of "
        "propagation rules (volumes and videos have their own grid), encoding each slice once, and write the "
        "per-task table.",
    )
    parser.add_argument("dataset", type=Path, help="dataset folder (any layout `run` reads)")
    parser.add_argument("--out", type=Path, required=True, help="output folder (made if needed)")
    parser.add_argument("--model", default="litemedsam", help="per-slice model (default litemedsam)")
    parser.add_argument("--checkpoint", type=Path, help="model weights (default: the model's shipped weights)")
    add_embeddings_argument(parser)
    add_precision_argument(parser)
    parser.add_argument("--device", help="cpu, cuda, cuda:N (default: the model's choice)")
    parser.add_argument("--limit", type=positive_int, help="only the first K cases")
    parser.add_argument("--layout", choices=available_layouts(), help="dataset layout (default: detected)")
    parser.add_argument("--no-official", action="store_true", help="leave out the official 3D-box reference")
    add_targets_argument(parser, lesions=False)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_overwrite_argument(parser)
    parser.set_defaults(func=run)


#: the files the study writes into its --out folder
STUDY_FILES = ("rows.csv", "table.csv", "table.md")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..studies.propagation_study import run_propagation_study, study_table, table_markdown

    from ..report.folder import check_output_folder, record_written

    check_output_folder(args.out, STUDY_FILES, "propagation study", args.overwrite)  # before any work
    options = {k: v for k, v in (("checkpoint", args.checkpoint and str(args.checkpoint)),
                                 ("device", args.device)) if v}
    options.update(embeddings_option(args))
    options.update(precision_option(args, args.model, options))
    check_calibration_apart(options, [args.dataset])
    backend = build_backend(args.model, **options)
    if getattr(backend, "propagates_natively", False):
        print(f"error: {args.model} propagates with its own memory; the study is for per-slice models",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tqdm(unit="case", file=sys.stderr, disable=args.quiet) as bar:
        def progress(step) -> None:
            bar.total = step.total
            bar.set_postfix_str(step.case_id)
            bar.update(1)

        rows = run_propagation_study(args.dataset, backend, limit=args.limit, layout=args.layout,
                                     official=not args.no_official, progress=progress,
                                     targets=targets_option(args))
    table = study_table(rows)
    rows.to_csv(args.out / "rows.csv", index=False)
    table.to_csv(args.out / "table.csv", index=False)
    markdown = table_markdown(table)
    (args.out / "table.md").write_text(markdown, encoding="utf-8")
    record_written(args.out, STUDY_FILES)
    print(markdown)
    print(f"rows: {args.out / 'rows.csv'}; table: {args.out / 'table.md'}")
    return 0
