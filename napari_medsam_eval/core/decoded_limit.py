"""The decoded-size limit: how large an image a reader may inflate, checked from its header alone.

Every reader (npz, NIfTI/NRRD/MetaImage, DICOM series, video, 2D images,
folders of frames) works out the decoded size its header declares and calls
:func:`check_ceiling` before decoding a voxel (:mod:`napari_medsam_eval.io.sizes`
reads the headers). An image above the ceiling is refused with one
:class:`~.errors.DataError` naming the file, its decoded size, the ceiling and
how to raise it.

Why :data:`MEMORY_FRACTION` (40%) of memory: reading a volume peaks at about
twice its decoded size plus the interpreter (the decoder's buffer and the numpy
array, or the array and its prepared uint8 copy; ``benchmarks/memory_ceiling.py``
measures it), so a volume at the ceiling takes 2 x 40% = 80% of memory, leaving a
fifth for the interpreter, a model and whatever else runs on the machine. The
memory is physical memory, or a smaller cgroup (container) limit.

``MEDSAM_EVAL_MAX_IMAGE_GB`` (environment) or ``--max-decoded-gb`` (each command
that reads images: ``info``, ``score``, ``segment``, ``run`` and the studies) sets
another ceiling, in GB (10^9 bytes). The option works through the environment
(:func:`ceiling_set_to`), so the worker processes of a run inherit it.
"""
from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Iterator

from .errors import DataError, OptionError

#: the share of the memory this process may use that one image's decoded size may take (see the module doc)
MEMORY_FRACTION = 0.4
CEILING_ENV = "MEDSAM_EVAL_MAX_IMAGE_GB"
#: the command-line option that sets :data:`CEILING_ENV` for one command
CEILING_OPTION = "--max-decoded-gb"
#: names the option that set :data:`CEILING_ENV` (``--max-decoded-gb 1.0``) while it is the one in force, so a
#: refusal names what the user gave, in worker processes too
CEILING_SOURCE_ENV = "MEDSAM_EVAL_MAX_IMAGE_GB_SET_BY"
#: how a refusal says to raise the ceiling
RAISE_HINT = f"raise it with {CEILING_OPTION} GB or {CEILING_ENV}=GB"
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def human_bytes(n: float) -> str:
    """``4000000000`` -> ``"4.0 GB"`` (decimal units, as disks and ``free -g`` round)."""
    if n < 1000:
        return f"{int(n)} bytes"
    for unit in ("KB", "MB", "GB", "TB"):
        n /= 1000
        if n < 1000:
            return f"{n:.1f} {unit}"
    return f"{n / 1000:.1f} PB"


def _memory_limit() -> tuple[int, str]:
    """(bytes, what) of the memory this process may use: physical memory, or a smaller cgroup limit."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in _CGROUP_LIMITS:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < physical:
            return int(text), "the container's memory limit"
    return physical, "this machine's memory"


def memory_ceiling() -> tuple[int, str]:
    """(bytes, how it was set): the largest decoded image a header may declare."""
    value = os.environ.get(CEILING_ENV, "").strip()
    if value:
        try:
            gigabytes = float(value)
        except ValueError:
            raise OptionError(f"{CEILING_ENV}={value!r} is not a number of GB: set it to one (e.g. 8), or unset "
                              "it for the default") from None
        if not math.isfinite(gigabytes) or gigabytes <= 0:
            raise OptionError(f"{CEILING_ENV}={value!r} must be a positive number of GB (e.g. 8), or unset for "
                              "the default")
        given_by = os.environ.get(CEILING_SOURCE_ENV, "")
        return int(gigabytes * 1e9), (f"set by {CEILING_OPTION} {value}" if given_by == f"{CEILING_OPTION} {value}"
                                      else f"set by {CEILING_ENV}")
    limit, what = _memory_limit()
    return int(limit * MEMORY_FRACTION), f"{MEMORY_FRACTION:.0%} of {what}, {human_bytes(limit)}"


def check_ceiling(declared: int, description: str, path: str | Path) -> None:
    """Refuse a declared decoded size above :func:`memory_ceiling`; ``description`` says what the header declares."""
    ceiling, how = memory_ceiling()
    if declared > ceiling:
        raise DataError(f"header declares {description}, above the memory ceiling of {human_bytes(ceiling)} "
                        f"({how}); refused before allocating; {RAISE_HINT}", path)


@contextlib.contextmanager
def ceiling_set_to(gigabytes: float | None) -> Iterator[None]:
    """:data:`CEILING_ENV` set to ``gigabytes`` inside the block (unchanged when None), restored after; a refusal
    inside says the limit was set by :data:`CEILING_OPTION` (:data:`CEILING_SOURCE_ENV`)."""
    if gigabytes is None:
        yield
        return
    before = {name: os.environ.get(name) for name in (CEILING_ENV, CEILING_SOURCE_ENV)}
    value = repr(float(gigabytes))
    os.environ[CEILING_ENV] = value
    os.environ[CEILING_SOURCE_ENV] = f"{CEILING_OPTION} {value}"
    try:
        yield
    finally:
        for name, previous in before.items():
            if previous is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = previous
