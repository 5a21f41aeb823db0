"""``medsam-eval compare RUN_A RUN_B``: paired comparison (B - A) of two runs on the same cases."""
from __future__ import annotations

import argparse
from pathlib import Path

from .common import add_overwrite_argument, positive_int, seed_int
from .commands import command_help
from .table_reading import add_lenient_argument, print_warnings


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("compare", help=command_help("compare"))
    parser.add_argument("run_a", type=Path, help="baseline run directory (A)")
    parser.add_argument("run_b", type=Path, help="run directory compared with it (B)")
    parser.add_argument("--metric", choices=["dice", "nsd"], default="dice", help="score to compare (default dice)")
    parser.add_argument("--out", type=Path, help="write compare.md, compare.csv and the difference plot here")
    parser.add_argument("--resamples", type=positive_int, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=seed_int, default=0, help="bootstrap seed (default 0)")
    add_overwrite_argument(parser)
    add_lenient_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..report import compare_runs, format_comparison, load_run, write_comparison

    from ..report.paired import check_resamples

    check_resamples(args.resamples, "--resamples")  # before the tables are read: 999999999999 is 8 TB of medians
    a, b = load_run(args.run_a, args.lenient), load_run(args.run_b, args.lenient)
    print_warnings(a, "A")
    print_warnings(b, "B")
    if args.out is not None:
        path, comparison = write_comparison(a, b, args.out, metric=args.metric, n_boot=args.resamples, seed=args.seed,
                                            overwrite=args.overwrite)
    else:
        path, comparison = None, compare_runs(a, b, metric=args.metric, n_boot=args.resamples, seed=args.seed)
    print(f"{args.metric}: B ({args.run_b}) - A ({args.run_a})")
    print(format_comparison(comparison))
    for note in comparison.attrs.get("notes", []):
        print(f"note: {note}")
    from ..report.compare_parts import part_changes

    changes = part_changes(a, b)
    if len(changes):
        print("\nwhy it failed, B - A (each error part's mean change over the pairs with parts in both runs):")
    for _, change in changes.iterrows():
        print(f"  {change['task']} ({change['n']} pairs): {change['sentence']}")
    from ..report.compare_effort import effort_comparison
    from ..report.document import text_table

    header, rows = effort_comparison(a.table, b.table)
    if rows:  # two corrections runs
        print("\neffort (corrections), each run's median over its cases:")
        print(text_table(header, rows))
    if path is not None:
        print(f"\ncomparison: {path}")
    return 0
