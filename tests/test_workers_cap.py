"""``run --workers 99999`` starts no more processes than the cores and the memory take, and says so (issue 67).

Before, every worker asked was a process (450 MB each): 12 on a 2-core machine, 12.6 GB. The cap is the
cores this process may use, the memory available (after a reserve) at WORKER_MEMORY_BYTES a worker, and
the cases to run (unsaid: fewer cases start fewer processes anyway); a cap is one line on stderr and in
run.log.
"""
from __future__ import annotations

from pathlib import Path

from napari_medsam_eval.benchmark.local_executor import (RESERVED_MEMORY_BYTES, WORKER_MEMORY_BYTES, WorkerCap,
                                                         available_memory, usable_cores, worker_cap)


def test_workers_are_capped_by_cores_and_said_in_one_line():
    cap = WorkerCap(99999, cases=12, cores=2, memory=8 * 10**9)
    assert cap.used == 2
    assert cap.words.startswith("workers: 99999 asked, 2 used (2 CPU cores; 8.0 GB memory available")
    assert "\n" not in cap.words


def test_workers_are_capped_by_the_memory_available():
    cap = WorkerCap(16, cases=100, cores=32, memory=RESERVED_MEMORY_BYTES + 3 * WORKER_MEMORY_BYTES + 1)
    assert cap.used == 3 and "memory available" in cap.words
    assert WorkerCap(16, cases=100, cores=32, memory=10).used == 1  # never none
    assert WorkerCap(4, cases=100, cores=2, memory=None).used == 2  # memory unknown: the cores


def test_fewer_cases_than_workers_start_fewer_processes_unsaid():
    cap = WorkerCap(8, cases=3, cores=16, memory=64 * 10**9)
    assert cap.used == 3 and cap.words == ""
    assert WorkerCap(2, cases=10, cores=16, memory=64 * 10**9).words == ""


def test_this_machines_cap_reads_its_cores_and_memory():
    memory = available_memory()
    assert memory is None or memory > 0
    cap = worker_cap(99999, 10**6)
    assert 1 <= cap.used <= usable_cores() and cap.used < 99999 and cap.words


def test_run_with_99999_workers_uses_the_capped_count(tmp_path, shared_data, capfd):
    from napari_medsam_eval.cli import main

    out = tmp_path / "run"
    assert main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "4", "--workers", "99999",
                 "--out", str(out), "--quiet", "--no-report"]) == 0
    err = capfd.readouterr().err
    used = min(usable_cores(), 4)
    assert f"workers: 99999 asked, {used} used ({usable_cores()} CPU core" in err
    assert f"workers: 99999 asked, {used} used" in (Path(out) / "run.log").read_text()
