"""How the commands that read a user's results table (``report``, ``compare``) take ``--lenient`` and say
what the reading found: the option defined once, and its warnings printed one line each on stderr."""
from __future__ import annotations

import argparse
import sys
from typing import Any

LENIENT_HELP = ("skip the rows of a results table that fail its checks (a duplicated case and target, a "
                "number column holding text, a CSV line cut short) and say how many and why, rather than "
                "stop at the first one")


def add_lenient_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lenient", action="store_true", help=LENIENT_HELP)


def print_warnings(results: Any, name: str = "") -> None:
    """Each of a :class:`~napari_medsam_eval.report.results.RunResults`' warnings as ``warning: ...`` on stderr
    (``name``: which run, when there are two)."""
    for warning in results.warnings:
        print(f"warning: {name + ': ' if name else ''}{warning}", file=sys.stderr)


__all__ = ["LENIENT_HELP", "add_lenient_argument", "print_warnings"]
