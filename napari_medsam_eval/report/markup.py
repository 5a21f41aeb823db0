"""A tiny document model rendered both as GitHub Markdown and as a self-contained HTML page.

A document is a list of blocks, built with the helpers below; text is plain
(escaped for each output, never interpreted), so a case id or an error
message with ``|``, ``<`` or ``*`` in it cannot break the layout.
"""
from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..core.palette import REPORT_SERIES
from ..core.temp_files import temporary_beside

#: the page's style: neutral greys for text and table lines, the report's series colour for the title rule
CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 72em;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid REPORT_SERIES; padding-bottom: .2em; }
h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .8em 0; font-size: .92em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; }
th { background: #f0f3f8; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; border: 1px solid #eee; margin: .4em 0; }
code { background: #f4f4f4; padding: 0 .25em; }
.note { color: #666; font-size: .9em; }
""".replace("REPORT_SERIES", REPORT_SERIES)


def heading(text: str, level: int = 2) -> tuple:
    return ("heading", level, text)


def paragraph(text: str, note: bool = False) -> tuple:
    return ("paragraph", text, note)


def bullets(items: Iterable[str]) -> tuple:
    return ("bullets", list(items))


def table(header: Sequence[str], rows: Iterable[Sequence], numeric: Sequence[bool] | None = None) -> tuple:
    rows = [[cell_text(v) for v in row] for row in rows]
    return ("table", list(header), rows, list(numeric) if numeric else [False] * len(header))


def image(src: str, alt: str) -> tuple:
    return ("image", src, alt)


def link(text: str, href: str) -> tuple:
    return ("link", text, href)


def cell_text(value, digits: int = 3) -> str:
    """A table cell: floats with ``digits`` decimals, NaN/None/NA (a missing ``Int64``) as ``n/a``."""
    if value is None or value is pd.NA:
        return "n/a"
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "n/a"
        return f"{value:.{digits}f}" if abs(value) < 1e6 else f"{value:.3g}"
    if isinstance(value, (np.integer,)):
        return str(int(value))
    return str(value)


def _md_escape(text: str) -> str:
    # intraword underscores are literal in CommonMark, so task names like liver_tumor stay readable
    return str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace("*", "\\*") \
        .replace("`", "\\`")


def to_markdown(blocks: Sequence[tuple]) -> str:
    lines: list[str] = []
    for block in blocks:
        kind = block[0]
        if kind == "heading":
            lines += ["#" * block[1] + " " + _md_escape(block[2]), ""]
        elif kind == "paragraph":
            text = _md_escape(block[1])
            lines += [f"_{text}_" if block[2] else text, ""]
        elif kind == "bullets":
            lines += [f"- {_md_escape(item)}" for item in block[1]] + [""]
        elif kind == "table":
            _, header, rows, numeric = block
            lines.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
            lines.append("|" + "|".join("---:" if n else "---" for n in numeric) + "|")
            lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
            lines.append("")
        elif kind == "image":
            lines += [f"![{_md_escape(block[2])}]({block[1]})", ""]
        elif kind == "link":
            lines += [f"[{_md_escape(block[1])}]({block[2]})", ""]
    return "\n".join(lines).rstrip() + "\n"


def to_html(blocks: Sequence[tuple], title: str) -> str:
    esc = html.escape
    body: list[str] = []
    for block in blocks:
        kind = block[0]
        if kind == "heading":
            body.append(f"<h{block[1]}>{esc(block[2])}</h{block[1]}>")
        elif kind == "paragraph":
            body.append(f'<p class="note">{esc(block[1])}</p>' if block[2] else f"<p>{esc(block[1])}</p>")
        elif kind == "bullets":
            body.append("<ul>" + "".join(f"<li>{esc(item)}</li>" for item in block[1]) + "</ul>")
        elif kind == "table":
            _, header, rows, numeric = block
            head = "".join(f"<th>{esc(h)}</th>" for h in header)
            cells = ["".join(f'<td class="num">{esc(c)}</td>' if n else f"<td>{esc(c)}</td>"
                             for c, n in zip(row, numeric)) for row in rows]
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>"
                        + "".join(f"<tr>{c}</tr>" for c in cells) + "</tbody></table>")
        elif kind == "image":
            body.append(f'<p><a href="{esc(block[1])}"><img src="{esc(block[1])}" alt="{esc(block[2])}"></a></p>')
        elif kind == "link":
            body.append(f'<p><a href="{esc(block[2])}">{esc(block[1])}</a></p>')
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = temporary_beside(path)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temp, path)
    finally:
        Path(temp).unlink(missing_ok=True)
    return path
