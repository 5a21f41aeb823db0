"""napari-medsam-eval: evaluate promptable medical image segmentation.

The core (``core``, ``io``, ``evaluation``, ...) imports neither Qt nor napari;
the napari layer lives in ``_widgets`` and the ``_reader``/``_writer``/
``_sample_data`` modules named in ``napari.yaml``.
"""
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("napari-medsam-eval")  # the installed metadata: pyproject.toml's version
except PackageNotFoundError:  # pragma: no cover - a checkout on sys.path, never installed
    __version__ = "0+unknown"
__all__ = ["Case", "Spacing", "__version__"]


def __getattr__(name: str) -> Any:
    """``Case`` and ``Spacing`` on first use: importing the package (``medsam-eval --help``) loads no numpy."""
    if name in ("Case", "Spacing"):
        from .core import case

        return getattr(case, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
