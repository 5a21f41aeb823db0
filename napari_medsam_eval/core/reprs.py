"""Short printed forms: what a notebook shows for a case, a result or a model (never the arrays).

torchio's ``LabelMap(shape: ...; spacing: ...)`` is the model: a handful of facts on one line, whatever the
size of the data. :func:`one_line` makes ``Name(fact, key=value, ...)`` under :data:`REPR_LIMIT` characters
(the longest facts shortened first), :func:`html_facts` the same facts as a small HTML table for Jupyter's
``_repr_html_``. The classes that use them (:class:`~.case.Case`,
:class:`~napari_medsam_eval.propagation.segment.PropagationResult`, :class:`~napari_medsam_eval.models.base.SegmentResult`,
the model backends, the API's pair scores) say which facts they show.

Example::

    one_line("Case", ["volume 35x51x35 uint8"], {"spacing": "(z=2, y=1, x=1)"})
    # 'Case(volume 35x51x35 uint8, spacing=(z=2, y=1, x=1))'
"""
from __future__ import annotations

import html
import math
from typing import Any, Iterable, Mapping, Sequence

#: the longest line a short repr gives
REPR_LIMIT = 199


def shape_words(shape: Iterable[Any]) -> str:
    """``35x51x35``: an array's shape without brackets."""
    return "x".join(str(int(d)) for d in shape) or "scalar"


def number_words(value: Any) -> str:
    """``0.8123``, ``12``, ``nan``: a number to four significant figures, an int as it is."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) or (hasattr(value, "is_integer") and float(value).is_integer() and abs(value) < 1e15):
        return str(int(value))
    value = float(value)
    return f"{value:.4g}" if math.isfinite(value) else str(value)


def values_words(values: Sequence[Any], limit: int = 8) -> str:
    """``[1, 2, 3]``, or ``[1, 2, ... +40 more]`` past ``limit`` values."""
    shown = [str(v) for v in values[:limit]]
    more = len(values) - len(shown)
    return "[" + ", ".join(shown) + (f", ... +{more} more" if more > 0 else "") + "]"


def clip_words(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    text = str(text)
    return text if len(text) <= limit else text[:max(limit - 3, 0)] + "..."


def one_line(name: str, facts: Sequence[str], named: Mapping[str, str] | None = None,
             limit: int = REPR_LIMIT) -> str:
    """``name(fact, ..., key=value, ...)`` of at most ``limit`` characters: when too long, the longest part is
    shortened first (each part keeps at least 12 characters), then the line itself is cut."""
    parts = list(facts) + [f"{key}={value}" for key, value in (named or {}).items()]
    room = limit - len(name) - 2 - 2 * max(len(parts) - 1, 0)
    while sum(len(p) for p in parts) > room:
        longest = max(range(len(parts)), key=lambda i: len(parts[i]))
        excess = sum(len(p) for p in parts) - room
        if len(parts[longest]) <= 12:
            break
        parts[longest] = clip_words(parts[longest], max(len(parts[longest]) - excess, 12))
    return clip_words(f"{name}({', '.join(parts)})", limit)


def html_facts(title: str, facts: Mapping[str, Any]) -> str:
    """A small HTML table of ``facts`` under ``title`` in bold (Jupyter's ``_repr_html_``), every value escaped
    and cut to 300 characters."""
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(str(key))}</th>"
                   f"<td style='text-align:left'>{html.escape(clip_words(str(value), 300))}</td></tr>"
                   for key, value in facts.items())
    return f"<div><b>{html.escape(title)}</b><table>{rows}</table></div>"
