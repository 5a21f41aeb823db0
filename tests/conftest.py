"""Shared fixtures: where the real public test data lives.

The data sit in ``../shared/data`` beside the repository (read in place, never
copied). ``MEDSAM_EVAL_SHARED_DATA`` points elsewhere when needed.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MEDSAM_EVAL_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
SHARED_REFERENCE = SHARED_DATA.parent / "reference"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Root of the real datasets; fails (not skips) when missing, since CI has them."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared test data not found at {SHARED_DATA} (set MEDSAM_EVAL_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def shared_reference() -> Path:
    if not SHARED_REFERENCE.is_dir():
        pytest.fail(f"shared reference folder not found at {SHARED_REFERENCE}")
    return SHARED_REFERENCE


@pytest.fixture(scope="session")
def shared_embeddings(tmp_path_factory) -> str:
    """One embedding store for the dataset-scale figure tests of a whole run: each slice they share is
    encoded once (stored float32: the masks, and so the figures, are the encoder's own). Tests that count
    encoder passes or test the store itself use their own stores."""
    workers_share = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else None
    if workers_share is not None:  # one store for every pytest-xdist worker of the run (it is multi-process safe)
        return str(workers_share / "shared-embeddings" / "store")
    return str(tmp_path_factory.mktemp("shared-embeddings") / "store")


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory) -> Path:
    """A private encoder-export cache for one test module (the user's cache is left alone)."""
    root = tmp_path_factory.mktemp("export-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NAPARI_MEDSAM_EVAL_CACHE", str(root))
        yield root


@pytest.fixture(autouse=True)
def _no_prompt_log(monkeypatch):
    """The Segment widget logs no drawn prompt (into ~/medsam-eval) unless a test turns it on."""
    monkeypatch.setenv("MEDSAM_EVAL_PROMPT_LOG", "off")


@pytest.fixture(scope="module")
def one_ray_at_a_time(tmp_path_factory):
    """Held by a test module that starts a local Ray: run under pytest-xdist (``-n 2 --dist loadfile``), the
    other worker's Ray module waits, so two local Rays never share the machine."""
    import fcntl

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above each worker's
    with open(shared / "ray.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
