"""``medsam-eval report RUN_DIR``: per-task tables, figures and report.md/report.html of a run."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..benchmark.files import CSV_FILE, MANIFEST_FILE, PARQUET_FILE, ROWS_FILE
from ..core.errors import MedsamEvalError
from .common import add_overwrite_argument, non_negative_int
from .commands import command_help
from .table_reading import add_lenient_argument, print_warnings


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help=command_help("report"))
    parser.add_argument("run_dir", type=Path,
                        help=f"run directory (the first of {ROWS_FILE}, {PARQUET_FILE} and {CSV_FILE}; "
                             f"{MANIFEST_FILE}), or one results file")
    parser.add_argument("--worst", type=non_negative_int, default=5, metavar="K",
                        help="per-slice plots of the K worst cases (default 5)")
    parser.add_argument("--by", nargs="+", metavar="ATTRIBUTE",
                        help="split the task table by these case attributes (default: those with 2-8 values)")
    parser.add_argument("--out", type=Path, help="write the report here instead of in the run directory")
    add_overwrite_argument(parser)
    add_lenient_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..report import format_task_summary, load_run, write_report

    if args.worst < 0:
        raise MedsamEvalError(f"--worst must be >= 0, not {args.worst}")
    results = load_run(args.run_dir, args.lenient)
    print_warnings(results)
    print(format_task_summary(results.table))
    for note in results.notes:
        print(f"note: {note}")
    path = write_report(results, worst_k=args.worst, attributes=args.by, out_dir=args.out, overwrite=args.overwrite)
    print(f"\nreport: {path}\n        {path.with_suffix('.html')}")
    return 0
