"""Statistics, figures and reports from a benchmark run's results table (no Qt, no napari).

- :mod:`.results`: :func:`load_results`/:func:`load_run`: a run directory's typed table, read by
  the run folder's one reader (:func:`napari_medsam_eval.benchmark.store.load_table`), and ``manifest.json``
- :mod:`.stats`: :func:`summarize_tasks` (median [IQR], mean, n, n_failed per
  task or per task and attribute), :func:`overall_summary`, worst and failed cases
- :mod:`.paired`: :func:`compare_runs`, a paired B - A comparison with a
  bootstrap CI of the median difference and a Wilcoxon signed-rank test
- :mod:`.figures`: box plots per task, per-slice DSC, paired differences, DSC vs
  interactions (Agg); :mod:`.effort_section`: the NoC section of a corrections run
- :mod:`.document`: :func:`write_report` (``report.md``/``report.html``);
  :mod:`.compare_report`: :func:`write_comparison` (``compare.md``)
- :mod:`.prompt_mode_study`: the 2D prompt-mode study's table (:func:`study_table`, its
  Fig. 2), Markdown, figures and :func:`write_study`
"""
from __future__ import annotations

from ..core.lazy_exports import lazy_exports

#: where each name lives, imported on first use: a dock that needs the statistics does not load the
#: figures and documents (matplotlib, the HTML writer) on napari's GUI thread
_MODULES = {
    "bootstrap_median_ci": "paired",
    "compare_runs": "paired",
    "paired_scores": "paired",
    "wilcoxon_test": "paired",
    "format_comparison": "compare_report",
    "write_comparison": "compare_report",
    "format_task_summary": "document",
    "write_report": "document",
    "RunResults": "results",
    "load_results": "results",
    "load_run": "results",
    "failed_cases": "stats",
    "overall_summary": "stats",
    "summarize_tasks": "stats",
    "worst_cases": "stats",
    "study_markdown": "prompt_mode_study",
    "study_table": "prompt_mode_study",
    "write_study": "prompt_mode_study",
}

__all__ = [
    "RunResults",
    "bootstrap_median_ci",
    "compare_runs",
    "failed_cases",
    "format_comparison",
    "format_task_summary",
    "load_results",
    "load_run",
    "overall_summary",
    "paired_scores",
    "study_markdown",
    "study_table",
    "summarize_tasks",
    "wilcoxon_test",
    "worst_cases",
    "write_comparison",
    "write_report",
    "write_study",
]

__getattr__, __dir__ = lazy_exports(__name__, _MODULES, __all__)
