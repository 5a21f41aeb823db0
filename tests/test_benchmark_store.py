"""Atomic rows and resume: a run killed at any moment loses no row and keeps no partial one."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from napari_medsam_eval.benchmark import ResultStore, comparable, load_table, run_benchmark
from napari_medsam_eval.benchmark.store import BLOCK_KEY, encode_case
from napari_medsam_eval import models
from napari_medsam_eval.core.errors import DataError

SLOW_BACKEND = '''
"""The box baseline, slowed down so a test can kill a run part-way; records its process ids.
SLOW_BOX_DELAY overrides the delay (a resume in the test's process need not wait: the rows are the same)."""
import os
import time
from pathlib import Path

from napari_medsam_eval.models.baselines import BoxBackend


class SlowBox(BoxBackend):
    name = "slowbox"

    def __init__(self, delay):
        self.delay = float(os.environ.get("SLOW_BOX_DELAY", delay))

    def segment(self, image, prompt, *, cache_key=None):
        time.sleep(self.delay)
        return super().segment(image, prompt, cache_key=cache_key)


def build(delay=0.0, pid_dir=None, checkpoint=None, device=None):
    if pid_dir:
        (Path(pid_dir) / str(os.getpid())).touch()
    return SlowBox(float(delay))
'''


def _rows(case_id: str, n: int) -> list[dict]:
    return [{"case_id": case_id, "target_label": t, "status": "ok", "dice": 0.5} for t in range(1, n + 1)]


def test_append_and_recover(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.append_case(_rows("a", 2))
    store.append_case(_rows("b", 1))
    lines = store.path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)[BLOCK_KEY] in (1, 2) for line in lines)
    assert [r["case_id"] for r in store.recover()] == ["a", "a", "b"]
    assert BLOCK_KEY not in store.recover()[0]
    assert store.done_case_ids() == {"a", "b"}


@pytest.mark.parametrize("cut", ["mid_line", "line_boundary_mid_case", "no_newline"])
def test_incomplete_tail_is_cut_off(tmp_path: Path, cut: str) -> None:
    store = ResultStore(tmp_path)
    store.append_case(_rows("a", 2))
    complete = store.path.stat().st_size
    block = encode_case(_rows("b", 3))
    first_line_end = block.index(b"\n") + 1
    partial = {"mid_line": block[: first_line_end + 10], "line_boundary_mid_case": block[: first_line_end],
               "no_newline": block[: len(block) - 1]}[cut]
    with open(store.path, "ab") as handle:
        handle.write(partial)
    assert store.done_case_ids() == {"a"}
    assert [r["case_id"] for r in store.recover()] == ["a", "a"]
    assert store.path.stat().st_size == complete, "the incomplete case must be truncated away"
    store.append_case(_rows("b", 3))
    assert [r["case_id"] for r in store.recover()] == ["a", "a", "b", "b", "b"]


def test_damage_before_the_tail_is_an_error(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    store.append_case(_rows("a", 1))
    with open(store.path, "ab") as handle:
        handle.write(b"{garbage\n")
    store.append_case(_rows("b", 1))
    with pytest.raises(DataError, match="line 2 is damaged"):
        store.recover()


def test_resume_after_cutting_the_file_anywhere(tmp_path: Path, shared_data: Path) -> None:
    """Simulate a kill during the write of any case: the resumed table equals the full one."""
    dataset = shared_data / "hippocampus_mri"
    full = run_benchmark(dataset, tmp_path / "full", "box", limit=3)
    data = (tmp_path / "full" / "results.jsonl").read_bytes()
    line_ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    for cut in (line_ends[0] + 7, line_ends[2], line_ends[3] - 1):  # mid-row, between two rows of a case, ...
        run_dir = tmp_path / f"cut{cut}"
        run_dir.mkdir()
        (run_dir / "results.jsonl").write_bytes(data[:cut])
        (run_dir / "manifest.json").write_bytes((tmp_path / "full" / "manifest.json").read_bytes())
        resumed = run_benchmark(dataset, run_dir, "box", limit=3, resume=True)
        pd.testing.assert_frame_equal(comparable(resumed), comparable(full))
        assert not resumed.duplicated(["case_id", "target_label"]).any()


def _alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def all_gone(pids: list[int], timeout_s: float) -> bool:
    """Whether every process in ``pids`` has exited within ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(_alive(pid) for pid in pids)


def kill_part_way(tmp_path: Path, dataset: Path, run_dir: Path, options: dict, extra: str = "",
                  timeout_s: float = 180) -> subprocess.Popen:
    """``run_benchmark`` of 10 cases of ``dataset`` with the slow box backend (``options``), 2 workers and
    ``extra`` keyword arguments, in a subprocess killed with SIGKILL once 3 cases (6 rows) are stored."""
    (tmp_path / "slow_backend.py").write_text(SLOW_BACKEND)
    script = (
        "import sys; sys.path.insert(0, %r)\n"
        "from napari_medsam_eval.benchmark import run_benchmark\n"
        "run_benchmark(%r, %r, 'slow_backend:build', model_options=%r, limit=10, workers=2%s)\n"
    ) % (str(tmp_path), str(dataset), str(run_dir), options, extra)
    process = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)
    try:
        signal_when_stored(process, run_dir, 6, signal.SIGKILL, timeout_s)  # 3 cases x 2 targets
    finally:
        process.wait(timeout=30)
    return process


def signal_when_stored(process: subprocess.Popen, run_dir: Path, rows: int, number: int, timeout_s: float) -> None:
    """Send ``process`` (a run into ``run_dir``) the signal ``number`` once ``rows`` rows are stored; it must
    still be running then."""
    rows_file = run_dir / "results.jsonl"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if rows_file.exists() and rows_file.read_bytes().count(b"\n") >= rows:
            break
        time.sleep(0.02)
    assert process.poll() is None, f"the run ended before the signal: {process.stderr.read()!r}"
    os.kill(process.pid, number)


@pytest.mark.slow
def test_sigkill_then_resume_gives_the_uninterrupted_table(tmp_path: Path, shared_data: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Kill a 2-worker run with SIGKILL part-way: its workers exit, and --resume completes the table."""
    pids = tmp_path / "pids"
    pids.mkdir()
    dataset, run_dir, model = shared_data / "hippocampus_mri", tmp_path / "killed", "slow_backend:build"
    options = {"delay": 0.03, "pid_dir": str(pids)}
    process = kill_part_way(tmp_path, dataset, run_dir, options)
    assert process.returncode == -signal.SIGKILL
    done_before = ResultStore(run_dir).done_case_ids()
    assert 3 <= len(done_before) < 10
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "running"
    workers = [int(p.name) for p in pids.iterdir() if int(p.name) != process.pid]
    assert len(workers) == 2
    assert all_gone(workers, 15), "workers of a killed run must exit"

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SLOW_BOX_DELAY", "0")
    seen: list[str] = []
    resumed = run_benchmark(dataset, run_dir, model, model_options=options, limit=10, resume=True,
                            progress=lambda done, total, rows: seen.extend(row["case_id"] for row in rows))
    assert not set(seen) & done_before, "finished cases must not be redone"
    assert len(seen) == 2 * (10 - len(done_before))
    reference = run_benchmark(dataset, tmp_path / "reference", model, model_options={"delay": 0.0}, limit=10)
    pd.testing.assert_frame_equal(comparable(resumed), comparable(reference))
    assert len(resumed) == 20 and not resumed.duplicated(["case_id", "target_label"]).any()
    pd.testing.assert_frame_equal(load_table(run_dir), resumed)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and len(manifest["sessions"]) == 2


@pytest.mark.slow
def test_sigterm_is_handled_as_ctrl_c_and_resume_completes(tmp_path: Path, shared_data: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``medsam-eval run`` (the console script's entry) stopped with SIGTERM part-way, as a job scheduler
    stops it: one line saying so, exit 143, the manifest ``interrupted`` with the cases stored before kept,
    and ``--resume`` completes the uninterrupted table (before, the manifest said ``running``, silently)."""
    (tmp_path / "slow_backend.py").write_text(SLOW_BACKEND)
    dataset, run_dir = shared_data / "hippocampus_mri", tmp_path / "stopped"
    args = ["run", str(dataset), "--model", "box", "--model-options", '{"delay": 0.05}', "--limit", "10",
            "--out", str(run_dir), "--quiet", "--no-report"]
    script = ("import sys; sys.path.insert(0, %r)\n"
              "from napari_medsam_eval import models\n"
              "models.BACKENDS['box'] = 'slow_backend:build'  # the box baseline, slowed down\n"
              "from napari_medsam_eval.cli import console_main\n"
              "sys.argv = ['medsam-eval', *%r]\n"
              "console_main()\n") % (str(tmp_path), args)
    process = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    try:
        signal_when_stored(process, run_dir, 4, signal.SIGTERM, 120)  # 2 cases x 2 targets
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143 and err.strip().splitlines()[-1] == "interrupted (SIGTERM)", err
    manifest = json.loads((run_dir / "manifest.json").read_text())
    done_before = ResultStore(run_dir).done_case_ids()
    assert manifest["status"] == "interrupted" and 2 <= len(done_before) < 10
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SLOW_BOX_DELAY", "0")  # (the same rows, without the wait)
    monkeypatch.setitem(models.BACKENDS, "box", "slow_backend:build")
    options = {"delay": 0.05}
    resumed = run_benchmark(dataset, run_dir, "box", model_options=options, limit=10, resume=True)
    reference = run_benchmark(dataset, tmp_path / "reference", "box", model_options=options, limit=10)
    pd.testing.assert_frame_equal(comparable(resumed), comparable(reference))
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
