"""Two benchmark runs over the same dataset, side by side: the per-case pairs and one case of both.

The failure analysis of the Benchmark widget's "Two runs" section, without
Qt or napari:

* :func:`open_run_pair` reads run A and run B, checks that they were made on
  the same dataset (their manifests' ``config.dataset_path``; different
  datasets are a :class:`~napari_medsam_eval.core.errors.DataError` naming both),
  and takes the paired scores and the per-task comparison from
  :mod:`napari_medsam_eval.report.paired` (:func:`~napari_medsam_eval.report.paired.paired_scores`,
  :func:`~napari_medsam_eval.report.paired.compare_runs`: the numbers
  ``medsam-eval compare A B`` prints, with its defaults). The pairs come
  sorted by B - A; the rows that do not pair (only in one run, or failed /
  unscored in one) are kept apart with the reason, never dropped.
* :func:`ab_overlay` and :func:`most_different_slice`: the A-only / B-only /
  both map of two predictions of a target and the slice where they differ
  most (on the target's slices first); :func:`load_case_pair` reads one case with both runs' saved
  predictions (:mod:`napari_medsam_eval.benchmark.open_row`) and makes them.

Runs may differ in anything else (model, protocol, its options, stop rule):
:attr:`RunPair.describe` says how each was made, from its manifest.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..benchmark.open_row import RunCase, load_run_case, read_prediction, row_prompt
from ..core.case import Case
from ..evaluation.mask_comparison import ab_overlay, binary_target, most_different_slice
from ..core.errors import DataError
from ..benchmark.schema import is_missing, row_labels
from .compare_parts import part_changes
from .paired import PAIR_KEYS, compare_runs, paired_scores
from .results import RunResults, load_run

#: columns of :attr:`RunPair.pairs` and :attr:`RunPair.unpaired`
PAIR_COLUMNS = [*PAIR_KEYS, "label_name", "target_labels", "a", "b", "diff"]
UNPAIRED_COLUMNS = [*PAIR_KEYS, "label_name", "target_labels", "a", "b", "reason"]
#: a pair's key: ``case_id``, ``task`` and ``target_label`` (None for a case that failed before its labels were known)
PairKey = tuple[str, str, int | None]


def pair_key(case_id: Any, task: Any, target_label: Any) -> PairKey:
    """The key of a row of the typed table (or of a line of :attr:`RunPair.pairs`): the label as an int."""
    return str(case_id), str(task), None if is_missing(target_label) else int(target_label)


def _manifest_text(run: RunResults) -> dict[str, Any]:
    config = run.manifest.get("config") if isinstance(run.manifest, dict) else None
    return config if isinstance(config, dict) else {}


def _dataset(run: RunResults) -> Path | None:
    path = _manifest_text(run).get("dataset_path")
    return Path(str(path)).expanduser().resolve() if path else None


def describe_run(run: RunResults) -> str:
    """How a run was made: model, protocol and the options that differ from its defaults, stop rule."""
    config = _manifest_text(run)
    if not config:
        return "no manifest"
    options = {k: v for k, v in (config.get("protocol_options") or {}).items() if k in ("margin", "seed")}
    parts = [str(config.get("model")), str(config.get("protocol"))]
    if options:
        parts.append(json.dumps(options))
    if config.get("propagation"):
        parts.append(f"propagation {json.dumps(config['propagation'])}")
    return ", ".join(parts)


def _reason(side: str, a: float, b: float) -> str:
    if side == "only_a":
        return "only in A (no row in B)"
    if side == "only_b":
        return "only in B (no row in A)"
    missing = [name for name, value in (("A", a), ("B", b)) if not np.isfinite(value)]
    return f"failed or unscored in {' and '.join(missing)}"


@dataclass
class RunPair:
    """Run A and run B, paired: ``pairs`` sorted by ``diff`` (B - A), ``unpaired`` with a ``reason``,
    ``comparison`` per task (:func:`~napari_medsam_eval.report.paired.compare_runs`), the rows of each
    run by pair key (for opening a case)."""

    run_a: RunResults
    run_b: RunResults
    pairs: pd.DataFrame
    unpaired: pd.DataFrame
    comparison: pd.DataFrame
    rows_a: dict[PairKey, dict[str, Any]] = field(default_factory=dict)
    rows_b: dict[PairKey, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: how each error part changed, B - A, per task (:func:`~.compare_parts.part_changes`)
    part_changes: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def describe(self) -> tuple[str, str]:
        return describe_run(self.run_a), describe_run(self.run_b)

    def rows(self, key: tuple[Any, Any, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The row of ``key`` (``case_id, task, target_label``, :func:`pair_key`) in A and in B (None: not there)."""
        key = pair_key(*key)
        return self.rows_a.get(key), self.rows_b.get(key)


def _rows_by_key(run: RunResults) -> dict[PairKey, dict[str, Any]]:
    rows: dict[PairKey, dict[str, Any]] = {}
    for row in run.table.to_dict("records"):  # the last of duplicates wins, as in paired_scores
        rows[pair_key(*(row[k] for k in PAIR_KEYS))] = {k: (None if is_missing(v) else v) for k, v in row.items()}
    return rows


