"""The prompt log (core, no Qt): schema round trip, atomic appends, malformed lines, the replay protocol."""
from __future__ import annotations

import math
import multiprocessing

import numpy as np
import pytest

from napari_medsam_eval.core.case import Case, Spacing
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.protocols.prompt_log import (COLUMNS, PromptLogError, append_row, box_iou, centre_offset,
                                           default_log_path, logging_off, make_row, read_log)
from napari_medsam_eval.protocols import build_protocol


def _row(case_id="case_a", label=1, z=3, operation="propagate", box=(10.5, 12.0, 30.25, 40.0), **extra):
    drawn = Prompt(label, slice_index=z, boxes=[box], points=[(20.0, 25.5)], point_labels=[1], protocol="manual")
    theirs = Prompt(label, slice_index=z, boxes=[(12, 12, 30, 38)], protocol="medsam2")
    return make_row(case_id=case_id, image_path=f"/data/{case_id}.npz", kind="volume", drawn=drawn,
                    operation=operation, model="litemedsam", protocol="medsam2", protocol_prompt=theirs,
                    spacing_yx=(0.5, 0.25), drawn_dsc=0.8123456789, protocol_dsc=0.85, drawn_dsc_slice=0.9,
                    protocol_dsc_slice=math.nan, options={"margin": 2, "z_limits": (1, 5)}, **extra)


def test_geometry():
    assert box_iou((0, 0, 9, 9), (0, 0, 9, 9)) == 1.0
    assert box_iou((0, 0, 9, 9), (10, 10, 19, 19)) == 0.0
    assert box_iou((0, 0, 9, 9), (5, 0, 14, 9)) == pytest.approx(50 / 150)
    assert math.isnan(box_iou(None, (0, 0, 1, 1)))
    a = Prompt(1, boxes=[(0, 0, 10, 10)])
    b = Prompt(1, boxes=[(3, 4, 13, 14)])
    assert centre_offset(a, b, (2.0, 1.0)) == pytest.approx((5.0, math.hypot(3 * 1.0, 4 * 2.0)))
    points = Prompt(1, points=[(5, 5), (100, 100)], point_labels=[1, 0])  # negative points do not count
    assert centre_offset(a, points)[0] == pytest.approx(0.0)


