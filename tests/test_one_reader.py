"""The run folder's one reader (``benchmark.store.load_table``): the typed table, from any file, reaches
the report, the comparison of two runs and the two-runs pairing as it is."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from test_report_data import jsonl_bytes, make_row, rows_a, shifted, write_run

from napari_medsam_eval.benchmark import store
from napari_medsam_eval.benchmark.schema import COLUMNS, to_dataframe
from napari_medsam_eval.benchmark.store import CSV_FILE, PARQUET_FILE, ROWS_FILE, load_table
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.report import failed_cases, load_run, paired_scores, write_comparison, write_report
from napari_medsam_eval.report import results
from napari_medsam_eval.report.run_pairs import open_run_pair

#: the schema's dtypes, as ``to_dataframe`` gives them
SCHEMA_DTYPES = to_dataframe([make_row("x", "liver", 0.5)]).dtypes


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    """Run A as the runner leaves it (results.jsonl), run B a CSV only (made elsewhere); a case of A failed
    before its labels were known (no target_label)."""
    rows = rows_a() + [make_row("zz_unread", "liver", float("nan"), status="failed", error="unreadable case",
                                target_label=None, slice_dice=None)]
    return (write_run(tmp_path / "a", rows, formats=("jsonl",)),
            write_run(tmp_path / "b", shifted(rows_a(), 0.01), formats=("csv",)))


@pytest.fixture
def reads(monkeypatch) -> list[Path]:
    """The files the report package reads, through the store's reader (which it is handed unchanged)."""
    seen: list[Path] = []
    real = store.read_checked

    def spy(path, *args, **kwargs):
        seen.append(Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(results, "read_checked", spy)
    return seen


@pytest.mark.slow
def test_report_compare_and_run_pairs_read_the_typed_table(tmp_path, reads):
    run_a, run_b = _runs(tmp_path)
    loaded = load_run(run_a)
    assert reads == [run_a / ROWS_FILE]
    pd.testing.assert_frame_equal(loaded.table, load_table(run_a))  # as the store reads it: not typed again
    pd.testing.assert_series_equal(loaded.table.dtypes, SCHEMA_DTYPES)
    assert loaded.table["target_label"].dtype == "Int64" and loaded.table["error"].dtype == "str"
    assert failed_cases(loaded.table)["target_label"].dtype == "Int64"
    pd.testing.assert_frame_equal(load_run(run_b).table, load_table(run_b))

    reads.clear()
    text = write_report(run_a).read_text()
    assert reads == [run_a / ROWS_FILE]
    assert "| zz_unread | liver | n/a | unreadable case |" in text  # a missing Int64 label reads n/a

    reads.clear()
    pairs, _ = paired_scores(run_a, run_b)
    assert reads == [run_a / ROWS_FILE, run_b / CSV_FILE]
    assert pairs["target_label"].dtype == "Int64" and int(pairs["paired"].sum()) == 13
    only_a = pairs[pairs["side"].eq("only_a")]
    assert only_a["case_id"].tolist() == ["zz_unread"] and only_a["target_label"].isna().all()

    reads.clear()
    pair = open_run_pair(run_a, run_b, n_boot=100)
    assert reads == [run_a / ROWS_FILE, run_b / CSV_FILE]
    pd.testing.assert_frame_equal(pair.run_a.table, load_table(run_a))
    assert pair.pairs["target_label"].dtype == "Int64" and pair.unpaired["target_label"].dtype == "Int64"
    unread = pair.unpaired[pair.unpaired["case_id"].eq("zz_unread")].iloc[0]
    row_a, row_b = pair.rows((unread["case_id"], unread["task"], unread["target_label"]))
    assert row_a["error"] == "unreadable case" and row_a["target_label"] is None and row_b is None
    first = pair.pairs.iloc[0]
    row_a, row_b = pair.rows((first["case_id"], first["task"], first["target_label"]))
    assert row_a["target_label"] == row_b["target_label"] == 1

    reads.clear()
    write_comparison(run_a, run_b, tmp_path / "compared", n_boot=100)
    assert reads == [run_a / ROWS_FILE, run_b / CSV_FILE]
    reads.clear()
    assert main(["compare", str(run_a), str(run_b), "--resamples", "100"]) == 0
    assert main(["report", str(run_b), "--out", str(tmp_path / "report_b")]) == 0
    assert reads == [run_a / ROWS_FILE, run_b / CSV_FILE, run_b / CSV_FILE]


def test_results_module_does_not_type_the_table_again():
    assert not hasattr(results, "normalize_table")
    assert results.load_run.__module__ == "napari_medsam_eval.report.results"


def _legacy(rows: list[dict], text_labels: bool) -> list[dict]:
    """``rows`` as an older version or another tool wrote them: labels as floats (and text), counts as text,
    status in capitals with blanks, a column the schema does not know, two it knows left out."""
    out = []
    for i, row in enumerate(rows):
        row = {k: v for k, v in row.items() if k not in ("seed", "hd95")}
        label = float(row["target_label"])
        out.append(dict(row, target_label=f"{label}" if text_labels and i % 2 else label, legacy_note="old",
                        status=f" {row['status'].upper()}", gt_voxels=str(row["gt_voxels"])))
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv"])
def test_a_legacy_table_reads_as_the_typed_table(tmp_path, fmt):
    rows = [dict(r, target_label=1 + i % 3) for i, r in enumerate(rows_a())]
    expected = to_dataframe([{k: v for k, v in r.items() if k not in ("seed", "hd95")} for r in rows])
    run = write_run(tmp_path / fmt, _legacy(rows, text_labels=fmt != "parquet"), formats=(fmt,))
    table = load_table(run)
    pd.testing.assert_frame_equal(table, expected)
    assert list(table.columns) == list(COLUMNS) and table["target_label"].dtype == "Int64"
    assert set(table["status"]) == {"ok", "failed"} and table["seed"].isna().all() and table["hd95"].isna().all()
    pd.testing.assert_frame_equal(load_run(run).table, expected)  # the report gets the same table


def test_the_runner_rows_pass_unchanged_and_bad_labels_are_refused(tmp_path):
    rows = rows_a()
    run = write_run(tmp_path / "run", rows, formats=("jsonl", "parquet", "csv"))
    typed = to_dataframe(rows)
    for path in (run, run / ROWS_FILE, run / PARQUET_FILE, run / CSV_FILE):
        pd.testing.assert_frame_equal(load_table(path), typed)
    with pytest.raises(DataError, match="run folder not found"):  # (it was an empty table: issue 57)
        load_table(tmp_path / "no_run_yet")
    with pytest.raises(DataError, match="not a run folder: it holds no manifest.json and no results table"):
        load_table(tmp_path)
    started = tmp_path / "started"  # a run that has not finished a case: its manifest, no rows yet
    started.mkdir()
    (started / "manifest.json").write_text('{"format": 1, "status": "running"}')
    assert load_table(started).empty and list(load_table(started).columns) == list(COLUMNS)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / ROWS_FILE).write_bytes(jsonl_bytes([dict(rows[0], target_label="left")]))
    with pytest.raises(DataError, match="target_label holds 'left', not a whole number"):
        load_table(bad)
    (bad / ROWS_FILE).write_text(json.dumps(dict(rows[0], target_label=1.5, _case_rows=1)) + "\n")
    with pytest.raises(DataError, match="1.5, not a whole number"):
        load_run(bad)
