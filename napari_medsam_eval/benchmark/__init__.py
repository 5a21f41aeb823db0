"""Benchmark runs: a dataset x a model x a prompt protocol -> one result row per (case, target).

>>> from napari_medsam_eval.benchmark import run_benchmark, load_table
>>> table = run_benchmark("../shared/data/hippocampus_mri", "runs/hippo", model="litemedsam",
...                       protocol="medsam2", workers=2)
>>> load_table("runs/hippo")          # the same table, rebuilt from results.jsonl

Modules: :mod:`.runner` (the loop, run folder, progress, cancel), :mod:`.segment_case`
(one case -> rows), :mod:`.steps` (progress and cancel inside a case), :mod:`.scoring`
(metric columns), :mod:`.timing`, :mod:`.schema` (the columns), :mod:`.store` (the run folder's
files, atomic rows, resume, and the one reader of ``results.jsonl``), :mod:`.workers` (process
pool), :mod:`.ray_executor` (Ray actors, ``executor="ray"``), :mod:`.manifest`, :mod:`.run_case` (a row's
case, saved prediction and prompt, opened again).
"""
from __future__ import annotations

from .manifest import MANIFEST_FILE, read_manifest
from .run_case import RunCase, load_run_case
from .runner import LOG_FILE, CaseProgress, run_benchmark
from .schema import COLUMNS, comparable, to_dataframe
from .segment_case import CaseEvaluator, CaseSettings
from .steps import CaseStep, StepProgress
from .store import CSV_FILE, PARQUET_FILE, ROWS_FILE, ResultStore, load_table, read_rows, write_tables

__all__ = [
    "COLUMNS",
    "CSV_FILE",
    "CaseEvaluator",
    "CaseSettings",
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
    "read_rows",
    "run_benchmark",
    "to_dataframe",
    "write_tables",
]
