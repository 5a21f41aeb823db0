"""OpenVINO and NNCF run without Intel's telemetry (models/openvino_quiet.py): nothing under ~/intel.

The user's path (an encoder exported, a slice segmented) is checked by the whole suite: its end check
(suite_isolation.py) fails a run that wrote under the home folder."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

CONVERT = ("import torch\n"
           "model = torch.nn.Linear(4, 2)\n"
           "example = torch.zeros(1, 4)\n")


def _run_with_home(script: str, home) -> None:
    env = {**os.environ, "HOME": str(home)}
    for variable in ("CI", "TF_BUILD", "JENKINS_URL"):  # the telemetry turns itself off where it sees a CI
        env.pop(variable, None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_our_imports_conversion_and_nncf_write_nothing_in_the_home_folder(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    _run_with_home(CONVERT + "from napari_medsam_eval.models.openvino_quiet import convert_model, import_nncf\n"
                             "import_nncf()\n"
                             "convert_model(model, example_input=example)\n", home)
    assert list(home.iterdir()) == []


@pytest.mark.slow
def test_a_plain_openvino_import_writes_its_telemetry_there(tmp_path):
    """What the module guards against, seen with a plain import: a client id and usage counts in ~/intel."""
    home = tmp_path / "home"
    home.mkdir()
    _run_with_home("import openvino\n", home)
    assert (home / "intel").is_dir() and any((home / "intel").iterdir())
