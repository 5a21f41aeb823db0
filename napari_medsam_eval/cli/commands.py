"""The subcommands of ``medsam-eval``: their names, modules and one-line help, with no import.

``medsam-eval --help`` lists them from here without importing any of them, and a
command line imports only the module of the command it names (:func:`..build_parser`).
"""
from __future__ import annotations

#: command -> (module in this package, one-line help), in the order ``--help`` lists them
COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("info", "describe an image/volume/video and its labels"),
    "score": ("score", "score a predicted label map against ground truth"),
    "segment": ("segment", "segment one image/volume/video from a box or points and write the mask"),
    "run": ("run", "benchmark a model with a prompt protocol on a dataset folder"),
    "report": ("report", "summarise a benchmark run: tables, figures, report.md/.html"),
    "compare": ("compare", "paired comparison of two benchmark runs (B - A) per task"),
    "prompt-study": ("study", "prompt modes 1-5 of Mazurowski et al. 2023 on 2D images: IoU table and figure"),
    "propagation-study": ("propagation_study", "a grid of propagation stop/tracking rules on a dataset: median "
                                               "DSC [IQR] and NSD per setting"),
    "explain": ("explain", "what would fix each result: re-run it with one stage made perfect (explain.csv)"),
    "cache": ("cache", "show or clear the persistent embedding store"),
}


def command_help(name: str) -> str:
    """The one-line help of command ``name`` (its module's parser uses it too)."""
    return COMMANDS[name][1]


__all__ = ["COMMANDS", "command_help"]
