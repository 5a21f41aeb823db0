"""Whether a backend uses the embedding store, where it is, and its limit: options and environment.

The store is off unless asked for, so a run's encoder calls (which tests count)
and its disk use do not change behind the user's back. It is asked for by

* the backend option ``embeddings``: a folder, ``True``/``"default"`` for the
  default folder, ``False``/``"off"`` to keep it off even when the environment
  turns it on. From the command line: ``--model-options '{"embeddings": "DIR"}'``;
  in Python: ``build_backend("litemedsam", embeddings="DIR")``;
* else the environment variable :data:`ENV_DIR` (``MEDSAM_EVAL_EMBEDDINGS``),
  with the same values (``1``/``on``/``default`` for the default folder).

The default folder is ``embeddings/`` in the package's cache folder
(``$NAPARI_MEDSAM_EVAL_CACHE``, else ``$XDG_CACHE_HOME/napari-medsam-eval``,
else ``~/.cache/napari-medsam-eval``, where encoder exports are kept too).

The folder must not exist, be empty, or be a store already (its ``store.json``
marker, :mod:`.layout`); any other folder is refused, naming what it holds,
so ``--embeddings .`` or ``--embeddings ~`` never turns a user's folder into a
store.

The size limit: the option ``embeddings_limit``, else :data:`ENV_LIMIT`, else
what the store's ``store.json`` records, else 4 GiB; a number of bytes or a
size such as ``"500MB"``, ``"8GiB"``. The storage dtype: the option
``embeddings_dtype`` (``"float32"``, exact, the default; ``"float16"``).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..core.cache import cache_dir
from ..core.errors import ModelOptionError
from .layout import check_store_folder
from .store import STORAGE_DTYPES, EmbeddingStore

#: the store's folder for every backend built without an ``embeddings`` option
ENV_DIR = "MEDSAM_EVAL_EMBEDDINGS"
#: the store's size limit (bytes or a size such as 8GiB)
ENV_LIMIT = "MEDSAM_EVAL_EMBEDDINGS_LIMIT"

_OFF = {"", "0", "off", "false", "no", "none"}
_DEFAULT = {"1", "on", "true", "yes", "default"}
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")


def default_root() -> Path:
    """``embeddings/`` in the package's cache folder (beside the encoder exports)."""
    return cache_dir() / "embeddings"


def parse_size(value: int | float | str) -> int:
    """Bytes from a number or a size text (``"500MB"``, ``"8GiB"``, ``"1.5g"``); ValueError when not one."""
    if isinstance(value, bool):
        raise ModelOptionError(f"embeddings_limit must be a size such as 4GiB, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ModelOptionError(f"embeddings_limit must be >= 0, got {value!r}")
        return int(value)
    match = _SIZE.match(str(value))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ModelOptionError(f"embeddings_limit must be bytes or a size such as 500MB or 8GiB, got {value!r}")
    return int(float(match.group(1)) * _UNITS[unit])


def format_size(size: int) -> str:
    """``size`` bytes as a short text in binary units (``"1.5 GiB"``)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover


def resolve_root(option: str | Path | bool | None = None) -> Path | None:
    """The store folder the ``embeddings`` option (else :data:`ENV_DIR`) asks for; None: no store."""
    if option is None:
        option = os.environ.get(ENV_DIR)
        if option is None:
            return None
    if isinstance(option, bool):
        return default_root() if option else None
    if not isinstance(option, (str, os.PathLike)):
        raise ModelOptionError(f"embeddings must be a folder, true or false, got {option!r}")
    text = os.fspath(option).strip()
    if text.lower() in _OFF:
        return None
    if text.lower() in _DEFAULT:
        return default_root()
    return Path(text).expanduser()


def resolve_limit(option: int | float | str | None = None) -> int | None:
    """The limit the ``embeddings_limit`` option (else :data:`ENV_LIMIT`) sets; None: the store's own."""
    if option is None:
        option = os.environ.get(ENV_LIMIT) or None
    return None if option is None else parse_size(option)


def check_embeddings_folder(option: str | Path | bool | None) -> Path | None:
    """The store folder ``option`` names, checked (reads only) so a folder that is not a store is refused
    before any work; None when the store is off."""
    root = resolve_root(option)
    if root is not None:
        check_store_folder(root)
    return root


def open_store(option: str | Path | bool | None = None, *, dtype: str | None = "float32",
               limit: int | float | str | None = None) -> EmbeddingStore | None:
    """The :class:`EmbeddingStore` a backend's options ask for, or None when the store is off.

    The one place the backends turn their ``embeddings``, ``embeddings_dtype``
    and ``embeddings_limit`` options into a store (or none).
    """
    dtype = "float32" if dtype is None else str(dtype).replace("fp", "float").lower()
    if dtype not in STORAGE_DTYPES:
        raise ModelOptionError(f"embeddings_dtype must be one of {', '.join(STORAGE_DTYPES)}, got {dtype!r}")
    root = resolve_root(option)
    if root is None:
        return None
    if root.exists() and not root.is_dir():
        raise ModelOptionError(f"embeddings: {root} is not a folder")
    try:
        import zarr  # noqa: F401 - checked here, so a missing package is one clear error, not a damaged entry
    except ImportError as exc:
        raise ModelOptionError(f"the embedding store needs zarr 3: pip install 'zarr>=3' ({exc})") from None
    return EmbeddingStore(root, limit_bytes=resolve_limit(limit), dtype=dtype)


__all__ = ["ENV_DIR", "ENV_LIMIT", "check_embeddings_folder", "default_root", "format_size", "open_store", "parse_size", "resolve_limit",
           "resolve_root"]
