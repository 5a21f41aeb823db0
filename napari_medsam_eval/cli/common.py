"""Option parsing the subcommands share."""
from __future__ import annotations

import argparse
from typing import Any

from ..options import json_object

#: ``--embeddings``' help, one text for every subcommand that builds a model
EMBEDDINGS_HELP = ("keep the model's image embeddings in this folder (the embedding store, README 'Embedding "
                   "store'): a re-run over the same images skips the image encoder; LiteMedSAM and SAM only")


def add_embeddings_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--embeddings", metavar="DIR", help=EMBEDDINGS_HELP)


def embeddings_option(args: argparse.Namespace) -> dict[str, Any]:
    """The backend option of ``--embeddings`` (empty when it was not given); a folder that is not a store is refused."""
    folder = getattr(args, "embeddings", None)
    if folder:
        from ..embeddings.config import check_embeddings_folder

        check_embeddings_folder(str(folder))  # before any work: never a user's folder
    return {"embeddings": str(folder)} if folder else {}


def json_options(text: str | None, what: str) -> dict[str, Any]:
    """A JSON object given on the command line (``what`` names the option in errors)."""
    try:
        return json_object(text, what)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None


def propagation_option(text: str | None) -> str | dict | None:
    """A preset name as it is, JSON options as a dict."""
    if text is None or not text.lstrip().startswith("{"):
        return text
    return json_options(text, "--propagation")
