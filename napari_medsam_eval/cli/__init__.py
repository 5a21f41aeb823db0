"""The ``medsam-eval`` command line.

Each subcommand lives in its own module with ``add_parser(subparsers)`` and a
``run(args) -> int``. Errors this package raises on purpose are printed as one
line (``error: <file>: <problem>``) with exit status 2, and so are the
operating system's refusals (a full disk, a read-only folder: the file and the
reason); anything else is an internal error whose traceback ``--debug`` shows.
"""
from __future__ import annotations

import argparse
import gc
import signal
import sys
import warnings
from importlib import import_module

from ..core.errors import MedsamEvalError, os_error_words
from .commands import COMMANDS



class UsageError(MedsamEvalError):
    """A command line argparse refused (an unknown flag, a value of the wrong type or range)."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.usage = usage


class Parser(argparse.ArgumentParser):
    """argparse's parser whose refusals end like every other error (``error: ...``, exit 2), in-process
    callers (tests, scripts) included: :func:`main` returns 2 instead of exiting."""

    def error(self, message: str):  # type: ignore[override] - raises instead of exiting
        raise UsageError(f"{self.prog}: {message}", f"(`{self.prog} --help` lists every option)\n")


#: ``build_parser(only=ALL)``: every command's whole parser (tests, the CLI reference)
ALL = "*"


def build_parser(only: str | None = ALL) -> argparse.ArgumentParser:
    """The ``medsam-eval`` parser. ``only``: the command whose module is imported and whose options are
    parsed (the others are listed by name and help alone, :mod:`.commands`); None imports no command."""
    from .. import __version__

    parser = Parser(
        prog="medsam-eval",
        description="Evaluate promptable segmentation (LiteMedSAM, MedSAM2, SAM) of medical images and videos.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module, text) in COMMANDS.items():
        if only == ALL or only == name:
            import_module(f"{__name__}.{module}").add_parser(subparsers)
        else:
            subparsers.add_parser(name, help=text, add_help=False)
    if only in COMMANDS or only == ALL:  # a command's parser was built (never for the bare --help)
        from .common import IMAGE_COMMANDS, add_decoded_limit_argument

        for name in IMAGE_COMMANDS:
            if only == ALL or only == name:
                add_decoded_limit_argument(subparsers.choices[name])
    return parser


def _command_named(argv: list[str]) -> str | None:
    """The command a command line names (its first word that is one), else None."""
    return next((word for word in argv if word in COMMANDS), None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(only=_command_named(argv))
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.stderr.write(error.usage)  # one line: where to read the options, not the whole usage
        return 2
    try:
        from .common import IMAGE_COMMANDS, decoded_limit  # a command runs: its module imported common already

        with decoded_limit(args):
            if args.command in IMAGE_COMMANDS:  # a bad ceiling refused now, not once per case read
                from ..core.decoded_limit import memory_ceiling

                memory_ceiling()
            return int(args.func(args) or 0)
    except MedsamEvalError as error:
        if args.debug:
            raise
        print(f"error: {getattr(error, 'cli_text', None) or error}", file=sys.stderr)  # the CLI's words, if other
        return 2
    except OSError as error:  # the file system refused: name the file and the reason
        if args.debug:
            raise
        print(f"error: {os_error_words(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        terminated = isinstance(stop, Terminated)
        print("interrupted" + (" (SIGTERM)" if terminated else ""), file=sys.stderr)
        return 128 + signal.SIGTERM if terminated else 130
    except Exception as error:  # noqa: BLE001 - last line of defence for a CLI
        if args.debug:
            raise
        print(f"internal error: {type(error).__name__}: {error} (rerun with --debug for the traceback)", file=sys.stderr)
        return 1


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, as Ctrl+C is: a run records ``interrupted`` and keeps what it
    stored, the command says so and exits 143."""


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(f"signal {signum}")


#: the garbage collector's generation-0 threshold in the ``medsam-eval`` process (Python's default: 700)
GC_GEN0_THRESHOLD = 10_000


def show_warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      file=None, line: str | None = None) -> None:
    """A warning as the command's one line, ``warning: <message>`` (Python's shows the source line)."""
    print(f"warning: {message}", file=file or sys.stderr)


def console_main() -> None:
    """The ``medsam-eval`` command: :func:`main` with fewer garbage collections, and a quick exit.

    Importing torch, torchvision, timm and sympy makes about 500,000 objects
    that live as long as the process. With Python's default thresholds a
    LiteMedSAM run made 1,336 collections over them (1.1 s of an 8.7 s re-run
    of DeepLesion; 0.2 s and 93 collections at 10,000), and at exit Python
    collects over them again (about 1 s; frozen objects are skipped).
    Measured on the 2-vCPU VM docs/performance.md names. Everything a
    command writes is closed before :func:`main` returns; in-process callers
    (tests, scripts) call :func:`main` and keep their own settings (Python's
    warning format too: the command prints ``warning: <message>`` lines; and SIGTERM, which the command
    handles as Ctrl+C: :class:`Terminated`).
    """
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
    warnings.showwarning = show_warning_line
    signal.signal(signal.SIGTERM, _terminate)  # a job scheduler's stop, handled as Ctrl+C
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    console_main()
