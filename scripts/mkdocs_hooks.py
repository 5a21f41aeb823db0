"""MkDocs hook: writes the command-line reference into ``docs/cli.md`` from the live parsers, and
warns (an error under ``--strict``) on a ``medsam-eval`` code line naming a command or an option the
parsers do not have. Listed under ``hooks:`` in ``mkdocs.yml``."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cli_reference  # noqa: E402 - the generator beside this file

log = logging.getLogger("mkdocs.hooks.medsam_eval")


def on_page_markdown(markdown: str, page, config, files) -> str:
    for problem in cli_reference.unknown_options(markdown):
        log.warning("%s: %s", page.file.src_path, problem)
    if cli_reference.MARKER in markdown:
        markdown = markdown.replace(cli_reference.MARKER, cli_reference.render())
    return markdown
