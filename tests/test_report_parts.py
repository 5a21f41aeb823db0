"""The report opens with the results and says why they failed (issue: why it failed, item 4): per task each
error part's mean (adding up to 1 - mean DSC, drawn as stacked bars), the results by dominant part, each
part's worst results with their slices; the run's details last. A run folder from before the parts gets them
from its saved predictions, else n/a."""
from __future__ import annotations

import re
import shutil

import pytest

from napari_medsam_eval.benchmark.store import load_table
from napari_medsam_eval.cli import main
from napari_medsam_eval.evaluation.error_parts import PART_COLUMNS, PARTS, ROW_COLUMNS, part_name
from napari_medsam_eval.report.compare_parts import change_sentence, part_changes
from napari_medsam_eval.report.error_section import task_parts


@pytest.fixture(scope="module")
def saved_run(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("report_parts") / "run"
    assert main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "3", "--save-predictions",
                 "--out", str(out), "--quiet"]) == 0
    return out


def section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def parts_table(markdown: str) -> dict[str, list[float]]:
    """The 'each part's mean' table of report.md: task -> [n, 1 - mean DSC, parts ...]."""
    rows = {}
    body = section(markdown, "Why it failed").split("Each part's mean", 1)[1]
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| hippocampus"):
            rows[cells[0]] = [float(c) for c in cells[1:]]
        elif rows and not line.startswith("|"):
            break
    return rows


def test_the_report_opens_with_results_and_says_why_they_failed(saved_run):
    markdown = (saved_run / "report.md").read_text()
    headings = re.findall(r"^## (.+)$", markdown, flags=re.M)
    assert headings[0] == "Overall" and headings[-1] == "Run" and "Why it failed" in headings
    assert markdown.index("## Overall") < 400  # no manifest before the first table
    table = load_table(saved_run)
    shown = parts_table(markdown)
    assert set(shown) == set(table["task"])
    for task, cells in shown.items():
        rows = table[table["task"] == task]
        assert cells[0] == len(rows)
        assert cells[1] == pytest.approx(1 - rows["dice"].mean(), abs=1e-3)
        assert sum(cells[2:]) == pytest.approx(cells[1], abs=3e-3)  # the bars add up (3 decimals each)
        assert cells[2:] == pytest.approx([rows[c].mean() for c in PART_COLUMNS], abs=1e-3)
    assert (saved_run / "figures" / "error_parts.png").stat().st_size > 5000
    worst = section(markdown, "Why it failed").split("### Most leak", 1)[1]
    leakiest = table.sort_values("error_leak", ascending=False).iloc[0]
    first = worst.split("\n| ", 3)[2]
    assert first.startswith(f"{leakiest['case_id']} |") and re.search(r"\| \d+-\d+", first)


def test_an_old_run_folder_gets_its_parts_from_saved_predictions_else_n_a(saved_run, tmp_path):
    fresh = task_parts(load_table(saved_run))
    for keep_predictions in (True, False):
        old = tmp_path / f"old_{keep_predictions}"
        shutil.copytree(saved_run, old)
        table = load_table(old).drop(columns=[*ROW_COLUMNS, "time_other_s"])
        if not keep_predictions:
            table["prediction_path"] = ""
        for name in ("results.jsonl", "results.parquet", "report.md"):
            (old / name).unlink(missing_ok=True)
        table.to_csv(old / "results.csv", index=False)
        assert load_table(old)["error_leak"].isna().all()
        assert main(["report", str(old)]) == 0
        markdown = (old / "report.md").read_text()
        if keep_predictions:
            assert "computed from their saved predictions" in markdown
            assert parts_table(markdown) == parts_table((saved_run / "report.md").read_text())
        else:
            assert "n/a: this run's rows hold no error parts" in markdown
    assert list(fresh.columns[:4]) == ["task", "n", "mean_dice", "error"] and set(PARTS) <= set(fresh.columns)
    assert part_name("missed_slices") == "missed slices"


def test_compare_says_how_each_part_changed(saved_run, shared_data, tmp_path, capsys):
    """Box baseline (A) against the oracle (B): B removes A's whole error, part by part, in words and in
    compare.md; the changes add up to minus the DSC change."""
    oracle = tmp_path / "oracle"
    assert main(["run", str(shared_data / "hippocampus_mri"), "--model", "oracle", "--limit", "3", "--out", str(oracle),
                 "--no-report", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["compare", str(saved_run), str(oracle), "--out", str(tmp_path / "cmp"), "--resamples", "50"]) == 0
    printed = capsys.readouterr().out
    box, best = load_table(saved_run), load_table(oracle)
    for task, rows in box.groupby("task"):
        other = best[best["task"] == task]
        leak, over = (rows[c].mean() - other[c].mean() for c in ("error_leak", "error_over"))
        assert f"  {task} (3 pairs): B removes {leak:.3f} of leak and {over:.3f} of over" in printed
    assert "\nwhy it failed, B - A (each error part's mean change" in printed
    changes = part_changes(saved_run, oracle)
    everything = changes[changes["task"] == "(all)"].iloc[0]
    assert sum(everything[f"change_{p}"] for p in PARTS) == pytest.approx(box["dice"].mean() - best["dice"].mean(),
                                                                          abs=1e-9)
    assert "## How the error parts changed (B - A)" in (tmp_path / "cmp" / "compare.md").read_text()
    assert change_sentence({"leak": -0.08, "under": 0.02, "over": 0.001}) == "B removes 0.080 of leak and adds 0.020 of under"
