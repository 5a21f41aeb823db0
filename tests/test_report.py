"""Report side of the benchmark: loading run directories, per-task statistics, figures, report files."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from test_report_data import MANIFEST, jsonl_bytes, rows_a, write_run

from napari_medsam_eval.benchmark import run_benchmark
from napari_medsam_eval.benchmark.manifest import MANIFEST_FILE
from napari_medsam_eval.benchmark.store import BLOCK_KEY, CSV_FILE, PARQUET_FILE, ROWS_FILE, ResultStore
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.report import (failed_cases, load_results, load_run, overall_summary, summarize_tasks,
                                       worst_cases, write_report)


@pytest.fixture
def run_a(tmp_path):
    return write_run(tmp_path / "run_a", rows_a())


def by_task(summary: pd.DataFrame) -> dict:
    return {row["task"]: row for _, row in summary.iterrows()}


def test_per_task_summary_hand_computed(run_a):
    tasks = by_task(summarize_tasks(load_results(run_a)))
    assert list(tasks) == ["kidney", "liver", "polyp"]
    liver, kidney, polyp = tasks["liver"], tasks["kidney"], tasks["polyp"]
    assert (liver["n"], liver["n_ok"], liver["n_failed"], liver["dice_n"]) == (5, 4, 1, 4)
    assert liver["dice_median"] == pytest.approx(0.75)
    assert (liver["dice_q25"], liver["dice_q75"]) == (pytest.approx(0.675), pytest.approx(0.825))
    assert liver["dice_iqr"] == pytest.approx(0.15) and liver["dice_mean"] == pytest.approx(0.75)
    assert liver["nsd_median"] == pytest.approx(0.76)
    # the ok row without a score is counted as NaN, not as a failure
    assert (kidney["n"], kidney["n_failed"], kidney["dice_n"], kidney["dice_n_nan"]) == (4, 0, 3, 1)
    assert (kidney["dice_median"], kidney["dice_q25"], kidney["dice_q75"]) == (
        pytest.approx(0.6), pytest.approx(0.55), pytest.approx(0.75))
    assert polyp["dice_median"] == pytest.approx(0.94) and polyp["n_failed"] == 0


def test_overall_median_of_task_medians_and_pooled(run_a):
    overall = overall_summary(load_results(run_a))
    dice = overall.loc["dice"]
    assert dice["n_tasks"] == 3
    assert dice["median_of_task_medians"] == pytest.approx(0.75)  # median(0.75, 0.6, 0.94)
    assert dice["pooled_n"] == 13 and dice["pooled_median"] == pytest.approx(0.9)
    assert overall.loc["nsd", "median_of_task_medians"] == pytest.approx(0.76)


def test_group_by_attribute_difficulty(run_a):
    split = summarize_tasks(load_results(run_a), by=("task", "difficulty"))
    polyp = split[split["task"] == "polyp"].set_index("difficulty")
    assert polyp.loc["easy", "dice_median"] == pytest.approx(0.95)
    assert polyp.loc["hard", "dice_median"] == pytest.approx(0.93)
    assert polyp.loc["easy", "n"] == 3
    assert set(split.loc[split["task"] == "liver", "difficulty"]) == {"n/a"}


def test_failed_and_worst_cases(run_a):
    table = load_results(run_a)
    failed = failed_cases(table)
    assert failed["case_id"].tolist() == ["liver_99"] and failed["error"].iloc[0] == "CUDA out of memory"
    worst = worst_cases(table, k=3)
    assert worst["case_id"].tolist() == ["kidney_00", "kidney_01", "liver_03"]  # 0.5, 0.6, 0.6 (task order)
    assert "liver_99" not in worst_cases(table, k=100)["case_id"].tolist()


def test_loader_prefers_parquet_then_csv(tmp_path):
    rows = rows_a()
    run = write_run(tmp_path / "run", rows[:3], formats=("csv",))
    rows_df = pd.DataFrame(rows)
    rows_df.to_parquet(run / "results.parquet", index=False)
    loaded = load_run(run)
    assert loaded.source.name == "results.parquet" and len(loaded.table) == len(rows)
    (run / "results.parquet").unlink()
    loaded = load_run(run)
    assert loaded.source.name == "results.csv" and len(loaded.table) == 3
    assert loaded.manifest["model"]["sha256"] == MANIFEST["model"]["sha256"]
    # labels typed as the schema types them (Int64), the same whatever the format
    assert loaded.table["target_label"].dtype == "Int64" and loaded.table["target_label"].tolist() == [1, 1, 1]


def test_loader_jsonl_with_truncated_last_line(tmp_path):
    rows = rows_a()
    run = write_run(tmp_path / "running", [], formats=(), manifest=None)
    complete = jsonl_bytes(rows)
    (run / ROWS_FILE).write_bytes(complete + jsonl_bytes([dict(rows[0], case_id="next")])[:25])  # killed mid-write
    table = load_results(run)
    assert len(table) == len(rows)
    assert table.loc[table["case_id"] == "liver_99", "status"].item() == "failed"
    assert summarize_tasks(table).set_index("task").loc["liver", "dice_median"] == pytest.approx(0.75)
    # a bad line that is not the last one is an error naming the line
    lines = complete.splitlines(keepends=True)
    (run / ROWS_FILE).write_bytes(lines[0] + b"{oops\n" + lines[1])
    with pytest.raises(DataError, match="line 2"):
        load_results(run)
    # so is a line without the runner's block key: not a row of this tool's results.jsonl
    (run / ROWS_FILE).write_text("\n".join(json.dumps(row) for row in rows[:3]) + "\n")
    with pytest.raises(DataError, match="line 1 is damaged"):
        load_results(run)


def test_loader_errors(tmp_path):
    with pytest.raises(DataError, match="run directory not found"):
        load_results(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no results table"):
        load_results(tmp_path / "empty")
    (tmp_path / "header_only").mkdir()
    (tmp_path / "header_only" / "results.csv").write_text("case_id,task,dice,status\n")
    with pytest.raises(DataError, match="no rows"):
        load_results(tmp_path / "header_only")
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "results.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="cannot read the results table"):
        load_results(tmp_path / "corrupt")


def test_write_report_files_and_content(run_a):
    path = write_report(run_a, worst_k=2)
    assert path == run_a / "report.md"
    text = path.read_text()
    html = (run_a / "report.html").read_text()
    for task in ("liver", "kidney", "polyp"):
        assert task in text and task in html
    assert "0.750 [0.675, 0.825]" in text  # liver DSC median [IQR]
    assert "0.600 [0.550, 0.750]" in text  # kidney
    assert "0.760 [0.685, 0.835]" in text  # liver NSD
    assert "0.750 [" in text.split("## Overall")[1] and "0.900 [" in text.split("## Overall")[1]
    assert "median of task medians" in text.lower() and "pooled" in text.lower()
    assert "0123abcd" in text and "medsam2-middle-box" in text and "2025-05-01T10:00:00" in text
    assert "CUDA out of memory" in text and "liver_99" in text
    assert "Per task and difficulty" in text  # attributes split automatically
    assert "## Worst 2 cases by DSC" in text and "kidney_00" in text
    figures = sorted(p.name for p in (run_a / "figures").iterdir())
    assert figures == ["box_dice.png", "box_nsd.png", "slices_01_kidney_00.png", "slices_02_kidney_01.png"]
    for name in figures:
        assert f"figures/{name}" in text and f'src="figures/{name}"' in html
        assert (run_a / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert html.startswith("<!DOCTYPE html>") and "<style>" in html and "<table>" in html
    assert (run_a / "task_summary.csv").is_file()


def test_report_without_manifest_or_scores(tmp_path):
    rows = [dict(r, status="failed", error="no GPU", dice=np.nan, nsd=np.nan) for r in rows_a()[:3]]
    run = write_run(tmp_path / "all_failed", rows, formats=("csv",), manifest=None)
    text = write_report(run).read_text()
    assert "model (from the results table): medsam2" in text
    assert "Failed cases (3)" in text and "No scored cases." in text
    assert "n/a" in text


def test_loader_runner_blocks_and_nullable_labels(tmp_path):
    """The runner's JSONL writes each case as a block tagged ``_case_rows``; a block cut short is dropped."""
    rows = [dict(r, case_id=f"case_{i // 2}", target_label=1 + i % 2) for i, r in enumerate(rows_a()[:6])]
    run = write_run(tmp_path / "blocks", [], formats=(), manifest=None)
    lines = jsonl_bytes(rows).splitlines(keepends=True)  # three cases of two rows each
    assert all(json.loads(line)[BLOCK_KEY] == 2 for line in lines)
    (run / ROWS_FILE).write_bytes(b"".join(lines[:5]))  # the last case has 1 of its 2 rows
    table = load_results(run)
    assert len(table) == 4 and BLOCK_KEY not in table.columns
    assert table["case_id"].tolist() == ["case_0", "case_0", "case_1", "case_1"]
    # a case cut short before the next one starts is damage, not a kill: an error naming the line
    (run / ROWS_FILE).write_bytes(lines[0] + b"".join(lines[2:]))
    with pytest.raises(DataError, match="line 2: case 'case_0' is incomplete"):
        load_results(run)
    # parquet with a nullable integer label column (None for a case that failed before its labels were known),
    # read when there are no runner rows (a table made elsewhere)
    (run / ROWS_FILE).unlink()
    frame = pd.DataFrame(rows_a()[:3])
    frame["target_label"] = pd.array([1, 2, None], dtype="Int64")
    frame.to_parquet(run / PARQUET_FILE, index=False)
    table = load_results(run)
    assert table["target_label"].tolist()[:2] == [1, 2] and table["target_label"].isna().iloc[2]


