"""napari dock widgets (thin Qt shells; the work is done in :mod:`napari_medsam_eval.session`).

- :class:`SegmentWidget`: model, image, prompts (drawn or from ground truth),
  segment a slice, propagate with progress and Cancel.
- :class:`CompareWidget`: prediction vs ground truth, TP/FP/FN overlay, DSC,
  per-slice plot, worst slices.
- :class:`BenchmarkWidget`: run a dataset through a model (the CLI's runner) with
  progress, Cancel and Resume; results table, per-task summary, box plot; a
  double-clicked row opens its case, prediction and prompt.

Qt-free layer helpers live in :mod:`._layers`.
"""
from __future__ import annotations

from .benchmark import BenchmarkWidget
from .compare import CompareWidget
from .segment import SegmentWidget

__all__ = ["BenchmarkWidget", "CompareWidget", "SegmentWidget"]
