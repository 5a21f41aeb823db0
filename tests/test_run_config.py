"""One run config: the CLI builds a :class:`RunConfig`, ``run_benchmark`` takes it, the manifest records it and
``--resume`` compares the recorded one with the new one, naming each difference."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from napari_medsam_eval.benchmark import runner
from napari_medsam_eval.benchmark.config import RESUME_KEYS, RunConfig
from napari_medsam_eval.benchmark.manifest import read_manifest
from napari_medsam_eval.benchmark.schema import to_dataframe
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.errors import DataError


def test_a_config_survives_pickle_and_the_manifest(tmp_path):
    config = RunConfig(tmp_path / "data", tmp_path / "run", "box", "medsam2", model_options={"device": "cpu"},
                       protocol_options={"seed": 3}, layout="msd", limit=4, workers=2, seed=3,
                       propagation={"margin": 5}, save_predictions=True)
    assert pickle.loads(pickle.dumps(config)) == config
    recorded = json.loads(json.dumps(config.to_manifest()))
    again = RunConfig.from_manifest(recorded, config.out_dir)
    assert again == config.replace(dataset=Path(recorded["dataset_path"]))
    assert "out_dir" not in recorded and "resume" not in recorded and "executor" not in recorded
    assert RunConfig(tmp_path, tmp_path, executor="ray").to_manifest()["executor"] == "ray"


def test_differences_name_every_resume_key(tmp_path):
    before = RunConfig(tmp_path / "data", tmp_path / "run", "box", "medsam2")
    assert before.differences(before) == []
    after = before.replace(model="litemedsam", seed=2, propagation="legacy", intensity="prepared",
                           protocol_options={"seed": 2})
    named = [line.split(":")[0] for line in after.differences(before)]
    assert named == ["model", "protocol_options", "seed", "intensity", "propagation"]
    assert set(named) <= set(RESUME_KEYS)
    assert "seed: 0 -> 2" in after.differences(before)


@pytest.mark.parametrize("changes, message", [
    ({"workers": 0}, "workers must be >= 1"), ({"limit": 0}, "limit must be >= 1"),
    ({"intensity": "bright"}, "intensity must be one of"), ({"propagation": "fastest"}, "fastest"),
    ({"protocol_options": {"seed": 1}}, "contradicts seed=0"),
])
def test_a_config_that_cannot_run_is_refused_naming_the_option(tmp_path, changes, message):
    with pytest.raises((ValueError, TypeError), match=message):
        RunConfig(tmp_path, tmp_path / "run", "box", **changes).checked()


def test_the_cli_builds_the_config_run_benchmark_takes(shared_data, tmp_path, monkeypatch):
    taken = []
    monkeypatch.setattr(runner, "run_benchmark", lambda config, **kw: taken.append((config, kw)) or to_dataframe([]))
    dataset, out = shared_data / "hippocampus_mri", tmp_path / "run"
    assert main(["run", str(dataset), "--model", "box", "--out", str(out), "--limit", "2", "--seed", "4",
                 "--propagation", '{"margin": 3}', "--save-predictions", "--no-report", "--quiet"]) == 0
    (config, keywords), = taken
    assert config == RunConfig(dataset, out, "box", "medsam2", limit=2, seed=4, propagation={"margin": 3},
                               save_predictions=True)
    assert keywords == {"progress_bar": False}


def test_the_manifest_holds_the_config_and_resume_names_what_changed(shared_data, tmp_path):
    dataset, out = shared_data / "hippocampus_mri", tmp_path / "run"
    config = RunConfig(dataset, out, "box", "medsam2", limit=1, seed=5)
    runner.run_benchmark(config)
    recorded = read_manifest(out)["config"]
    assert RunConfig.from_manifest(recorded, out).to_manifest() == recorded  # the resolved config, recorded whole
    assert recorded["protocol_options"]["seed"] == 5 and recorded["layout"] == "msd"
    with pytest.raises(DataError, match=r"seed: 5 -> 6.*protocol_options|protocol_options.*seed: 5 -> 6"):
        runner.run_benchmark(config.replace(seed=6, resume=True, limit=2))
    table = runner.run_benchmark(config.replace(resume=True, limit=2))
    assert table["case_id"].nunique() == 2

