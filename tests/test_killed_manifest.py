"""A run killed by anything leaves a manifest that reads as killed on the next look (issue 67).

A SIGKILL or the out-of-memory killer gives a run no chance to write its end: its manifest says
``running``. The manifest records the process that runs it (host, pid, start time) and the run holds its
folder's lock, so ``run_status`` reads it ``killed`` once that process is gone, ``explain`` refuses it in
those words, and a resumed run's manifest marks the session that never ended ``killed``. The run here is a
real process that takes the lock and writes its manifest as a run does, then is killed with SIGKILL.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from napari_medsam_eval.benchmark.explain import explain_run
from napari_medsam_eval.benchmark.manifest import (KILLED, killed_words, process_alive, read_manifest, run_status,
                                                   this_process, write_manifest)
from napari_medsam_eval.core.errors import DataError

#: a run as far as the manifest goes: the folder's lock, a running manifest, then it works (sleeps)
RUNNING = """
import sys, time
from napari_medsam_eval.benchmark.manifest import write_manifest
from napari_medsam_eval.benchmark.run_lock import RunLock
with RunLock(sys.argv[1]):
    write_manifest(sys.argv[1], {"format": 1, "status": "running", "config": {"model": "box"},
                                 "sessions": [{"started_at": "then", "cases_to_run": 3}]})
    print("running", flush=True)
    time.sleep(120)
"""


def start_run(run_dir: Path) -> subprocess.Popen:
    run_dir.mkdir()
    process = subprocess.Popen([sys.executable, "-c", RUNNING, str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "running"
    return process


def test_a_run_killed_with_sigkill_reads_killed_on_the_next_look(tmp_path):
    run_dir = tmp_path / "run"
    process = start_run(run_dir)
    try:
        manifest = read_manifest(run_dir)
        assert manifest["status"] == "running" and manifest["process"]["pid"] == process.pid
        assert run_status(run_dir) == "running"
        with pytest.raises(DataError, match="still running"):
            explain_run(run_dir)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    assert read_manifest(run_dir)["status"] == "running"  # as the killed run left it
    assert run_status(run_dir) == KILLED
    assert f"its process {process.pid}" in killed_words(read_manifest(run_dir))
    with pytest.raises(DataError, match=f"the run was killed before it ended \\(its process {process.pid}"):
        explain_run(run_dir)


def test_a_pid_used_again_by_another_process_is_not_the_run():
    me = this_process()
    assert process_alive(me)
    assert not process_alive({**me, "pid": os.getppid(), "started": 0.0})  # alive, but started long after
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
    assert not process_alive({**me, "pid": int(finished.stdout)})


def test_a_manifest_from_before_the_process_record_falls_back_on_the_lock(tmp_path):
    from napari_medsam_eval.benchmark.run_lock import RunLock

    run_dir = tmp_path / "old"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({"format": 1, "status": "running", "config": {}}))
    with RunLock(run_dir):
        assert run_status(run_dir) == "running"
    assert run_status(run_dir) == KILLED
    assert "no process holds its lock" in killed_words(read_manifest(run_dir))


def test_a_resumed_runs_manifest_marks_the_session_that_never_ended_killed(tmp_path):
    sessions = [{"started_at": "first", "cases_to_run": 3},  # killed: no end written
                {"started_at": "second", "cases_to_run": 2, "ended_at": "then", "status": "cancelled"},
                {"started_at": "now", "cases_to_run": 1}]
    mine = {"format": 1, "status": "running", "config": {}, "sessions": sessions}
    write_manifest(tmp_path, mine)
    written = read_manifest(tmp_path)
    assert [s.get("status") for s in written["sessions"]] == [KILLED, "cancelled", None]
    assert "status" not in sessions[0] and "process" not in mine  # the caller's dict is left as it is
    write_manifest(tmp_path, {**mine, "status": "completed"})
    assert "process" not in read_manifest(tmp_path)  # only a running manifest names its process
    assert run_status(tmp_path) == "completed"


def test_run_resume_of_a_killed_run_says_so_and_its_manifest_keeps_it(tmp_path, shared_data, capsys):
    from napari_medsam_eval.cli import main

    out = tmp_path / "run"
    args = ["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "2", "--out", str(out),
            "--quiet", "--no-report"]
    assert main(args) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    first = {k: v for k, v in manifest["sessions"][0].items() if k not in ("ended_at", "status")}
    killed = {**manifest, "status": "running", "sessions": [first],
              "process": {**this_process(), "pid": int(gone.stdout)}}  # as a SIGKILL leaves it
    (out / "manifest.json").write_text(json.dumps(killed))
    assert run_status(out) == KILLED
    capsys.readouterr()
    assert main([*args, "--resume"]) == 0
    assert f"resuming a run that was killed (its process {int(gone.stdout)}" in capsys.readouterr().err
    after = read_manifest(out)
    assert after["status"] == "completed" and [s["status"] for s in after["sessions"]] == [KILLED, "completed"]
