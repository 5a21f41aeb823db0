"""Issue 17, "nothing lost": written files are verified, one writer per run folder, resume redoes what is not sound.

The full-disk tests fill the disk for real: a file-size limit (``RLIMIT_FSIZE``,
which any user may lower) for ``segment``, and a full tmpfs mounted over the
run's ``predictions/`` folder in a private mount namespace (``unshare -rm``,
no root needed) for ``run``.
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.benchmark import load_table, run_benchmark
from napari_medsam_eval.benchmark.manifest import check_resumable
from napari_medsam_eval.benchmark.schema import comparable
from napari_medsam_eval.benchmark.store import ROWS_FILE, ResultStore, read_rows
from napari_medsam_eval.core.checksum import sha256_file
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.io import read_label

CASES = ("hippocampus_001", "hippocampus_004", "hippocampus_007")
BOX = ["--box", "10", "10", "30", "35"]


@pytest.fixture
def hippo3(tmp_path: Path, shared_data: Path) -> Path:
    source, root = shared_data / "hippocampus_mri", tmp_path / "hippo3"
    for folder in ("imagesTr", "labelsTr"):
        (root / folder).mkdir(parents=True)
        for case in CASES:
            shutil.copy(source / folder / f"{case}.nii.gz", root / folder)
    shutil.copy(source / "dataset.json", root)
    return root


def _cli(*args: str, file_size_limit: int | None = None) -> subprocess.CompletedProcess:
    """``medsam-eval ARGS`` in a fresh interpreter, optionally under a file-size limit (a disk that fills up)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run([sys.executable, "-m", "napari_medsam_eval", *args], capture_output=True, text=True,
                          preexec_fn=limit if file_size_limit else None, timeout=300)


def _one_line_error(process: subprocess.CompletedProcess) -> str:
    assert process.returncode == 2, process.stderr
    assert "Traceback" not in process.stderr and "internal error" not in process.stderr, process.stderr
    return process.stderr


@pytest.mark.parametrize("suffix", [".nii.gz", ".nii", ".nrrd", ".mha", ".npz"])
@pytest.mark.slow
def test_segment_on_a_full_disk_fails_and_keeps_the_good_file(tmp_path, shared_data, suffix):
    image = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    out = tmp_path / f"pred{suffix}"
    good = _cli("segment", str(image), "--model", "box", *BOX, "--out", str(out))
    assert good.returncode == 0, good.stderr
    before = out.read_bytes()
    assert len(before) > 100
    # a second segmentation (another box) where only 100 bytes can be written per file
    full = _cli("segment", str(image), "--model", "box", "--box", "5", "5", "25", "30", "--out", str(out),
                file_size_limit=100)
    message = _one_line_error(full)
    assert str(out) in message and "cannot write mask" in message and "nothing was replaced" in message
    assert out.read_bytes() == before, "the earlier good file must stay as it was"
    left = [p.name for p in tmp_path.iterdir() if p.name != ".medsam-eval-written.json"]  # segment's ledger
    assert left == [out.name], "no temporary file may be left behind"


