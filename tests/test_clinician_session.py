"""A whole clinician session through napari's plugin path exits cleanly (scripts/clinician_session.py).

The script docks every widget from the Plugins menu and segments, propagates, corrects,
undoes, compares, runs prompt sensitivity, benchmarks, cancels, resumes, opens rows and a
two-runs pair, then closes the window while a run and a segmentation are going. Here it
runs in its own process (as napari does), with ``faulthandler`` on: exit status 0 means
every step did what it should, nothing crashed on the way or at the close, and the run
folder the window was closed on holds no temporary file and resumes to a complete table.
``make test`` runs the script's ``--short`` session (less of each step) under PyQt6 (the ``[pyqt6]``
extra, ``QT_API=pyqt6``: napari deprecated PyQt5 for removal), ``make reproduce`` the whole one under
PyQt5 (the default, which every in-process GUI test of ``make test`` runs on). The script prints the
binding qtpy took, and the test checks it: neither can pass on the other binding. The session reads
the slices other tests encoded from the run's embedding store.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from figures import scales

REPO = Path(__file__).resolve().parents[1]
#: QT_API's value (qtpy's and napari's choice of binding) -> the name qtpy.API_NAME gives it
BINDINGS = {"pyqt5": "PyQt5", "pyqt6": "PyQt6"}

pytestmark = [pytest.mark.gui, pytest.mark.slow]


def run_session(shared_data: Path, out: Path, length: list[str], qt_api: str, embeddings: str) -> None:
    binding = BINDINGS[qt_api]
    if importlib.util.find_spec(binding) is None:
        pytest.fail(f"{binding} is not installed (pip install -e '.[test,pyqt6]'; make install does)")
    env = {**os.environ, "QT_API": qt_api, "MEDSAM_EVAL_EMBEDDINGS": embeddings}
    done = subprocess.run([sys.executable, "-X", "faulthandler", str(REPO / "scripts" / "clinician_session.py"),
                           "--shared-data", str(shared_data), "--out", str(out), *length],
                          capture_output=True, text=True, timeout=3600, env=env)
    tail = (done.stdout[-2000:], done.stderr[-4000:])
    assert f"Qt binding: {binding} " in done.stdout, tail  # the session ran on the binding asked for
    assert done.returncode == 0, tail
    assert "session done" in done.stdout, tail
    assert "Fatal Python error" not in done.stderr and "Traceback" not in done.stderr, tail
    assert not list((out / "closed_run").glob(".*.tmp"))


#: the session by make test and make reproduce: the short one on Qt 6 (the binding napari moves to; every
#: in-process GUI test of make test runs on PyQt5, the default), the whole one on PyQt5
SESSIONS = scales("session", (["--short"], "pyqt6"), ([], "pyqt5"), small_id="short-pyqt6", full_id="whole-pyqt5")


@SESSIONS
def test_a_clinician_session_through_the_plugin_menu_exits_cleanly(shared_data, shared_embeddings, tmp_path, session):
    length, qt_api = session
    run_session(shared_data, tmp_path, length, qt_api, shared_embeddings)
