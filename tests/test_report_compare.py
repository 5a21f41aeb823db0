"""Paired comparison of two runs, and the ``report``/``compare`` commands."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_report_data import make_row, rows_a, shifted, write_run

from napari_medsam_eval.cli import main
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.report import bootstrap_median_ci, compare_runs, load_run, paired_scores, wilcoxon_test


def row_of(comparison: pd.DataFrame, task: str) -> pd.Series:
    return comparison.set_index("task").loc[task]


def test_constant_improvement(tmp_path):
    a = write_run(tmp_path / "a", rows_a())
    b = write_run(tmp_path / "b", shifted(rows_a(), 0.05), formats=("csv",))  # parquet vs csv on purpose
    comparison = compare_runs(a, b, metric="dice")
    assert comparison["task"].tolist() == ["kidney", "liver", "polyp", "(all)"]
    overall = row_of(comparison, "(all)")
    assert overall["n_paired"] == 13 and overall["n_unscored"] == 2  # the failed liver row, the NaN kidney row
    assert overall["median_diff"] == pytest.approx(0.05, abs=1e-12)
    assert overall["ci_low"] == pytest.approx(0.05, abs=1e-12) and overall["ci_high"] == pytest.approx(0.05, abs=1e-12)
    assert overall["wilcoxon_p"] < 0.001 and overall["n_b_better"] == 13 and overall["n_a_better"] == 0
    assert overall["median_a"] == pytest.approx(0.9) and overall["median_b"] == pytest.approx(0.95)
    polyp = row_of(comparison, "polyp")
    assert polyp["n_paired"] == 6 and polyp["median_diff"] == pytest.approx(0.05, abs=1e-12)
    assert polyp["wilcoxon_p"] < 0.05 and polyp["note"] == ""
    # kidney has 3 pairs only: no p-value, said why
    kidney = row_of(comparison, "kidney")
    assert math.isnan(kidney["wilcoxon_p"]) and "non-zero" in kidney["note"]
    assert kidney["ci_low"] == pytest.approx(0.05, abs=1e-12)


def test_identical_runs(tmp_path):
    a = write_run(tmp_path / "a", rows_a())
    comparison = compare_runs(a, a)
    overall = row_of(comparison, "(all)")
    assert overall["median_diff"] == 0.0 and overall["ci_low"] == 0.0 and overall["ci_high"] == 0.0
    assert math.isnan(overall["wilcoxon_p"]) and overall["note"] == "all differences are zero"


def test_unmatched_cases_counted(tmp_path):
    rows = rows_a()
    rows_b = [r for r in rows if r["case_id"] != "polyp_00"] + [make_row("polyp_77", "polyp", 0.8)]
    rows_b.append(dict(make_row("liver_00", "liver", 0.5), target_label=2))  # another target of a case
    comparison = compare_runs(write_run(tmp_path / "a", rows), write_run(tmp_path / "b", rows_b))
    polyp = row_of(comparison, "polyp")
    assert (polyp["n_a"], polyp["n_b"], polyp["n_paired"], polyp["n_only_a"], polyp["n_only_b"]) == (6, 6, 5, 1, 1)
    liver = row_of(comparison, "liver")
    assert (liver["n_only_a"], liver["n_only_b"], liver["n_paired"]) == (0, 1, 4)
    overall = row_of(comparison, "(all)")
    assert (overall["n_only_a"], overall["n_only_b"]) == (1, 2)


def test_labels_join_across_formats_and_duplicates(tmp_path):
    rows = rows_a()
    a = write_run(tmp_path / "a", rows, formats=("jsonl",))
    b_rows = shifted(rows, 0.1)
    b_rows.insert(0, dict(b_rows[0], dice=0.0))  # an earlier attempt of liver_00, superseded by the later row
    b = write_run(tmp_path / "b", b_rows, formats=("parquet",))
    with pytest.raises(DataError, match="results.parquet: row 2: case liver_00 label 1 appears again"):
        paired_scores(a, b)  # a duplicate is refused, naming the file and the row
    lenient = load_run(b, lenient=True)  # or skipped and counted: the later row kept, as the pairing keeps it
    assert f"1 of {len(b_rows)} rows of results.parquet skipped" in lenient.warnings[0]
    assert "row 1: case liver_00 label 1 appears again at row 2, which is kept" in lenient.warnings[0]
    pairs, notes = paired_scores(a, lenient)
    assert pairs["paired"].sum() == 13 and not notes
    assert np.allclose(pairs.loc[pairs["paired"], "diff"], 0.1)


def test_small_samples():
    assert all(math.isnan(v) for v in bootstrap_median_ci(np.array([0.1])))
    p, note = wilcoxon_test(np.array([]))
    assert math.isnan(p) and note == "no pairs"
    diffs = np.array([0.1, -0.02, 0.05, 0.2, 0.03, 0.07, -0.01, 0.12])
    low, high = bootstrap_median_ci(diffs, n_boot=2000, seed=3)
    assert low <= np.median(diffs) <= high and (low, high) == bootstrap_median_ci(diffs, n_boot=2000, seed=3)
    p, note = wilcoxon_test(diffs)
    assert 0 < p < 0.05 and note == ""


def test_cli_report_prints_table_and_writes_files(tmp_path, capsys):
    run = write_run(tmp_path / "run", rows_a())
    assert main(["report", str(run), "--worst", "1"]) == 0
    out = capsys.readouterr().out
    assert "liver" in out and "0.750 [0.675, 0.825]" in out and "median of task medians" in out
    assert str(run / "report.md") in out
    assert (run / "report.md").is_file() and (run / "report.html").is_file()
    assert len(list((run / "figures").glob("slices_*.png"))) == 1


def test_cli_compare_prints_and_writes(tmp_path, capsys):
    a = write_run(tmp_path / "a", rows_a())
    b = write_run(tmp_path / "b", shifted(rows_a(), 0.05))
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "(all)" in out and "0.050" in out and "[0.050, 0.050]" in out
    out_dir = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--metric", "nsd", "--out", str(out_dir), "--resamples", "500"]) == 0
    assert (out_dir / "compare.md").is_file() and (out_dir / "paired_difference_nsd.png").is_file()
    text = (out_dir / "compare.md").read_text()
    assert "NSD" in text and "kidney" in text and "| (all) | 13 |" in text


def test_cli_errors(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert "run directory not found" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(tmp_path / "empty"), str(tmp_path / "empty")]) == 2
    assert "no results table" in capsys.readouterr().err
