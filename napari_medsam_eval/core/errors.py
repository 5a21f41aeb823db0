"""Exceptions with messages meant for people, not tracebacks.

Every error raised for bad input names the file (when there is one) and the
problem, so the CLI can print ``str(error)`` and a batch run can record it as
the reason a case failed.
"""
from __future__ import annotations

import errno
import os

from pathlib import Path
from typing import Any


class MedsamEvalError(Exception):
    """Base class of every error this package raises on purpose."""


class OptionError(MedsamEvalError, ValueError, TypeError):
    """An option a user gave (a flag, a JSON option, a widget field) that cannot be used; the message
    names the option, what it must be and what it got (:mod:`napari_medsam_eval.core.options`). Also a
    ValueError (a bad value) and a TypeError (an unknown keyword), for callers that catch those."""


class InputError(MedsamEvalError, ValueError):
    """A value a caller gave that cannot be used (an argument of the Python API, a mask, a spacing, a shape,
    an index out of range): the package's own ValueError, so that catching :class:`MedsamEvalError` catches
    every error a user can cause, and ``except ValueError`` still does."""


class InputTypeError(MedsamEvalError, TypeError):
    """A value of the wrong type a caller gave (the package's own TypeError; see :class:`InputError`)."""


class ModelOptionError(MedsamEvalError, ValueError):
    """A model option (builder argument, ``--model-options`` entry) that cannot be used."""


class DataError(MedsamEvalError):
    """Input data that cannot be used: unreadable, inconsistent or invalid.

    ``path`` is the offending file or folder when one is known; the message
    then starts with it, so it is never lost when the error is logged.
    """

    def __init__(self, problem: str, path: str | Path | None = None) -> None:
        self.path = None if path is None else Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path is not None else problem)


class Cancelled(MedsamEvalError):
    """A progress callback asked a long job to stop; ``partial`` holds the result so far.

    Raised by propagation (:mod:`napari_medsam_eval.propagation`) and by the
    backends that propagate natively; ``partial`` has the shape and dtype of a
    complete result, ``done`` of ``total`` slices were segmented.
    """

    def __init__(self, partial: Any, done: int, total: int) -> None:
        self.partial = partial
        self.done = done
        self.total = total
        super().__init__(f"propagation cancelled after {done} of {total} slices")


class UnknownFormatError(DataError):
    """A file whose format no reader handles."""


class GeometryMismatchError(DataError):
    """Image and label disagree in shape, spacing, origin or direction."""


def os_error_words(error: OSError) -> str:
    """``<file>: <reason>`` for an OSError (both files of a rename when it names two; the reason alone when it
    names none)."""
    names = [os.fsdecode(n) for n in (error.filename, error.filename2) if n is not None]
    return f"{' -> '.join(names)}: {os_problem(error)}" if names else os_problem(error)


def os_problem(error: OSError) -> str:
    """A short text for an operating-system error: its reason, and what a full disk or quota looks like."""
    reason = error.strerror or str(error)
    if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        reason += " (the disk or quota is full, or a file-size limit was reached)"
    return reason
