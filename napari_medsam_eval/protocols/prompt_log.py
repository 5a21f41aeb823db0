"""The prompt log: every drawn prompt next to the prompt a protocol would have made (no Qt).

When ground truth is open, the Segment widget logs each prompt a person draws and
segments with (:mod:`napari_medsam_eval._widgets.segment._prompt_log`) as one row of a CSV
table, beside the prompt the chosen protocol (default ``medsam2``) makes from the ground
truth for the same target and slice. The schema is :data:`COLUMNS`, defined here once:

======================  ==================================================================
column                  meaning
======================  ==================================================================
``time``                when the row was written (ISO 8601, UTC)
``case_id``             the image's case id (the reader's ``case_id``, else the layer name)
``image_path``          the file the image was opened from ('' when unknown)
``kind``                ``volume``, ``video`` or ``image``
``target_label``        the label value (object) segmented
``slice_index``         the prompted slice / frame ('' for a 2D image)
``operation``           ``slice`` (Segment slice), ``propagate`` or ``correct``
``model``               the model that segmented (``litemedsam``, ...)
``drawn_boxes``         JSON ``[[x0, y0, x1, y1], ...]``, pixels, inclusive (:mod:`..core.prompt`)
``drawn_points``        JSON ``[[x, y], ...]``
``drawn_point_labels``  JSON ``[1, 0, ...]`` (1 positive, 0 negative)
``protocol``            the protocol compared with (its name)
``protocol_box``        JSON ``[x0, y0, x1, y1]`` of its prompt on that slice ('' if none)
``box_iou``             IoU of the first drawn box and the protocol's box (NaN without a box)
``centre_offset_px``    distance of the two prompts' centres (box centre; points: mean of
                        the positive ones), pixels
``centre_offset_mm``    the same in mm, with the image's in-plane spacing
``spacing_mm``          JSON ``[row, column]`` spacing used for the mm offset
``drawn_dsc``           DSC of what the user got, over the whole case (the benchmark's DSC)
``protocol_dsc``        DSC of the protocol's prompt segmented the same way (same slice,
                        or propagated with the same options); NaN for ``correct``
``drawn_dsc_slice``     DSC of the drawn prompt's result on the prompted slice alone
``protocol_dsc_slice``  the same for the protocol's prompt
``options``             JSON propagation options the user had (``margin``, ``z_limits``, ``rules``)
======================  ==================================================================

Rows are appended with :func:`append_row`: one ``write`` of a whole line to a file opened
for appending, under an exclusive lock (``fcntl.flock`` where there is one) and synced, so
concurrent writers never interleave or lose a row; the header is written by the first.
:func:`read_log` reads a log back as :class:`LoggedPrompt` rows and refuses a malformed
one with :class:`PromptLogError` naming the file and the line. ``medsam-eval run DATASET
--prompts LOG.csv`` replays the drawn prompts (:mod:`napari_medsam_eval.protocols.replay`).

Where: :func:`default_log_path` - ``$MEDSAM_EVAL_PROMPT_LOG`` when set, else
``~/medsam-eval/prompt_log.csv`` (the widget's *prompt log* field overrides it);
``MEDSAM_EVAL_PROMPT_LOG=off`` starts the widget with logging off.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ..core.errors import DataError
from ..evaluation.metrics import compute_dice
from ..core.prompt import Prompt, PromptError, check_box
from ..core.errors import InputError

try:  # POSIX: a lock around the append; elsewhere O_APPEND alone
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

#: the table's columns, in order (the header line)
COLUMNS: tuple[str, ...] = (
    "time", "case_id", "image_path", "kind", "target_label", "slice_index", "operation", "model",
    "drawn_boxes", "drawn_points", "drawn_point_labels", "protocol", "protocol_box", "box_iou",
    "centre_offset_px", "centre_offset_mm", "spacing_mm", "drawn_dsc", "protocol_dsc", "drawn_dsc_slice",
    "protocol_dsc_slice", "options",
)
#: what a row's ``operation`` may be; the replay runs ``slice`` and ``propagate`` rows
OPERATIONS = ("slice", "propagate", "correct")
REPLAYABLE = ("slice", "propagate")
#: the environment variable naming the log file (unset: no log until the user names one)
LOG_ENV = "MEDSAM_EVAL_PROMPT_LOG"

_THREAD_LOCK = threading.Lock()  # flock is per open file: threads of one process take this too


class PromptLogError(DataError, ValueError):
    """A prompt log that cannot be read or written (the message names the file and the line)."""


def default_log_path() -> Path | None:
    """``$MEDSAM_EVAL_PROMPT_LOG`` when it names a file, else None: nothing is written where the user did not say
    (the home folder was the default once: a log nobody asked for, and propagations run for it in the background)."""
    named = os.environ.get(LOG_ENV, "").strip()
    return Path(named).expanduser() if named and not logging_off() else None


def shown_path(path: Path) -> str:
    """``path`` as a person reads it on screen: the home folder as ``~``."""
    try:
        return str(Path("~") / Path(path).relative_to(Path.home()))
    except ValueError:
        return str(path)


def logging_off() -> bool:
    """Whether the widget starts with logging off: unless ``$MEDSAM_EVAL_PROMPT_LOG`` names a file, it does."""
    named = os.environ.get(LOG_ENV, "").strip()
    return not named or named.lower() == "off"


# -- geometry -------------------------------------------------------------------


def box_iou(a: Sequence[float] | None, b: Sequence[float] | None) -> float:
    """IoU of two inclusive pixel boxes ``(x0, y0, x1, y1)`` (areas ``(x1 - x0 + 1) * (y1 - y0 + 1)``); NaN
    when either is missing."""
    if a is None or b is None:
        return math.nan
    ax0, ay0, ax1, ay1 = (float(v) for v in a)
    bx0, by0, bx1, by1 = (float(v) for v in b)
    iw = min(ax1, bx1) - max(ax0, bx0) + 1
    ih = min(ay1, by1) - max(ay0, by0) + 1
    inter = max(iw, 0.0) * max(ih, 0.0)
    union = (ax1 - ax0 + 1) * (ay1 - ay0 + 1) + (bx1 - bx0 + 1) * (by1 - by0 + 1) - inter
    return inter / union if union > 0 else math.nan


def prompt_centre(prompt: Prompt) -> tuple[float, float] | None:
    """``(x, y)``: the first box's centre, else the mean of the positive points (of all points when none
    is positive); None for an empty prompt."""
    if prompt.boxes:
        x0, y0, x1, y1 = (float(v) for v in prompt.boxes[0])
        return (x0 + x1) / 2, (y0 + y1) / 2
    if not prompt.points:
        return None
    points = np.asarray(prompt.points, dtype=float).reshape(-1, 2)
    positive = np.asarray(prompt.point_labels, dtype=int) == 1
    chosen = points[positive] if positive.any() else points
    return float(chosen[:, 0].mean()), float(chosen[:, 1].mean())


def centre_offset(a: Prompt, b: Prompt, spacing_yx: Sequence[float] = (1.0, 1.0)) -> tuple[float, float]:
    """``(pixels, mm)`` between the centres of two prompts (NaN when either has none)."""
    ca, cb = prompt_centre(a), prompt_centre(b)
    if ca is None or cb is None:
        return math.nan, math.nan
    dx, dy = cb[0] - ca[0], cb[1] - ca[1]
    sy, sx = (float(v) for v in spacing_yx)
    return math.hypot(dx, dy), math.hypot(dx * sx, dy * sy)


def slice_dice(mask: np.ndarray, truth: np.ndarray, kind: str, index: int | None) -> float:
    """DSC on slice ``index`` alone (the whole image for a 2D image)."""
    if kind == "image" or index is None:
        return compute_dice(mask, truth)
    return compute_dice(mask[int(index)], truth[int(index)])


def whole_mask(mask: np.ndarray, shape: Sequence[int], kind: str, index: int | None) -> np.ndarray:
    """A slice's 2D mask placed in an empty mask of the case (a whole-case mask as it is)."""
    mask = np.asarray(mask, dtype=bool)
    if mask.shape == tuple(shape):
        return mask
    full = np.zeros(tuple(shape), dtype=bool)
    full[int(index)] = mask
    return full


