"""The medsam-eval CLI: info and score, and one-line errors for bad input."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import SimpleITK as sitk

from napari_medsam_eval.cli import main

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """Run the installed console script in a fresh process, as a user would."""
    return subprocess.run([sys.executable, "-m", "napari_medsam_eval", *map(str, args)], capture_output=True, text=True)


def test_info_deeplesion_prints_spacing_in_array_order(shared_data):
    result = run_cli("info", shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz")
    assert result.returncode == 0, result.stderr
    assert "spacing (z, y, x) = (5.0, 0.314, 0.314) mm" in result.stdout
    assert "kind      volume (CT)" in result.stdout
    assert "1: 11697 voxels" in result.stdout


def test_info_json_with_label(shared_data, capsys):
    image = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    label = shared_data / "hippocampus_mri" / "labelsTr" / "hippocampus_001.nii.gz"
    assert main(["info", str(image), "--label", str(label), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["kind"] == "volume" and facts["spacing_axes"] == ["z", "y", "x"]
    assert [row["value"] for row in facts["labels"]] == [0, 1, 2]
    assert {row["name"] for row in facts["labels"]} >= {"anterior", "posterior"}


def test_score_sample_data_table_and_json(capsys):
    pred = SAMPLE / "phantom_ct" / "label_rater2.nii.gz"
    gt = SAMPLE / "phantom_ct" / "label.nii.gz"
    assert main(["score", str(pred), str(gt), "--json"]) == 0
    rows = {row["label"]: row for row in json.loads(capsys.readouterr().out)["labels"]}
    assert set(rows) == {1, 2, 3}
    assert rows[3]["dice"] == 1.0  # the lesion is identical in both raters
    assert 0.8 < rows[1]["dice"] < 1.0 and 0.8 < rows[2]["dice"] < 1.0
    # the second rater shifted organ 2 by one voxel along x (0.8 mm): HD95 is that shift
    assert rows[2]["hd95"] == pytest.approx(0.8)


def test_score_csv_against_itself_is_perfect(capsys):
    gt = SAMPLE / "phantom_ct" / "label.nii.gz"
    assert main(["score", str(gt), str(gt), "--csv", "--labels", "1", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("label,name,dice")
    assert len(lines) == 3 and all(",1.0,1.0,1.0,0.0," in line for line in lines[1:])


def _assert_clean_error(result: subprocess.CompletedProcess, file_name: str) -> None:
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")
    assert file_name in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_truncated_nifti_gives_one_line_error(tmp_path, shared_data):
    source = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    broken = tmp_path / "truncated.nii.gz"
    data = source.read_bytes()
    broken.write_bytes(data[: len(data) // 2])
    _assert_clean_error(run_cli("info", broken), "truncated.nii.gz")


def test_text_file_named_nifti_gives_one_line_error(tmp_path):
    fake = tmp_path / "notes.nii.gz"
    fake.write_text("this is not an image\n")
    _assert_clean_error(run_cli("info", fake), "notes.nii.gz")


def test_mismatched_pair_gives_one_line_error(tmp_path, shared_data):
    image = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    labels = sorted((shared_data / "hippocampus_mri" / "labelsTr").glob("*.nii.gz"))
    shape = sitk.ReadImage(str(image)).GetSize()
    other = next(p for p in labels if sitk.ReadImage(str(p)).GetSize() != shape)
    _assert_clean_error(run_cli("info", image, "--label", other), other.name)
    _assert_clean_error(run_cli("score", other, labels[0]), other.name)


def test_missing_file_gives_one_line_error(tmp_path):
    _assert_clean_error(run_cli("info", tmp_path / "nowhere.nii.gz"), "nowhere.nii.gz")


def test_console_script_is_installed():
    exe = Path(sys.executable).parent / "medsam-eval"  # the venv's bin, whether or not it is on PATH
    assert exe.is_file(), exe
    result = subprocess.run([str(exe), "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "info" in result.stdout and "score" in result.stdout


def test_the_console_command_exits_with_the_commands_status(monkeypatch):
    """``medsam-eval`` is :func:`console_main`: fewer collections over torch's import-time objects,
    a frozen heap at exit, and the command's own status."""
    import gc

    import napari_medsam_eval.cli as cli

    monkeypatch.setattr(cli, "main", lambda: 3)
    before = gc.get_threshold()
    try:
        with pytest.raises(SystemExit) as exited:
            cli.console_main()
        assert exited.value.code == 3
        assert gc.get_threshold() == (cli.GC_GEN0_THRESHOLD, *before[1:])
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
