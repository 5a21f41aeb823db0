"""The command-line reference, written from the live ``medsam-eval`` parsers (so it cannot drift).

``render()`` gives the Markdown of every subcommand: its usage, its positional
arguments and every option with its default, read from
:func:`napari_medsam_eval.cli.build_parser`. The MkDocs hook
(``scripts/mkdocs_hooks.py``) puts it into ``docs/cli.md`` at build time;
``python scripts/cli_reference.py`` prints it.

``unknown_options(markdown)`` lists the ``medsam-eval`` command lines in a
page's code blocks that name a subcommand or an option the parser does not
have; the hook turns each into a build warning (an error under ``--strict``).
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

#: where the generated reference goes in ``docs/cli.md``
MARKER = "<!-- cli-reference -->"


def parsers() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each subcommand's, in ``--help`` order (every command's module imported)."""
    from napari_medsam_eval.cli import build_parser

    top = build_parser()
    (sub,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return top, dict(sub.choices)


def option_strings(parser: argparse.ArgumentParser) -> list[str]:
    """Every option string of ``parser`` (``-h``, ``--help``, ``--out`` ...)."""
    return [s for action in parser._actions for s in action.option_strings]


def _default(action: argparse.Action) -> str:
    """What applies when the option is not given, as the parser holds it."""
    if action.required:
        return "required"
    if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
        return ""
    if isinstance(action, argparse._StoreTrueAction):
        return "switch, off by default"
    if isinstance(action, argparse._StoreFalseAction):
        return "switch, on by default"
    if action.default is None or action.default == argparse.SUPPRESS or action.default == []:
        return "optional"  # what applies then is in the help text (a None default is resolved later)
    if isinstance(action.default, (list, tuple)):
        return "default `" + " ".join(str(v) for v in action.default) + "`"
    return f"default `{action.default}`"


def _name(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    """The argument as ``--help`` shows it, each option string a code span: `` `-h`, `--help` ``."""
    if not action.option_strings:
        return f"`{formatter._metavar_formatter(action, action.dest)(1)[0]}`"
    if action.nargs == 0:
        return ", ".join(f"`{s}`" for s in action.option_strings)
    return ", ".join(f"`{s} {formatter._format_args(action, action.dest.upper())}`" for s in action.option_strings)


def _help(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    text = formatter._expand_help(action)
    return " ".join(text.split()).replace("<", "&lt;").replace(">", "&gt;")


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    lines = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        default = _default(action)
        kind = "argument" if not action.option_strings else default
        extra = f" ({kind})" if kind else ""
        help_text = _help(action, formatter)
        lines.append(f"- **{_name(action, formatter)}**{extra}" + (f": {help_text}" if help_text else ""))
    return lines


def render() -> str:
    """The reference in Markdown: the global options, then each subcommand (usage, arguments, options)."""
    from napari_medsam_eval.cli.commands import COMMANDS

    os.environ["COLUMNS"] = "100"  # argparse wraps usage lines to the terminal: the same page everywhere
    top, subs = parsers()
    out = ["## `medsam-eval`", "", top.description or "", "",
           "```text", top.format_usage().strip(), "```", "", *_arguments(top), "",
           "| command | what it does |", "|---|---|"]
    out += [f"| [`{name}`](#medsam-eval-{name}) | {text} |" for name, (_, text) in COMMANDS.items()]
    for name, parser in subs.items():
        out += ["", f"## `medsam-eval {name}` {{#medsam-eval-{name}}}", "", COMMANDS[name][1] + ".", ""]
        if parser.description:
            out += [" ".join(parser.description.split()), ""]
        out += ["```text", parser.format_usage().strip(), "```", "", *_arguments(parser)]
    return "\n".join(out) + "\n"


_BLOCK = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1", re.S | re.M)


def command_lines(markdown: str) -> list[str]:
    """The ``medsam-eval ...`` lines of the fenced code blocks of ``markdown`` (continuations joined,
    comments and a leading ``$`` dropped)."""
    lines: list[str] = []
    for block in _BLOCK.finditer(markdown):
        text = block.group(2).replace("\\\n", " ")
        for line in text.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("medsam-eval"):
                lines.append(line.split(" #", 1)[0].strip())
    return lines


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:  # an unbalanced quote in a sketch of a command: split on blanks
        return line.split()


def unknown_options(markdown: str) -> list[str]:
    """``"<line>: <problem>"`` for each command line in ``markdown``'s code blocks that names a
    subcommand or an option (``--name``) the parsers do not have."""
    top, subs = parsers()
    problems = []
    for line in command_lines(markdown):
        words = _words(line)[1:]
        command = next((w for w in words if not w.startswith("-")), None)
        if command is None:
            continue
        if command not in subs:
            problems.append(f"{line}: no command {command!r}")
            continue
        known = set(option_strings(top)) | set(option_strings(subs[command]))
        for word in words:
            option = word.strip("[](){}").split("=", 1)[0]
            if option.startswith("--") and option not in known:
                problems.append(f"{line}: {command} has no option {option}")
    return problems


if __name__ == "__main__":
    sys.stdout.write(render())