def make_row(*, case_id: str, image_path: str = "", kind: str, drawn: Prompt, operation: str, model: str | None,
             protocol: str, protocol_prompt: Prompt | None, spacing_yx: Sequence[float], drawn_dsc: float,
             protocol_dsc: float, drawn_dsc_slice: float, protocol_dsc_slice: float,
             options: dict[str, Any] | None = None, time: str | None = None) -> dict[str, Any]:
    """One log row (every column of :data:`COLUMNS`)."""
    if operation not in OPERATIONS:
        raise InputError(f"operation must be one of {OPERATIONS}, got {operation!r}")
    their_box = protocol_prompt.boxes[0] if protocol_prompt is not None and protocol_prompt.boxes else None
    pixels, mm = (math.nan, math.nan) if protocol_prompt is None else centre_offset(drawn, protocol_prompt, spacing_yx)
    return {
        "time": time or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "case_id": str(case_id), "image_path": str(image_path or ""), "kind": kind,
        "target_label": int(drawn.target_label),
        "slice_index": "" if drawn.slice_index is None else int(drawn.slice_index),
        "operation": operation, "model": model or "",
        "drawn_boxes": _json([list(map(float, b)) for b in drawn.boxes]),
        "drawn_points": _json([list(map(float, p)) for p in drawn.points]),
        "drawn_point_labels": _json([int(v) for v in drawn.point_labels]),
        "protocol": protocol, "protocol_box": "" if their_box is None else _json(list(map(float, their_box))),
        "box_iou": box_iou(drawn.boxes[0] if drawn.boxes else None, their_box),
        "centre_offset_px": pixels, "centre_offset_mm": mm, "spacing_mm": _json([float(v) for v in spacing_yx]),
        "drawn_dsc": drawn_dsc, "protocol_dsc": protocol_dsc, "drawn_dsc_slice": drawn_dsc_slice,
        "protocol_dsc_slice": protocol_dsc_slice, "options": _json(_plain(options or {})),
    }