@pytest.fixture(scope="module")
def box_run(tmp_path_factory, shared_data):
    """A real run: the box baseline on three hippocampus cases (two targets each)."""
    out = tmp_path_factory.mktemp("box") / "run"
    run_benchmark(shared_data / "hippocampus_mri", out, "box", limit=3)
    return out


def _keys(rows) -> list[tuple[str, str]]:
    return [(str(r["case_id"]), str(int(r["target_label"]))) for r in rows]


@pytest.mark.parametrize("cut", ["mid_line", "line_boundary_mid_case", "no_newline", "mid_second_case"])
def test_report_reads_a_damaged_jsonl_as_the_store_does(box_run, tmp_path, cut):
    """A killed run's ``results.jsonl``: the report keeps exactly the store's complete cases, file untouched."""
    data = (box_run / ROWS_FILE).read_bytes()
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    assert len(ends) == 6  # 3 cases x 2 targets
    cut_at, cases_kept = {"mid_line": (ends[4] + 30, 2), "line_boundary_mid_case": (ends[4], 2),
                          "no_newline": (ends[5] - 1, 2), "mid_second_case": (ends[2] + 5, 1)}[cut]
    run = tmp_path / "killed"
    run.mkdir()
    (run / ROWS_FILE).write_bytes(data[:cut_at])
    (run / MANIFEST_FILE).write_bytes((box_run / MANIFEST_FILE).read_bytes())
    results = load_run(run)
    assert results.source == run / ROWS_FILE and results.manifest["config"]["model"] == "box"
    store_rows = ResultStore(run).recover(truncate=False)
    assert _keys(results.table.to_dict("records")) == _keys(store_rows)
    assert results.table["case_id"].nunique() == cases_kept and len(results.table) == 2 * cases_kept
    np.testing.assert_allclose(results.table["dice"], [r["dice"] for r in store_rows])
    assert (run / ROWS_FILE).read_bytes() == data[:cut_at], "reading must not repair the file"
    # the finished run's tables hold the same rows as its results.jsonl
    full = load_run(box_run)
    assert full.source == box_run / ROWS_FILE and not full.notes  # the rows are the source; the tables agree
    assert (box_run / PARQUET_FILE).is_file() and (box_run / CSV_FILE).is_file()
    by_jsonl = load_run(box_run / PARQUET_FILE).table
    assert _keys(by_jsonl.to_dict("records")) == _keys(full.table.to_dict("records"))
