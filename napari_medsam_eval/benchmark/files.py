"""The names of a run folder's files, defined once (plain strings: the CLI's parsers name them in
their help without loading the benchmark)."""
from __future__ import annotations

#: the rows as the run appends them (the file a run resumes from)
ROWS_FILE = "results.jsonl"
#: the same rows, sorted, written when a run ends
CSV_FILE = "results.csv"
PARQUET_FILE = "results.parquet"
#: every lesion of the lesion-by-lesion targets, one row each (written when a run ends, when there is one)
LESIONS_FILE = "lesions.csv"
#: the folder of the row cells too long to hold in a row (:mod:`.spilled_cells`), one file a cell
RECORDS_DIR = "records"
#: ``medsam-eval explain``'s table (each result with one stage made perfect) and the folder of its masks
EXPLAIN_FILE = "explain.csv"
EXPLAIN_FOLDER = "explain"
#: the run's settings and status (what ``--resume`` compares)
MANIFEST_FILE = "manifest.json"
#: what the run did, line by line
LOG_FILE = "run.log"
#: the lock a run holds on its folder
LOCK_FILE = ".run.lock"

__all__ = ["CSV_FILE", "EXPLAIN_FILE", "EXPLAIN_FOLDER", "LESIONS_FILE", "LOCK_FILE", "LOG_FILE", "MANIFEST_FILE", "PARQUET_FILE", "RECORDS_DIR", "ROWS_FILE"]