# -- writing --------------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return "nan" if not math.isfinite(float(value)) else repr(float(value))
    return str(value)


def _line(values: Iterable[Any]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([_cell(v) for v in values])
    return buffer.getvalue().encode("utf-8")


HEADER = _line(COLUMNS)


def append_row(path: str | Path, row: dict[str, Any]) -> Path:
    """Append ``row`` (keys of :data:`COLUMNS`; missing ones empty, unknown ones refused) to the log at
    ``path`` as one line, atomically (module doc); the first writer writes the header. Returns the path."""
    unknown = sorted(set(row) - set(COLUMNS))
    if unknown:
        raise InputError(f"unknown prompt log column(s) {unknown}; the columns are {list(COLUMNS)}")
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = _line(row.get(name, "") for name in COLUMNS)
    with _THREAD_LOCK:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # (less the umask)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size == 0:
                data = HEADER + line
            else:
                with open(path, "rb") as existing:
                    first = existing.readline()
                    existing.seek(size - 1)
                    torn = existing.read(1) != b"\n"
                if first.rstrip(b"\r\n") != HEADER.rstrip(b"\n"):
                    raise PromptLogError(f"{path}, line 1: not a prompt log of this version (its header differs "
                                         f"from {','.join(COLUMNS)}); choose another file")
                data = (b"\n" if torn else b"") + line  # a torn last line (a crash) stays a line of its own
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    return path


# -- reading --------------------------------------------------------------------


@dataclass(frozen=True)
class LoggedPrompt:
    """One row of a prompt log: the drawn prompt and what was logged beside it."""

    line: int
    case_id: str
    image_path: str
    target_label: int
    slice_index: int | None
    operation: str
    boxes: tuple[tuple[float, float, float, float], ...]
    points: tuple[tuple[float, float], ...]
    point_labels: tuple[int, ...]
    values: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def replayable(self) -> bool:
        return self.operation in REPLAYABLE

    def prompt(self, source: str = "") -> Prompt:
        """The drawn prompt as a :class:`Prompt` (protocol ``replay``; ``info``: operation, log line)."""
        return Prompt(target_label=self.target_label, slice_index=self.slice_index, boxes=list(self.boxes),
                      points=list(self.points), point_labels=list(self.point_labels), protocol="replay",
                      info={"operation": self.operation, "log": source, "log_line": self.line})

    def number(self, column: str) -> float:
        """A numeric column (NaN when empty)."""
        text = self.values.get(column, "")
        return float(text) if text not in ("", None) else math.nan


def read_log(path: str | Path) -> list[LoggedPrompt]:
    """Every row of the log at ``path``, in order; :class:`PromptLogError` names the file and the line of
    the first malformed one (a missing column, a bad number or JSON, a bad box)."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptLogError(f"{path}: no such prompt log") from None
    except (OSError, UnicodeDecodeError) as error:
        raise PromptLogError(f"{path}: the prompt log cannot be read: {error}") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        raise PromptLogError(f"{path}, line 1: empty file, expected the header {','.join(COLUMNS)}")
    needed = ("case_id", "target_label", "slice_index", "operation", "drawn_boxes", "drawn_points",
              "drawn_point_labels")
    missing = [name for name in needed if name not in header]
    if missing:
        raise PromptLogError(f"{path}, line 1: not a prompt log: the header lacks {missing}")
    rows = []
    for cells in reader:
        line = reader.line_num
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise PromptLogError(f"{path}, line {line}: {len(cells)} fields, the header has {len(header)}")
        values = dict(zip(header, cells))
        try:
            rows.append(_parse(values, line, str(path)))
        except (ValueError, TypeError, PromptError) as error:
            raise PromptLogError(f"{path}, line {line}: {error}") from None
    return rows


def _parse(values: dict[str, str], line: int, source: str) -> LoggedPrompt:
    case_id = values["case_id"].strip()
    if not case_id:
        raise InputError("case_id is empty")
    target = int(values["target_label"])
    if target <= 0:
        raise InputError(f"target_label must be > 0, got {target}")
    index = values["slice_index"].strip()
    operation = values["operation"].strip()
    if operation not in OPERATIONS:
        raise InputError(f"operation must be one of {list(OPERATIONS)}, got {operation!r}")
    boxes = _json_list(values, "drawn_boxes")
    for box in boxes:
        if not isinstance(box, list):
            raise InputError(f"drawn_boxes holds {box!r}, not [x0, y0, x1, y1]")
        check_box(box)
    points = _json_list(values, "drawn_points")
    if any(not isinstance(p, list) or len(p) != 2 or not all(isinstance(v, (int, float)) for v in p)
           for p in points):
        raise InputError(f"drawn_points must be [[x, y], ...], got {values['drawn_points']!r}")
    labels = _json_list(values, "drawn_point_labels")
    if len(labels) != len(points) or any(v not in (0, 1) for v in labels):
        raise InputError(f"drawn_point_labels must be one 0/1 per point, got {values['drawn_point_labels']!r}")
    if not boxes and not points:
        raise InputError("the drawn prompt has neither a box nor a point")
    return LoggedPrompt(line, case_id, values.get("image_path", ""), target, int(index) if index else None,
                        operation, tuple(tuple(float(v) for v in b) for b in boxes),
                        tuple((float(p[0]), float(p[1])) for p in points), tuple(int(v) for v in labels), values)


def _json_list(values: dict[str, str], column: str) -> list:
    text = values[column].strip() or "[]"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{column} is not JSON ({error.msg}): {text!r}") from None
    if not isinstance(value, list):
        raise InputError(f"{column} must be a JSON list, got {text!r}")
    return value


__all__ = [
    "COLUMNS", "LOG_ENV", "OPERATIONS", "REPLAYABLE", "LoggedPrompt", "PromptLogError",
    "append_row", "box_iou", "centre_offset", "default_log_path", "logging_off", "make_row", "prompt_centre", "read_log",
    "slice_dice", "whole_mask", "shown_path"]
