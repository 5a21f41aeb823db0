"""Options a user types as JSON (the CLI's ``--*-options``, the widgets' option fields), read once.

:func:`json_object` turns the text into a dict or says, naming the option, why it cannot;
:func:`checked_protocol_options` and :func:`checked_propagation` try the options on what
they configure before any work starts (a protocol built with them, the propagation rules
resolved), so a misspelt key or a value out of range is refused with the option named.
"""
from __future__ import annotations

import json
from typing import Any


def json_object(text: str | None, what: str) -> dict[str, Any]:
    """The JSON object in ``text`` (empty text: ``{}``); ValueError naming ``what`` otherwise."""
    if text is None or not str(text).strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{what} must be a JSON object, e.g. '{{\"margin\": 5}}' ({error})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, got {text!r}")
    return value


def propagation_value(text: str | None, what: str = "propagation") -> str | dict[str, Any] | None:
    """A preset name as it is (None or empty: the data's default), JSON options as a dict."""
    if text is None or not str(text).strip():
        return None
    text = str(text).strip()
    return json_object(text, what) if text.startswith("{") else text


def checked_protocol_options(protocol: str, options: dict[str, Any], what: str = "protocol options") -> None:
    """ValueError naming ``what`` when ``protocol`` cannot be built with ``options``."""
    from .protocols import build_protocol

    try:
        build_protocol(protocol, **options)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what}: {error}") from None


def checked_propagation(propagation: str | dict[str, Any] | None, what: str = "propagation") -> None:
    """ValueError naming ``what`` when ``propagation`` (a preset or rule options) is not a rule set."""
    if propagation is None:
        return
    from .propagation import resolve_rules

    try:
        for kind in ("volume", "video"):
            resolve_rules(kind, propagation)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what}: {error}") from None


__all__ = ["checked_propagation", "checked_protocol_options", "json_object", "propagation_value"]