def test_round_trip_and_default_path(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "log.csv"
    append_row(path, _row())
    append_row(path, _row(case_id="case,with \"quotes\"", label=2, z=0, operation="slice"))
    text = path.read_text()
    assert text.splitlines()[0] == ",".join(COLUMNS) and len(text.splitlines()) == 3
    first, second = read_log(path)
    assert (first.line, first.case_id, first.target_label, first.slice_index, first.operation) == (
        2, "case_a", 1, 3, "propagate")
    assert first.boxes == ((10.5, 12.0, 30.25, 40.0),) and first.points == ((20.0, 25.5),) and first.point_labels == (1,)
    assert first.number("drawn_dsc") == 0.8123456789  # floats written exactly (repr)
    assert math.isnan(first.number("protocol_dsc_slice"))
    assert first.number("box_iou") == pytest.approx(box_iou((10.5, 12.0, 30.25, 40.0), (12, 12, 30, 38)))
    assert second.case_id == 'case,with "quotes"' and second.operation == "slice"
    prompt = first.prompt("log.csv")
    assert prompt.boxes == [(10.5, 12.0, 30.25, 40.0)] and prompt.info["operation"] == "propagate"
    with pytest.raises(ValueError, match="unknown prompt log column"):
        append_row(path, {"dsc": 1})
    monkeypatch.setenv("MEDSAM_EVAL_PROMPT_LOG", str(tmp_path / "x.csv"))
    assert default_log_path() == tmp_path / "x.csv"
    assert not logging_off()
    monkeypatch.delenv("MEDSAM_EVAL_PROMPT_LOG")  # no file named: off, and no place of ours (never the home folder)
    assert default_log_path() is None and logging_off()
    monkeypatch.setenv("MEDSAM_EVAL_PROMPT_LOG", "off")
    assert logging_off() and default_log_path() is None


def _append_many(args):
    path, worker = args
    for i in range(40):
        append_row(path, _row(case_id=f"w{worker}_{i}"))


def test_concurrent_appends_lose_nothing(tmp_path):
    path = tmp_path / "log.csv"
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        pool.map(_append_many, [(str(path), w) for w in range(3)])
    rows = read_log(path)
    assert sorted(r.case_id for r in rows) == sorted(f"w{w}_{i}" for w in range(3) for i in range(40))
    assert path.read_text().count("time,case_id") == 1


def test_torn_line_and_foreign_header(tmp_path):
    path = tmp_path / "log.csv"
    append_row(path, _row())
    with open(path, "a") as f:
        f.write("2026-01-01,half")  # a crash mid-line: the next row starts on its own line
    append_row(path, _row(case_id="after"))
    with pytest.raises(PromptLogError, match=r"line 3: 2 fields"):
        read_log(path)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(PromptLogError, match="line 1"):
        append_row(other, _row())


@pytest.mark.parametrize("column, value, message", [
    ("drawn_boxes", "[[1, 2, 3]", "line 3: drawn_boxes is not JSON"),
    ("drawn_boxes", "[[5, 2, 3, 9]]", "line 3: .*x0 > x1"),
    ("target_label", "one", "line 3: invalid literal"),
    ("operation", "guess", "line 3: operation must be one of"),
    ("drawn_point_labels", "[1, 1]", "line 3: drawn_point_labels must be one 0/1 per point"),
])
def test_malformed_line_names_file_and_line(tmp_path, column, value, message):
    path = tmp_path / "log.csv"
    append_row(path, _row())
    append_row(path, {**_row(), column: value})
    with pytest.raises(PromptLogError, match=message) as info:
        read_log(path)
    assert str(path) in str(info.value)
    # the CLI refuses it before any work, naming the file and the line
    assert main(["run", str(tmp_path / "nowhere"), "--prompts", str(path), "--out", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()


def test_replay_protocol(tmp_path):
    path = tmp_path / "log.csv"
    append_row(path, _row(label=1, z=3, operation="slice", box=(1, 1, 5, 5)))
    append_row(path, _row(label=1, z=2, operation="propagate"))  # the last replayable row of a label wins
    append_row(path, _row(label=1, z=4, operation="correct"))  # corrections are not replayed
    label = np.zeros((6, 50, 50), np.uint8)
    label[2:5, 10:40, 10:30] = 1
    label[1, 1:3, 1:3] = 2
    case = Case(np.zeros((6, 50, 50), np.uint8), label, Spacing.isotropic("zyx"), "volume", "case_a")
    protocol = build_protocol("replay", log=str(path))
    assert protocol.describe()["options"]["log"] == str(path)
    one, two = protocol.prompts(case)
    assert (one.target_label, one.slice_index, one.boxes, one.info["operation"]) == (
        1, 2, [(10.5, 12.0, 30.25, 40.0)], "propagate")
    assert one.points == [(20.0, 25.5)] and one.point_labels == [1] and one.info["log_line"] == 3
    assert two.target_label == 2 and "no logged prompt for case 'case_a' label 2" in two.info["no_prompt"]
    other = Case(case.image, label, case.spacing, "volume", "case_b")
    assert all("no logged prompt" in p.info["no_prompt"] for p in protocol.prompts(other))
    # matched by the image's file name when the case id differs
    renamed = Case(case.image, label, case.spacing, "volume", "x", metadata={"image_path": "/else/case_a.npz"})
    assert protocol.prompts(renamed)[0].slice_index == 2


def test_cli_prompts_refuses_another_protocol(tmp_path, capsys):
    path = tmp_path / "log.csv"
    append_row(path, _row())
    assert main(["run", str(tmp_path), "--prompts", str(path), "--protocol", "medsam2",
                 "--out", str(tmp_path / "run")]) == 2
    assert "cannot be combined with --protocol medsam2" in capsys.readouterr().err
    assert main(["run", str(tmp_path), "--prompts", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "r")]) == 2
    assert "no such prompt log" in capsys.readouterr().err


def test_the_log_path_is_shown_with_the_home_folder_as_a_tilde(tmp_path, monkeypatch):
    from pathlib import Path

    from napari_medsam_eval.protocols.prompt_log import shown_path

    monkeypatch.setenv("HOME", str(tmp_path))
    assert shown_path(tmp_path / "medsam-eval" / "prompt_log.csv") == "~/medsam-eval/prompt_log.csv"
    assert shown_path(Path("/elsewhere/log.csv")) == "/elsewhere/log.csv"
