"""Issue 44, item 3: one checked reading of a run's results table.

Each row read from ``results.jsonl``, ``results.parquet`` or ``results.csv``
is checked (a duplicated case and target, text in a number column, a CSV
line cut short): an error naming the file and the line (a parquet file's
row), or with ``--lenient`` skipped and counted, and the report says how
many and why. When the run folder holds copies that disagree (a CSV edited
by hand beside the parquet and the runner's rows), the reading says which
one is read, why, and how to read the other. The one-line refusals of the
commands are in ``test_bad_input_table.py``.
"""
from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from napari_medsam_eval.benchmark.store import CSV_FILE, PARQUET_FILE, ROWS_FILE, load_table, read_checked
from napari_medsam_eval.benchmark.table_copies import WHY_READ
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.report import load_run, summarize_tasks


@pytest.fixture(scope="module")
def box_run(tmp_path_factory, shared_data) -> Path:
    """A finished run (results.jsonl, .parquet and .csv): the box baseline on 3 hippocampus cases."""
    run = tmp_path_factory.mktemp("checked") / "run"
    assert main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "3", "--out", str(run),
                 "--quiet", "--no-report"]) == 0
    return run


def _copy(run: Path, tmp_path: Path, keep: tuple[str, ...] = (ROWS_FILE, PARQUET_FILE, CSV_FILE)) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    for name in {ROWS_FILE, PARQUET_FILE, CSV_FILE} - set(keep):
        (copy / name).unlink()
    return copy


def _records(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="", encoding="utf-8") as stream:
        header, *records = list(csv.reader(stream))
    return header, records


def _write_records(path: Path, header: list[str], records: list[list[str]]) -> None:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *records])
    path.write_text(out.getvalue(), encoding="utf-8")


def _edit_dice(path: Path, index: int, value: str) -> tuple[str, int]:
    """Set the dice of the CSV's record ``index`` to ``value``; its case id and label."""
    header, records = _records(path)
    records[index][header.index("dice")] = value
    _write_records(path, header, records)
    return records[index][header.index("case_id")], int(records[index][header.index("target_label")])


def test_a_hand_edited_csv_beside_the_other_copies_is_named(box_run, tmp_path, capsys):
    """The CSV edited by hand: with the runner's rows there they are read, with only the parquet the parquet
    is; either way a warning line and the report say so, why, and how to read the CSV instead."""
    run = _copy(box_run, tmp_path)
    original = load_table(run)
    assert not load_run(run).warnings, "a finished run's copies agree"
    assert main(["report", str(run), "--worst", "1"]) == 0
    summary = (run / "task_summary.csv").read_text()
    edited = float(original["dice"].iloc[1]) / 2
    case_id, label = _edit_dice(run / CSV_FILE, 1, repr(edited))
    for source, flags in ((ROWS_FILE, []), (PARQUET_FILE, ["--lenient"])):  # said with or without --lenient
        capsys.readouterr()
        assert main(["report", str(run), "--worst", "1", *flags]) == 0
        err = capsys.readouterr().err
        expected = f"{CSV_FILE} differs from {source}: 1 rows with other values ({case_id} label {label}: dice)"
        (line,) = [line for line in err.splitlines() if line.startswith("warning: ")]
        assert expected in line and WHY_READ[source] in line and str(run / CSV_FILE) in line
        assert f"warning: {expected}" in (run / "report.md").read_text()
        assert (run / "task_summary.csv").read_text() == summary, "the numbers are the file read's, not the edit's"
        (run / ROWS_FILE).unlink(missing_ok=True)
    # the CSV given by its path: read, with the edit, and no word about the others
    capsys.readouterr()
    assert main(["report", str(run / CSV_FILE), "--worst", "1"]) == 0
    assert "warning" not in capsys.readouterr().err
    table = load_table(run / CSV_FILE)
    assert table.loc[table["case_id"].eq(case_id) & table["target_label"].eq(label), "dice"].item() == edited
    assert (run / "task_summary.csv").read_text() == summarize_tasks(table).to_csv(index=False) != summary


