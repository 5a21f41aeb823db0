"""Segmenting a whole image from one prompt: propagation through volumes and videos.

None of it imports Qt or napari.

* :mod:`.segment`: :func:`segment_by_kind`, the one way to segment an image of
  any kind (the CLI, the benchmark and the interactive session call it), and
  its :class:`PropagationResult`;
* :mod:`.rules`: :class:`PropagationRules`, the next prompt and the stop rules
  of per-slice models, with the measured defaults per kind;
* :mod:`.slice_by_slice`: :func:`propagate_volume` (both ways from the prompted slice)
  and :func:`propagate_video` (forward) around a per-slice backend, and the
  :class:`PropagationRecord` of where each direction stopped and why;
* :mod:`.litemedsam_3dbox`: :func:`propagate_official_litemedsam`, the official
  LiteMedSAM 3D-box loop reproduced exactly;
"""
from __future__ import annotations

from ..core.errors import Cancelled
from .segment import (HOW, PropagationResult, official_result, segment_by_kind, segment_official,
                      segment_prompts, united_result)
from .litemedsam_3dbox import propagate_official_litemedsam
from .rules import LEGACY_RULES, RULE_PRESETS, VIDEO_RULES, VOLUME_RULES, PropagationRules, resolve_rules
from .slice_by_slice import DEFAULT_MARGIN, DirectionStop, PropagationRecord, propagate_video, propagate_volume

__all__ = [
    "Cancelled",
    "DEFAULT_MARGIN",
    "DirectionStop",
    "HOW",
    "LEGACY_RULES",
    "PropagationRecord",
    "PropagationResult",
    "PropagationRules",
    "RULE_PRESETS",
    "VIDEO_RULES",
    "VOLUME_RULES",
    "official_result",
    "propagate_official_litemedsam",
    "propagate_video",
    "propagate_volume",
    "resolve_rules",
    "segment_by_kind",
    "segment_official",
    "segment_prompts",
    "united_result",
]
