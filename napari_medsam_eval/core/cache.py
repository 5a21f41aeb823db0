"""The package's cache folder: encoder exports, the default embedding store."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$NAPARI_MEDSAM_EVAL_CACHE``, else ``$XDG_CACHE_HOME/napari-medsam-eval``,
    else ``~/.cache/napari-medsam-eval``."""
    explicit = os.environ.get("NAPARI_MEDSAM_EVAL_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "napari-medsam-eval"
