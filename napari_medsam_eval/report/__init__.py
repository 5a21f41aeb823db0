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

from .paired import bootstrap_median_ci, compare_runs, paired_scores, wilcoxon_test
from .compare_report import format_comparison, write_comparison
from .document import format_task_summary, write_report
from .results import RunResults, load_results, load_run
from .stats import failed_cases, overall_summary, summarize_tasks, worst_cases
from .prompt_mode_study import study_markdown, study_table, write_study

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
