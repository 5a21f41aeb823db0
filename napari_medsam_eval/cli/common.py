"""Option parsing the subcommands share."""
from __future__ import annotations

import json
from typing import Any


def json_options(text: str | None, what: str) -> dict[str, Any]:
    """A JSON object given on the command line (``what`` names the option in errors)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as error:
        raise SystemExit(f"error: {what} must be a JSON object, e.g. '{{\"margin\": 5}}' ({error})") from None
    if not isinstance(value, dict):
        raise SystemExit(f"error: {what} must be a JSON object, got {text!r}")
    return value


def propagation_option(text: str | None) -> str | dict | None:
    """A preset name as it is, JSON options as a dict."""
    if text is None or not text.lstrip().startswith("{"):
        return text
    return json_options(text, "--propagation")
