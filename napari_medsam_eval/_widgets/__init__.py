"""napari dock widgets: thin Qt shells over Qt-free models (:mod:`napari_medsam_eval.session.session`,
whose psygnal events the Segment widget listens to, and :mod:`napari_medsam_eval.benchmark.gui_job`).

- :class:`SegmentWidget`: model, image, prompts (drawn or from ground truth),
  segment a slice, propagate with progress and Cancel.
- :class:`CompareWidget`: prediction vs ground truth, TP/FP/FN overlay, DSC,
  per-slice plot, worst slices.
- :class:`BenchmarkWidget`: run a dataset through a model (the CLI's runner) with
  progress, Cancel and Resume; results table, per-task summary, box plot; a
  double-clicked row opens its case, prediction and prompt.

Shared pieces: worker start / busy / errors / progress / Cancel in
:mod:`._worker`; Qt-free layer helpers in :mod:`._layers` (geometry,
picking layers by role), :mod:`._prompt_layers` (prompt layers <-> prompts)
and :mod:`._result_layers` (prediction and overlay layers); theme colours
and plots in :mod:`._theme`.
"""
from __future__ import annotations

from napari_medsam_eval.core.lazy_exports import lazy_exports

#: each widget's module, imported when napari (or a script) first asks for it: the first dock loads its own
#: widget's code only, not the other two's (napari calls the factory on its GUI thread)
WIDGET_MODULES = {"BenchmarkWidget": "benchmark.dock", "CompareWidget": "compare.dock", "SegmentWidget": "segment.dock"}

__all__ = ["BenchmarkWidget", "CompareWidget", "SegmentWidget"]

__getattr__, __dir__ = lazy_exports(__name__, WIDGET_MODULES, __all__)