def test_segment_checks_the_output_before_any_model_work(tmp_path, shared_data, capsys, monkeypatch):
    import napari_medsam_eval.cli.segment as segment_cli

    def no_model(*args, **kwargs):
        raise AssertionError("the model was built before the output path was checked")

    monkeypatch.setattr(segment_cli, "build_backend", no_model)
    image = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    for out, fragment in [(tmp_path / "pred.txt", "cannot write a mask as .txt"),
                          (a_file / "sub" / "pred.nii.gz", "is a file, not a folder"),
                          (tmp_path, "the output is a folder"),
                          (tmp_path / "pred.png", "PNG masks are for 2D images")]:
        assert main(["segment", str(image), "--model", "box", *BOX, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert fragment in err and "internal error" not in err, err


def test_run_refuses_an_output_under_a_file(tmp_path, hippo3, capsys):
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    assert main(["run", str(hippo3), "--model", "box", "--out", str(a_file / "sub"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and "internal error" not in err


def _unshare_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


def _in_namespace_with_full_disk(mount_point: Path, command: list[str]) -> subprocess.CompletedProcess:
    """Run ``command`` with a full 4 KiB tmpfs mounted over ``mount_point`` (private to the command)."""
    filler = mount_point / ".filler"
    script = (f'mount -t tmpfs -o size=4k tmpfs "{mount_point}" && head -c 4096 /dev/zero > "{filler}"; '
              + " ".join(f"'{part}'" for part in command))
    return subprocess.run(["unshare", "-rm", "bash", "-c", script], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_run_with_a_full_disk_records_a_failed_row_and_resume_redoes_it(tmp_path, hippo3):
    assert _unshare_available(), "this test needs `unshare -rm` (util-linux, user namespaces) to fill a disk"
    out, reference = tmp_path / "run", tmp_path / "reference"
    args = ["run", str(hippo3), "--model", "box", "--save-predictions", "--quiet", "--no-report"]
    assert _cli(*args, "--out", str(reference)).returncode == 0
    assert _cli(*args, "--out", str(out), "--limit", "1").returncode == 0
    first = out / "predictions" / "hippocampus_001.nii.gz"
    good = first.read_bytes()
    # the predictions folder is now a full disk: the first case's file is hidden (so it is redone) and nothing fits
    full = _in_namespace_with_full_disk(out / "predictions", [sys.executable, "-m", "napari_medsam_eval", *args,
                                                              "--out", str(out), "--resume"])
    message = _one_line_error(full)
    assert "the run stopped: prediction not saved" in message and "--resume" in message
    rows = read_rows(out / ROWS_FILE)
    assert {r["case_id"] for r in rows} == {"hippocampus_001"} and all(r["status"] == "failed" for r in rows)
    assert "No space left on device" in rows[0]["error"] or "cannot write mask" in rows[0]["error"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "prediction not saved" in manifest["error"]
    assert "prediction not saved" in (out / "run.log").read_text()
    assert first.read_bytes() == good, "the file written before the disk filled is untouched"
    # space again: resume redoes the failed case and finishes; the table equals an uninterrupted run's
    resumed = _cli(*args, "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    table, expected = load_table(out), load_table(reference)
    assert (table["status"] == "ok").all() and len(table) == 6
    pd.testing.assert_frame_equal(comparable(table), comparable(expected))
    for _, row in table.iterrows():
        path = out / row["prediction_path"]
        assert path.stat().st_size > 0 and sha256_file(path) == row["prediction_sha256"]


def test_resume_redoes_a_case_whose_prediction_is_missing_or_changed(tmp_path, hippo3):
    out = tmp_path / "run"
    table = run_benchmark(hippo3, out, "box", save_predictions=True)
    assert table["prediction_sha256"].str.len().eq(64).all()
    changed = out / table.iloc[0]["prediction_path"]  # hippocampus_001
    missing = out / table.iloc[2]["prediction_path"]  # hippocampus_004
    changed.write_bytes(b"")  # what a full disk used to leave
    missing.unlink()
    seen: list[int] = []
    resumed = run_benchmark(hippo3, out, "box", save_predictions=True, resume=True,
                            progress=lambda done, total, rows: seen.append(done))
    assert seen == [1, 2, 3], "the two unsound cases are redone, the sound one kept"
    pd.testing.assert_frame_equal(comparable(resumed), comparable(table))
    for path in (changed, missing):
        assert read_label(path).array.any()
    assert len(read_rows(out / ROWS_FILE)) == 6, "a redone case replaces its rows; none is counted twice"


def test_a_duplicated_case_block_is_an_error_not_counted_twice(tmp_path, hippo3, capsys):
    out = tmp_path / "run"
    run_benchmark(hippo3, out, "box", limit=2)
    lines = (out / ROWS_FILE).read_bytes().splitlines(keepends=True)
    (out / ROWS_FILE).write_bytes(b"".join(lines + lines[:2]))
    with pytest.raises(DataError, match="line 5: case hippocampus_001 appears a second time"):
        read_rows(out / ROWS_FILE)
    assert main(["report", str(out)]) == 2
    assert "appears a second time" in capsys.readouterr().err


@pytest.mark.slow
def test_two_runs_into_one_new_folder_one_refuses(tmp_path, hippo3):
    """The issue's race: a litemedsam run and a box run started 0.5 s apart into the same new folder."""
    out = tmp_path / "race"
    common = ["run", str(hippo3), "--out", str(out), "--quiet", "--no-report", "--limit", "1"]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "4294967296", "MALLOC_TRIM_THRESHOLD_": "4294967296",
           "MALLOC_TOP_PAD_": "1073741824"}
    slow = subprocess.Popen([sys.executable, "-m", "napari_medsam_eval", *common, "--model", "litemedsam"],
                            stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(0.5)
    fast = subprocess.Popen([sys.executable, "-m", "napari_medsam_eval", *common, "--model", "box"],
                            stderr=subprocess.PIPE, text=True, env=env)
    results = {name: (p.wait(timeout=600), p.stderr.read()) for name, p in (("litemedsam", slow), ("box", fast))}
    codes = sorted(code for code, _ in results.values())
    assert codes == [0, 2], results
    refused = next(err for code, err in results.values() if code == 2)
    assert "another run is writing into this run folder" in refused or "not empty" in refused
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(load_table(out)["model"]) == {manifest["config"]["model"]}


def test_resume_refuses_another_checkpoint():
    config = {"config": {"model": "litemedsam"}, "model": {"checkpoint_sha256": "a" * 64}}
    check_resumable(config, {"config": {"model": "litemedsam"}}, "run", model_now={"checkpoint_sha256": "a" * 64})
    with pytest.raises(DataError, match="model checkpoint_sha256: aaaaaaaaaaaa... -> bbbbbbbbbbbb..."):
        check_resumable(config, {"config": {"model": "litemedsam"}}, "run",
                        model_now={"checkpoint_sha256": "b" * 64})


def test_resume_refuses_changed_dataset_files(tmp_path, hippo3, capsys):
    out = tmp_path / "run"
    run_benchmark(hippo3, out, "box", limit=1)
    shutil.copy(hippo3 / "imagesTr" / "hippocampus_004.nii.gz", hippo3 / "imagesTr" / "hippocampus_001.nii.gz")
    assert main(["run", str(hippo3), "--model", "box", "--out", str(out), "--quiet", "--resume"]) == 2
    assert "the dataset's files changed since this run started" in capsys.readouterr().err


def test_report_after_a_second_kill_is_built_from_the_rows(tmp_path, hippo3, capsys):
    """A run killed after its tables were written: the report counts the cases of results.jsonl, not the stale parquet."""
    out, longer = tmp_path / "run", tmp_path / "longer"
    run_benchmark(hippo3, out, "box", limit=1)
    run_benchmark(hippo3, longer, "box")
    extra = [row for row in read_rows(longer / ROWS_FILE) if row["case_id"] != "hippocampus_001"]
    store = ResultStore(out)
    for case_id in ("hippocampus_004", "hippocampus_007"):  # appended as the killed resume appended them
        store.append_case([row for row in extra if row["case_id"] == case_id])
    assert main(["report", str(out)]) == 0
    capsys.readouterr()
    text = (out / "report.md").read_text()
    assert "results: results.jsonl, 6 rows" in text and "results.parquet is stale (1 cases; results.jsonl has 3)" in text


def test_prediction_checksum_is_of_the_verified_file(tmp_path, hippo3):
    out = tmp_path / "run"
    table = run_benchmark(hippo3, out, "box", save_predictions=True, limit=1)
    row = table.iloc[0]
    path = out / row["prediction_path"]
    assert sha256_file(path) == row["prediction_sha256"]
    saved = read_label(path).array
    assert np.isin(np.unique(saved), [0, 1, 2]).all() and saved.any()


def test_a_read_only_output_folder_is_a_one_line_error(tmp_path, hippo3, shared_data):
    """Root ignores file modes, so the folder is a read-only tmpfs in a private mount namespace."""
    assert _unshare_available(), "this test needs `unshare -rm` (util-linux, user namespaces)"
    folder = tmp_path / "readonly"
    folder.mkdir()
    image = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    cli = [sys.executable, "-m", "napari_medsam_eval"]
    for command, fragment in [
        ([*cli, "segment", str(image), "--model", "box", *BOX, "--out", str(folder / "pred.nii.gz")],
         f"{folder}: folder is not writable"),
        ([*cli, "run", str(hippo3), "--model", "box", "--out", str(folder / "run"), "--quiet"],
         f"{folder}: folder is not writable"),
    ]:
        script = f'mount -t tmpfs -o ro tmpfs "{folder}" && ' + " ".join(f"'{part}'" for part in command)
        process = subprocess.run(["unshare", "-rm", "bash", "-c", script], capture_output=True, text=True,
                                 timeout=300)
        assert fragment in _one_line_error(process)
