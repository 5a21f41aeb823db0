"""The Ray executor (``--executor ray``) on a local Ray: the local table, resume after a kill, dead workers."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from napari_medsam_eval.benchmark import ResultStore, comparable, load_table, run_benchmark
from napari_medsam_eval.benchmark.ray_executor import CRASH_HOOK_ENV, RayExecutor, RayUnavailable
from napari_medsam_eval.benchmark.config import RunConfig
from napari_medsam_eval.cli import main
from napari_medsam_eval.datasets import CaseRef
from napari_medsam_eval.core.errors import DataError

from test_benchmark_store import all_gone, kill_part_way

ray = pytest.importorskip("ray")  # in the test extra: CI has it
pytestmark = pytest.mark.usefixtures("one_ray_at_a_time")


@pytest.fixture(scope="module")
def local_ray() -> str:
    """A local Ray of 2 CPUs for this module (loopback, no dashboard); its GCS address."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def _ray_run(dataset: Path, out: Path, model: str, *extra: str) -> pd.DataFrame:
    assert main(["run", str(dataset), "--model", model, "--executor", "ray", "--out", str(out), "--quiet",
                 "--no-report", *extra]) == 0
    return load_table(out)


@pytest.mark.slow
def test_box_on_ray_gives_the_local_table(local_ray: str, shared_data: Path, tmp_path: Path) -> None:
    dataset = shared_data / "hippocampus_mri"
    local = run_benchmark(dataset, tmp_path / "local", "box", "box-jitter", seed=3, limit=6)
    on_ray = _ray_run(dataset, tmp_path / "ray", "box", "--protocol", "box-jitter", "--seed", "3", "--limit", "6",
                      "--workers", "2")
    pd.testing.assert_frame_equal(comparable(on_ray), comparable(local))
    assert (on_ray["status"] == "ok").all() and len(on_ray) == 12
    config = json.loads((tmp_path / "ray" / "manifest.json").read_text())["config"]
    assert config["executor"] == "ray" and config["workers"] == 2 and config["gpus_per_worker"] == 0.0


@pytest.mark.slow
def test_litemedsam_on_ray_gives_the_local_table(local_ray: str, shared_data: Path, tmp_path: Path,
                                                shared_embeddings: str) -> None:
    """The actors read the slices the local run encoded from the shared store (another process's files)."""
    dataset = shared_data / "hippocampus_mri"
    local = run_benchmark(dataset, tmp_path / "local", "litemedsam", limit=2,
                          model_options={"device": "cpu", "embeddings": shared_embeddings})
    on_ray = _ray_run(dataset, tmp_path / "ray", "litemedsam", "--limit", "2", "--workers", "2", "--device", "cpu",
                      "--embeddings", shared_embeddings)
    assert (on_ray["status"] == "ok").all() and len(on_ray) == 4  # 2 cases, one to each actor
    pd.testing.assert_frame_equal(comparable(on_ray), comparable(local))
    assert on_ray["dice"].tolist() == local["dice"].tolist()


@pytest.mark.slow
def test_resume_after_killing_the_driver(local_ray: str, shared_data: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A driver joined to the cluster (--ray-address) killed with SIGKILL part-way: its actors exit,
    and --resume on Ray completes the table of an uninterrupted local run, no row twice."""
    pids = tmp_path / "pids"
    pids.mkdir()
    dataset, run_dir, model = shared_data / "hippocampus_mri", tmp_path / "killed", "slow_backend:build"
    options = {"delay": 0.05, "pid_dir": str(pids)}
    process = kill_part_way(tmp_path, dataset, run_dir, options,
                            extra=f", executor='ray', ray_address={local_ray!r}", timeout_s=240)
    done_before = ResultStore(run_dir).done_case_ids()
    assert 3 <= len(done_before) < 10
    actors = [int(p.name) for p in pids.iterdir() if int(p.name) != process.pid]
    assert len(actors) == 2, actors  # two actors built the model, the driver one
    assert all_gone(actors, 30), "the actors of a killed driver must exit"

    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[str] = []
    resumed = run_benchmark(dataset, run_dir, model, model_options=options, limit=10, resume=True, workers=2,
                            executor="ray", progress=lambda d, t, rows: seen.extend(r["case_id"] for r in rows))
    assert not set(seen) & done_before and len(seen) == 2 * (10 - len(done_before))
    reference = run_benchmark(dataset, tmp_path / "reference", model, model_options={"delay": 0.0}, limit=10)
    pd.testing.assert_frame_equal(comparable(resumed), comparable(reference))
    assert len(resumed) == 20 and not resumed.duplicated(["case_id", "target_label"]).any()
    pd.testing.assert_frame_equal(load_table(run_dir), resumed)
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"


@pytest.mark.parametrize("times", [1, 2])
@pytest.mark.slow
def test_a_worker_dying_mid_case(times: int, local_ray: str, shared_data: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The actor segmenting hippocampus_004 ends its process: once -> retried on a new actor, the row ok;
    twice -> failed rows with the reason, the other cases ok."""
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv(CRASH_HOOK_ENV, json.dumps({"case_id": "hippocampus_004", "marker_dir": str(markers),
                                                   "times": times}))
    dataset = shared_data / "hippocampus_mri"
    on_ray = _ray_run(dataset, tmp_path / "ray", "box", "--limit", "4", "--workers", "2")
    assert len(list(markers.iterdir())) == times
    local = run_benchmark(dataset, tmp_path / "local", "box", limit=4)
    crashed = on_ray["case_id"] == "hippocampus_004"
    if times == 1:
        pd.testing.assert_frame_equal(comparable(on_ray), comparable(local))
        assert (on_ray["status"] == "ok").all()
    else:
        assert (on_ray.loc[crashed, "status"] == "failed").all() and crashed.sum() == 2
        assert all(e.startswith("a Ray worker died while segmenting this case") for e in on_ray.loc[crashed, "error"])
        assert (on_ray.loc[~crashed, "status"] == "ok").all()
        keep = ~local["case_id"].eq("hippocampus_004")
        assert on_ray.loc[~crashed, "dice"].tolist() == local.loc[keep, "dice"].tolist()
        assert "hippocampus_004 anterior failed: a Ray worker died" in (tmp_path / "ray" / "run.log").read_text()


def test_a_file_the_workers_cannot_see_is_named(local_ray: str, tmp_path: Path) -> None:
    missing = tmp_path / "elsewhere" / "case_1.nii.gz"
    ref = CaseRef(case_id="case_1", layout="msd", dataset="d", root=str(tmp_path), kind="volume",
                  paths={"image": str(missing), "label": str(missing)})
    config = RunConfig(tmp_path, tmp_path / "run", "box", "medsam2", layout="msd")
    with pytest.raises(DataError, match="cannot see this file of case case_1") as error:
        list(RayExecutor(config, [ref]))
    assert error.value.path == missing and "shared by the driver and every worker" in str(error.value)


def test_without_ray_the_error_names_the_extra(shared_data: Path, tmp_path: Path, capsys,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(RayUnavailable, match=r"pip install 'napari-medsam-eval\[ray\]'"):
        run_benchmark(shared_data / "hippocampus_mri", tmp_path / "run", "box", executor="ray")
    assert main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--executor", "ray",
                 "--out", str(tmp_path / "cli"), "--quiet"]) != 0
    assert "napari-medsam-eval[ray]" in capsys.readouterr().err
    assert not (tmp_path / "run").exists() and not (tmp_path / "cli").exists()
    with pytest.raises(ValueError, match="need the Ray executor"):
        run_benchmark(shared_data / "hippocampus_mri", tmp_path / "run", "box", ray_address="auto")
