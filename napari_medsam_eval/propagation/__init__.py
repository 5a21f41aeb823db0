"""Segmenting a whole image from one prompt: propagation through volumes and videos.

None of it imports Qt or napari.

* :mod:`.by_kind`: :func:`segment_by_kind`, the one way to segment an image of
  any kind (the CLI, the benchmark and the interactive session call it), and
  its :class:`PropagationResult`;
* :mod:`.walk`: :func:`propagate_volume` (both ways from the prompted slice)
  and :func:`propagate_video` (forward) around a per-slice backend;
* :mod:`.official`: :func:`propagate_official_litemedsam`, the official
  LiteMedSAM 3D-box loop reproduced exactly.
"""
from __future__ import annotations

from ..errors import Cancelled
from .by_kind import HOW, PropagationResult, segment_by_kind
from .official import propagate_official_litemedsam
from .walk import DEFAULT_MARGIN, middle_slice_prompt, propagate_video, propagate_volume

__all__ = [
    "Cancelled",
    "DEFAULT_MARGIN",
    "HOW",
    "PropagationResult",
    "middle_slice_prompt",
    "propagate_official_litemedsam",
    "propagate_video",
    "propagate_volume",
    "segment_by_kind",
]
