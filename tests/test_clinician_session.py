"""A whole clinician session through napari's plugin path exits cleanly (scripts/clinician_session.py).

The script docks every widget from the Plugins menu and segments, propagates, corrects,
undoes, compares, runs prompt sensitivity, benchmarks, cancels, resumes, opens rows and a
two-runs pair, then closes the window while a run and a segmentation are going. Here it
runs in its own process (as napari does), with ``faulthandler`` on: exit status 0 means
every step did what it should, nothing crashed on the way or at the close, and the run
folder the window was closed on holds no temporary file and resumes to a complete table.
``make test`` runs the script's ``--short`` session (less of each step), ``make reproduce`` the whole one.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from figures import scales

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.gui, pytest.mark.slow]


@scales("length", ["--short"], [], small_id="short", full_id="whole")
def test_a_clinician_session_through_the_plugin_menu_exits_cleanly(shared_data, tmp_path, length):
    done = subprocess.run([sys.executable, "-X", "faulthandler", str(REPO / "scripts" / "clinician_session.py"),
                           "--shared-data", str(shared_data), "--out", str(tmp_path), *length],
                          capture_output=True, text=True, timeout=3600)
    tail = (done.stdout[-2000:], done.stderr[-4000:])
    assert done.returncode == 0, tail
    assert "session done" in done.stdout, tail
    assert "Fatal Python error" not in done.stderr and "Traceback" not in done.stderr, tail
    assert not list((tmp_path / "closed_run").glob(".*.tmp"))
