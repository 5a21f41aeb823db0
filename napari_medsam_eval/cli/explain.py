"""``medsam-eval explain RUN_DIR``: what would fix each result, by re-running it with one stage made perfect."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..benchmark.files import MANIFEST_FILE
from .common import add_embeddings_argument, embeddings_option, positive_int
from .commands import command_help


#: --masks: as the run saved its predictions, always, never
MASK_CHOICES = ("auto", "save", "none")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("explain", help=command_help("explain"),
                                   description="Re-run each scored result of a run with one stage made perfect "
                                               "(the true extent, the best prompt slice, the true box on every "
                                               "slice) and write explain.csv beside the results; resumable.")
    parser.add_argument("run_dir", type=Path, help=f"a finished run directory (with {MANIFEST_FILE})")
    parser.add_argument("--cases", nargs="+", metavar="CASE_ID", help="explain these cases only")
    parser.add_argument("--limit", type=positive_int, metavar="K", help="explain the first K cases only")
    parser.add_argument("--masks", choices=MASK_CHOICES, default="auto",
                        help="write each variant's mask under explain/: auto = when the run saved its predictions "
                             "(default auto)")
    add_embeddings_argument(parser)
    parser.add_argument("--no-report", action="store_true", help="do not rewrite report.md/report.html")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..benchmark.explain import EXPLAIN_FILE, explain_cost, explain_run
    from ..report.explain_section import explain_summary_lines, run_seconds

    options = embeddings_option(args)
    print(explain_cost(args.run_dir, cases=args.cases, limit=args.limit, model_options=options).words(),
          file=sys.stderr)  # before it starts: what it will cost
    bar = None if args.quiet else tqdm(total=0, unit="case", desc="explain", file=sys.stderr)

    def progress(done: int, total: int, case_id: str) -> None:
        if bar is not None and total:
            bar.total = total
            bar.n = done
            bar.set_postfix_str(case_id)
            bar.refresh()
    start = time.perf_counter()
    try:
        table = explain_run(args.run_dir, cases=args.cases, limit=args.limit, save_masks={"auto": None, "save": True, "none": False}[args.masks],
                            progress=progress, model_options=options)
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - start
    print(f"explained: {args.run_dir / EXPLAIN_FILE} ({len(table)} results)")
    for line in explain_summary_lines(table):
        print(f"  {line}")
    ran = run_seconds(args.run_dir, table)
    if ran:
        print(f"this call took {seconds:.1f} s; the run took {ran:.1f} s on these results")
    if not args.no_report:
        from .run import _write_report

        _write_report(args.run_dir)
    return 0
