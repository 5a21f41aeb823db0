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

from importlib import import_module
from types import ModuleType
from typing import Any

from napari_medsam_eval.core.lazy_exports import lazy_exports

#: each widget's module, imported when napari (or a script) first asks for it: the first dock loads its own
#: widget's code only, not the other two's (napari calls the factory on its GUI thread)
WIDGET_MODULES = {"BenchmarkWidget": "benchmark.dock", "CompareWidget": "compare.dock", "SegmentWidget": "segment.dock"}

__all__ = ["BenchmarkWidget", "CompareWidget", "SegmentWidget"]

#: the docks' names in napari's Plugins menu, for the note shown while one loads
DOCK_NAMES = {"BenchmarkWidget": "Benchmark", "CompareWidget": "Compare", "SegmentWidget": "Segment"}

_, __dir__ = lazy_exports(__name__, WIDGET_MODULES, __all__)


def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's name
    """A widget class, its module imported (and its ``warm_up()`` run) on a thread while the viewer stays live
    (:func:`._meanwhile.meanwhile`): napari asks for it on its GUI thread."""
    if name not in WIDGET_MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from napari_medsam_eval._meanwhile import meanwhile, on_gui_thread
    from napari_medsam_eval._set_aside import set_aside

    module = meanwhile(lambda: _loaded(WIDGET_MODULES[name]), f"loading the {DOCK_NAMES[name]} dock")
    if on_gui_thread():  # napari's dock command: what loaded lives as long as the viewer (docs in ._set_aside)
        import napari

        set_aside(napari.current_viewer())
    return getattr(module, name)


def _loaded(module_name: str) -> ModuleType:
    """The widget's module, imported, with what its widget needs first prepared (its ``warm_up``, if any)."""
    module = import_module(f"{__name__}.{module_name}")
    warm_up = getattr(module, "warm_up", None)
    if warm_up is not None:
        warm_up()
    return module
