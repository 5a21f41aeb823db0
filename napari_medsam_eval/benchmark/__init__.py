"""Benchmark runs: a dataset x a model x a prompt protocol -> one result row per (case, target).

>>> from napari_medsam_eval.benchmark import run_benchmark, load_table
>>> table = run_benchmark("../shared/data/hippocampus_mri", "runs/hippo", model="litemedsam",
...                       protocol="medsam2", workers=2)
>>> load_table("runs/hippo")          # the same table, rebuilt from results.jsonl

Modules: :mod:`.runner` (the loop, run folder, progress, cancel), :mod:`.evaluator`
(one case -> rows), :mod:`.case_progress` (progress and cancel inside a case), :mod:`..evaluation.scoring`
(metric columns), :mod:`.timing`, :mod:`.schema` (the columns), :mod:`.store` (the run folder's
files, atomic rows, resume, and the one reader of its results, :func:`load_table`), :mod:`.table_checks` (the
checks each row read passes), :mod:`.table_copies` (which results file is read, and the others), :mod:`.local_executor` (process
pool), :mod:`.ray_executor` (Ray actors, ``executor="ray"``), :mod:`.manifest`, :mod:`.open_row` (a row's
case, saved prediction and prompt, opened again).
"""
from __future__ import annotations

from ..core.lazy_exports import lazy_exports

#: each exported name -> the module that defines it, imported on first use (PEP 562), so that
#: ``import napari_medsam_eval.benchmark.<module>`` (the CLI's parsers) loads only that module
_EXPORTS: dict[str, str] = {
    "MANIFEST_FILE": "manifest",
    "read_manifest": "manifest",
    "RunCase": "open_row",
    "load_run_case": "open_row",
    "LOG_FILE": "runner",
    "CaseProgress": "runner",
    "run_benchmark": "runner",
    "COLUMNS": "schema",
    "comparable": "schema",
    "to_dataframe": "schema",
    "CaseEvaluator": "evaluator",
    "RunConfig": "config",
    "CaseStep": "case_progress",
    "StepProgress": "case_progress",
    "CSV_FILE": "store",
    "PARQUET_FILE": "store",
    "ROWS_FILE": "store",
    "ResultStore": "store",
    "load_table": "store",
    "read_checked": "store",
    "read_rows": "store",
    "read_table": "store",
    "results_file": "store",
    "table_of_rows": "store",
    "write_tables": "store",
}


__all__ = [
    "COLUMNS",
    "CSV_FILE",
    "CaseEvaluator",
    "RunConfig",
    "CaseStep",
    "LOG_FILE",
    "MANIFEST_FILE",
    "PARQUET_FILE",
    "CaseProgress",
    "ROWS_FILE",
    "ResultStore",
    "RunCase",
    "StepProgress",
    "comparable",
    "load_run_case",
    "load_table",
    "read_manifest",
    "read_checked",
    "read_rows",
    "read_table",
    "results_file",
    "run_benchmark",
    "table_of_rows",
    "to_dataframe",
    "write_tables",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