def test_a_csv_row_removed_or_unreadable_beside_the_parquet(box_run, tmp_path):
    run = _copy(box_run, tmp_path, keep=(PARQUET_FILE, CSV_FILE))
    header, records = _records(run / CSV_FILE)
    _write_records(run / CSV_FILE, header, records[:-1])
    last = records[-1]
    (warning,) = load_run(run).warnings
    assert f"1 rows missing there ({last[header.index('case_id')]} label {last[header.index('target_label')]})" in warning
    (run / CSV_FILE).write_bytes(b"\xff\xfe not a table")
    (warning,) = load_run(run).warnings
    assert warning.startswith(f"{CSV_FILE} cannot be read") and f"{PARQUET_FILE} is read" in warning


def test_the_runner_rows_checked_by_line(box_run, tmp_path):
    """results.jsonl: a dice written as text, and one target of a case twice in its block, named by line; a
    repeated case block, lenient, is skipped and counted like any duplicate (the last kept)."""
    run = _copy(box_run, tmp_path, keep=(ROWS_FILE,))
    lines = (run / ROWS_FILE).read_text().splitlines(keepends=True)
    row = json.loads(lines[2])
    bad = dict(row, dice="0.9?")
    (run / ROWS_FILE).write_text("".join(lines[:2] + [json.dumps(bad) + "\n"] + lines[3:]))
    with pytest.raises(DataError, match=r"results.jsonl: line 3: dice holds '0.9\?', not a number"):
        load_table(run)
    checked = read_checked(run / ROWS_FILE, lenient=True)
    assert [s.line for s in checked.skipped] == [3] and len(checked.table) == len(lines) - 1

    block = [json.loads(line) for line in lines[:2]]  # the first case's two targets
    twice = [json.dumps(dict(block[0], _case_rows=2)) + "\n", json.dumps(dict(block[0], _case_rows=2)) + "\n"]
    (run / ROWS_FILE).write_text("".join(twice + lines[2:]))
    with pytest.raises(DataError, match=r"results.jsonl: line 2: case \S+ label \d+ appears again \(first at line 1\)"):
        load_table(run)

    (run / ROWS_FILE).write_text("".join(lines + lines[:2]))  # the first case's block appended again
    with pytest.raises(DataError, match="line 7: case .* appears a second time"):
        load_table(run)
    lenient = load_run(run, lenient=True)
    assert len(lenient.table) == len(lines)
    assert lenient.warnings[0].startswith(f"2 of {len(lines) + 2} rows of {ROWS_FILE} skipped (--lenient)")
    assert "line 1: " in lenient.warnings[0] and "appears again at line 7" in lenient.warnings[0]


def test_a_parquet_row_is_named_by_its_row(box_run, tmp_path):
    run = _copy(box_run, tmp_path, keep=(PARQUET_FILE,))
    table = pd.read_parquet(run / PARQUET_FILE)
    table = pd.concat([table, table.iloc[[0]]], ignore_index=True)
    table.to_parquet(run / PARQUET_FILE, index=False)
    with pytest.raises(DataError, match=f"results.parquet: row {len(table)}: case .* appears again \\(first at row 1\\)"):
        load_run(run)
    assert len(load_run(run, lenient=True).table) == len(table) - 1


def test_a_record_over_two_lines_counts_both(box_run, tmp_path):
    """Line numbers are the file's lines: a quoted cell holding a line break makes its record two lines long."""
    run = _copy(box_run, tmp_path, keep=(CSV_FILE,))
    header, records = _records(run / CSV_FILE)
    records[0][header.index("error")] = "first line\nsecond line"
    records[2][header.index("nsd")] = "n/a"
    _write_records(run / CSV_FILE, header, records)
    text = (run / CSV_FILE).read_text().split("\n")
    line = 1 + next(i for i, t in enumerate(text) if t.startswith(records[2][header.index("case_id")] + ",")
                    and "n/a" in t)
    with pytest.raises(DataError, match=f"results.csv: line {line}: nsd holds 'n/a', not a number"):
        load_table(run)
