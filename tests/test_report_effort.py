"""The report's effort section for a ``corrections`` run: NoC per task and the DSC-vs-interactions figure.

Synthetic curves (K = 5, six values a case), NoC and medians worked out by hand:

* ct/liver, 4 cases:
  c0 0.70 0.82 0.86 0.91 0.92 0.93 -> NoC 0.80/0.85/0.90 = 1, 2, 3
  c1 0.60 0.75 0.84 0.88 0.89 0.89 -> 2, 3, 6 (0.90 never reached)
  c2 0.85 0.90 0.92 0.93 0.94 0.95 -> 0, 0, 1
  c3 0.50 0.65 0.78 0.83 0.86 0.88 -> 3, 4, 6
  median NoC: 1.5, 2.5, 4.5; reached 100 %, 100 %, 50 %; median DSC after 0: 0.65, after 5: 0.91
* ct/spleen, 3 cases (and one failed row, left out):
  s0 0.40 0.55 0.70 0.79 0.81 0.84 -> 4, 6, 6
  s1 0.30 0.50 0.60 0.70 0.75 0.80 -> 5, 6, 6
  s2 0.82 0.86 0.88 0.89 0.89 0.89 -> 0, 1, 6
  median NoC: 4, 6 (> 5), 6 (> 5); reached 100 %, 33.3 %, 0 %; median DSC after 0: 0.40, after 5: 0.84
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from test_report_data import rows_a, write_run

from napari_medsam_eval.benchmark.schema import to_dataframe
from napari_medsam_eval.evaluation.interaction_effort import noc_columns
from napari_medsam_eval.report import write_report

PNG = b"\x89PNG\r\n\x1a\n"
FIGURE = "dsc_vs_interactions.png"
CURVES = {
    "ct/liver": [[0.70, 0.82, 0.86, 0.91, 0.92, 0.93], [0.60, 0.75, 0.84, 0.88, 0.89, 0.89],
                 [0.85, 0.90, 0.92, 0.93, 0.94, 0.95], [0.50, 0.65, 0.78, 0.83, 0.86, 0.88]],
    "ct/spleen": [[0.40, 0.55, 0.70, 0.79, 0.81, 0.84], [0.30, 0.50, 0.60, 0.70, 0.75, 0.80],
                  [0.82, 0.86, 0.88, 0.89, 0.89, 0.89]],
}
HEADER = ("| task | n | K | corrections given | median DSC after 0 | median DSC after K | median NoC@0.80 | reached 0.80 (% of cases) "
          "| median NoC@0.85 | reached 0.85 (% of cases) | median NoC@0.90 | reached 0.90 (% of cases) |")
EXPECTED_LINES = (
    "| ct/liver | 4 | 5 | 8 click | 0.650 | 0.910 | 1.5 | 100.0 % | 2.5 | 100.0 % | 4.5 | 50.0 % |",
    "| ct/spleen | 3 | 5 | 3 paint, 1 absent | 0.400 | 0.840 | 4 | 100.0 % | > 5 (not reached) | 33.3 % | > 5 (not reached) | 0.0 % |",
)


#: the anchors each case's prompt column holds: the first box, then the corrections (what the report counts)
_BOX = {"protocol": "medsam2", "info": {}}
ANCHORS = {"liver": [[_BOX, {"info": {"correction": "click"}}, {"info": {"correction": "click"}}]] * 4,
           "spleen": [[_BOX, {"info": {"correction": "paint", "painted": True}}],
                      [_BOX, {"info": {"correction": "paint", "painted": True}}, {"info": {"absent": True}}],
                      [_BOX, {"info": {"correction": "paint", "painted": True}}]]}


def corrections_rows() -> list[dict]:
    """Result rows of a corrections run: one per case, the last DSC as ``dice``, plus a failed spleen case."""
    rows = []
    for task, curves in CURVES.items():
        organ = task.split("/")[1]
        for i, curve in enumerate(curves):
            rows.append({
                "case_id": f"{organ}_{i}", "dataset": "ct", "task": task, "target_label": 1, "label_name": organ,
                "kind": "volume", "model": "medsam2", "protocol": "corrections", "status": "ok",
                "dice": curve[-1], "nsd": curve[-1], "n_slices": 6, "prompt_slice": 3, "seed": 0,
                "gt_voxels": 100, "pred_voxels": 100, "slice_dice": json.dumps([curve[-1]] * 6),
                "dice_after": json.dumps(curve), "nsd_after": json.dumps(curve), **noc_columns(curve),
                "prompt": json.dumps(ANCHORS[organ][i])})
    rows.append({**rows[-1], "case_id": "spleen_9", "status": "failed", "error": "out of memory",
                 "dice": float("nan"), "nsd": float("nan"), "dice_after": "", "nsd_after": "",
                 **{name: float("nan") for name in ("noc80", "noc85", "noc90")}})
    return to_dataframe(rows).to_dict("records")


def test_hand_computed_nocs_match_the_effort_columns():
    """The hand-worked NoC of the module notes are the ones the rows carry (guards the expectations below)."""
    table = to_dataframe(corrections_rows())
    ok = table[table["status"] == "ok"].set_index("case_id")
    assert ok.loc["liver_1", ["noc80", "noc85", "noc90"]].tolist() == [2, 3, 6]
    assert ok.loc["spleen_2", ["noc80", "noc85", "noc90"]].tolist() == [0, 1, 6]
    liver = ok[ok["task"] == "ct/liver"]
    assert np.median(liver["noc90"]) == 4.5
    assert np.median([c[0] for c in CURVES["ct/liver"]]) == pytest.approx(0.65)


def test_corrections_report_has_noc_table_and_curve_figure(tmp_path):
    run = write_run(tmp_path / "corrections", corrections_rows())
    text = write_report(run).read_text()
    html = (run / "report.html").read_text()
    assert "## Effort (corrections)" in text and "<h2>Effort (corrections)</h2>" in html
    section = text.split("## Effort (corrections)")[1].split("\n## ")[0]
    assert HEADER in section
    for line in EXPECTED_LINES:
        assert line in section
    assert "not reached" in section and "K + 1" in section  # the rule for never reached is stated
    # the section comes before the other figures, and links its figure in both documents
    assert text.index("## Effort (corrections)") < text.index("## Figures")
    assert f"figures/{FIGURE}" in section and f'src="figures/{FIGURE}"' in html
    data = (run / "figures" / FIGURE).read_bytes()
    assert data[:8] == PNG and len(data) > 5_000  # a drawn figure, not an empty canvas


def test_report_without_curves_has_no_effort_section(tmp_path):
    run = write_run(tmp_path / "plain", rows_a())
    (run / "figures").mkdir()
    (run / "figures" / FIGURE).write_bytes(PNG)  # left by an earlier report written into this folder
    text = write_report(run).read_text()
    assert "Effort" not in text and "NoC" not in text and "interactions" not in text
    assert "Effort" not in (run / "report.html").read_text()
    names = sorted(p.name for p in (run / "figures").iterdir())
    assert FIGURE not in names and names[:2] == ["box_dice.png", "box_nsd.png"]
    assert len(names) == 7 and all(name.startswith("slices_") for name in names[2:])  # box plots + 5 worst cases


def test_compare_of_two_corrections_runs_shows_both_curves_and_nocs(tmp_path, capsys):
    """``medsam-eval compare`` of box-like A and paint-like B: each run's tools, median curve and NoC."""
    from napari_medsam_eval.cli import main

    a_rows = corrections_rows()
    b_rows = []
    for row in a_rows:  # B: every step 0.05 higher after the first, capped at 1
        curve = json.loads(row["dice_after"]) if row["status"] == "ok" else None
        if curve is not None:
            curve = [curve[0]] + [min(1.0, v + 0.05) for v in curve[1:]]
            row = {**row, "dice_after": json.dumps(curve), "dice": curve[-1], **noc_columns(curve),
                   "prompt": json.dumps([_BOX] + [{"info": {"correction": "paint", "painted": True}}] * 2)}
        b_rows.append(row)
    run_a, run_b = write_run(tmp_path / "a", a_rows), write_run(tmp_path / "b", b_rows)
    assert main(["compare", str(run_a), str(run_b), "--out", str(tmp_path / "cmp"), "--resamples", "50"]) == 0
    printed = capsys.readouterr().out
    text = (tmp_path / "cmp" / "compare.md").read_text()
    for shown in (printed, text):
        assert "Effort (corrections)" in shown or "effort (corrections)" in shown
        assert "0.650 0.785" in shown and "0.650 0.835" in shown  # liver: A's median after 1, B's
        assert "8 paint" in shown and "8 click" in shown
    plain = tmp_path / "plain"
    assert main(["compare", str(write_run(plain / "a", rows_a())), str(write_run(plain / "b", rows_a()))]) == 0
    assert "effort" not in capsys.readouterr().out  # runs without curves: no effort part