def open_run_pair(run_a: str | Path, run_b: str | Path, metric: str = "dice", n_boot: int = 10_000,
                  seed: int = 0) -> RunPair:
    """Read runs A and B (folders of one dataset) and pair them; the statistics are ``compare_runs``'s."""
    a, b = load_run(run_a), load_run(run_b)
    dataset_a, dataset_b = _dataset(a), _dataset(b)
    notes = [f"run {name} has no manifest: its dataset cannot be checked"
             for name, path in (("A", dataset_a), ("B", dataset_b)) if path is None]
    if dataset_a is not None and dataset_b is not None and dataset_a != dataset_b:
        raise DataError(f"the two runs are over different datasets: A ({a.path}) on {dataset_a}, "
                        f"B ({b.path}) on {dataset_b}", b.path)
    comparison = compare_runs(a, b, metric=metric, n_boot=n_boot, seed=seed)
    scores, pair_notes = paired_scores(a, b, metric=metric)
    rows_a, rows_b = _rows_by_key(a), _rows_by_key(b)
    keys = [pair_key(*k) for k in zip(*(scores[c] for c in PAIR_KEYS))]
    scores["label_name"] = [str((rows_a.get(k) or rows_b.get(k) or {}).get("label_name") or "") for k in keys]
    scores["target_labels"] = [str((rows_a.get(k) or rows_b.get(k) or {}).get("target_labels") or "") for k in keys]
    paired = scores[scores["paired"]].sort_values(["diff", *PAIR_KEYS], kind="stable")
    unpaired = scores[~scores["paired"]].copy()
    unpaired["reason"] = [_reason(s, x, y) for s, x, y in zip(unpaired["side"], unpaired["a"], unpaired["b"])]
    return RunPair(a, b, paired[PAIR_COLUMNS].reset_index(drop=True),
                   unpaired[UNPAIRED_COLUMNS].reset_index(drop=True), comparison, rows_a, rows_b,
                   notes + pair_notes + list(a.notes) + list(b.notes), part_changes(a, b))


@dataclass
class CasePair:
    """One case with both runs' predictions of one target, the A/B map and its slice; ``notes`` say
    what is missing (a run without the row, a prediction not saved or not found)."""

    case: Case
    row_a: dict[str, Any] | None
    row_b: dict[str, Any] | None
    prediction_a: np.ndarray | None
    prediction_b: np.ndarray | None
    overlay: np.ndarray | None
    slice_index: int | None
    notes: list[str]

    @property
    def target_label(self) -> int | None:
        value = (self.row_a or self.row_b or {}).get("target_label")
        return None if is_missing(value) else int(float(value))

    @property
    def target_labels(self) -> tuple[int, ...] | None:
        """The label values the pair's target unites (:func:`~..benchmark.schema.row_labels`)."""
        return row_labels(self.row_a or self.row_b or {})

    def run_case(self) -> RunCase:
        """The case as run A's row opens it (run B's row when A has none), with A's prediction and prompt."""
        row = self.row_a if self.row_a is not None else self.row_b
        return RunCase(row=dict(row or {}), case=self.case, prediction=self.prediction_a, prompt=row_prompt(row or {}))


def load_case_pair(run_a: str | Path, run_b: str | Path, row_a: dict[str, Any] | None,
                   row_b: dict[str, Any] | None) -> CasePair:
    """Read the case of a pair (once), both runs' saved predictions and the A/B map of the row's target.

    A run without the row, or a prediction not saved or whose file is gone,
    leaves the map out and is said in ``notes`` (naming the run and the file).
    """
    if row_a is None and row_b is None:
        raise DataError("neither run has a row for this case", Path(run_a))
    first_dir, first = (run_a, row_a) if row_a is not None else (run_b, row_b)
    loaded = load_run_case(first_dir, first)
    predictions: dict[str, np.ndarray | None] = {"A": None, "B": None}
    notes = []
    for name, directory, row in (("A", run_a, row_a), ("B", run_b, row_b)):
        if row is None:
            notes.append(f"run {name} has no row for this case and target")
            continue
        prediction, note = ((loaded.prediction, loaded.note) if row is first
                            else read_prediction(Path(directory), row, loaded.case))
        predictions[name] = prediction
        if note:
            notes.append(f"run {name}: {note}")
    pair = CasePair(loaded.case, row_a, row_b, predictions["A"], predictions["B"], None, None, notes)
    if pair.prediction_a is not None and pair.prediction_b is not None:
        mask_a = binary_target(pair.prediction_a, pair.target_labels, binary_fallback=True)
        mask_b = binary_target(pair.prediction_b, pair.target_labels, binary_fallback=True)
        truth = None if loaded.case.label is None else binary_target(loaded.case.label, pair.target_labels)
        pair.overlay, pair.slice_index = ab_overlay(mask_a, mask_b), most_different_slice(mask_a, mask_b, truth)
    return pair


__all__ = ["CasePair", "PairKey", "RunPair", "describe_run", "load_case_pair", "open_run_pair", "pair_key"]
