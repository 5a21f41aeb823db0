"""napari-medsam-eval: evaluate promptable medical image segmentation.

The core (``case``, ``io``, ``metrics``, ...) imports neither Qt nor napari;
the napari layer lives in ``_widgets`` and the ``_reader``/``_writer``/
``_sample_data`` modules named in ``napari.yaml``.
"""
from .case import Case, Spacing

__version__ = "0.1.0"
__all__ = ["Case", "Spacing", "__version__"]
