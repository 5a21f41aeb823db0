"""Shared fixtures: where the real public test data lives.

The data sit in ``../shared/data`` beside the repository (read in place, never
copied). ``MEDSAM_EVAL_SHARED_DATA`` points elsewhere when needed.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("MEDSAM_EVAL_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
SHARED_REFERENCE = SHARED_DATA.parent / "reference"

# pytest-qt's QApplication on the binding qtpy (and so napari) takes: QT_API, PyQt5 when unset. With the
# [pyqt6] extra both bindings are installed, and pytest-qt on its own would take PyQt6 first: two Qt's in one
# process. Set here, before pytest-qt's pytest_configure reads it.
if os.environ.get("QT_API", "pyqt5").lower() in ("pyqt5", "pyqt6", "pyside6"):
    os.environ.setdefault("PYTEST_QT_API", os.environ.get("QT_API", "pyqt5").lower())

#: the run's caches in one temporary folder, and the check that nothing was written outside it (suite_isolation.py)
pytest_plugins = ["suite_isolation"]


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
    """The run's one embedding store (suite_isolation.py points ``MEDSAM_EVAL_EMBEDDINGS`` at it): each slice
    the tests share is encoded once (stored float32: the masks, and so the figures, are the encoder's own).
    Tests that count encoder passes or test the store itself use their own stores."""
    from napari_medsam_eval.embeddings import ENV_DIR

    if os.environ.get(ENV_DIR):
        return os.environ[ENV_DIR]
    workers_share = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else None
    if workers_share is not None:  # one store for every pytest-xdist worker of the run (it is multi-process safe)
        return str(workers_share / "shared-embeddings" / "store")
    return str(tmp_path_factory.mktemp("shared-embeddings") / "store")


@pytest.fixture(scope="module")
def no_shared_store():
    """The run's embedding store off for a module whose tests count encoder passes (or exports, which a
    backend with a store makes at its first pass, not at its build): every slice is encoded where they say."""
    from napari_medsam_eval.embeddings import ENV_DIR

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_DIR, "off")
        yield


@pytest.fixture(scope="session")
def run_openvino_export() -> Path:
    """The folder of the run's OpenVINO export of LiteMedSAM's encoder, in the run's export cache (made once
    per run, where every other backend of the run finds it). A module that tests what becomes of an export
    in a private cache (damaged, reloaded) starts from a copy of it, not from an export of its own (10-15 s)."""
    from napari_medsam_eval.models.litemedsam import build

    backend = build(device="cpu", cache_size=0, engine="openvino", embeddings=False)
    return Path(backend.describe()["export"]).parent


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory) -> Path:
    """A private encoder-export cache for one test module (the user's cache is left alone)."""
    root = tmp_path_factory.mktemp("export-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NAPARI_MEDSAM_EVAL_CACHE", str(root))
        yield root


@pytest.fixture(autouse=True)
def _no_prompt_log(monkeypatch):
    """The Segment widget logs no drawn prompt unless a test turns it on (names a file)."""
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


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """Torch's thread count is process-wide: a test that builds a backend with ``num_threads=1`` would
    otherwise leave every later test of the run on one core (it once doubled the figure tests' time)."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(before if before is not None else _default_threads())


def _default_threads() -> int:
    """Torch's own default here: ``OMP_NUM_THREADS`` where set (each pytest-xdist worker's 1), else the CPUs."""
    from napari_medsam_eval.models.device import available_cpus

    return int(os.environ.get("OMP_NUM_THREADS") or available_cpus())


#: test files that take minutes: under pytest-xdist they are handed out first, so no worker ends on one alone
#: (the longest first, as a 2-worker run of make test measured them on 2026-12-03)
LONGEST_FILES = ("test_medsam2_reference.py", "test_propagation_targets.py", "test_benchmark_ray.py",
                 "test_corrections.py", "test_widgets_benchmark.py", "test_litemedsam_engines.py",
                 "test_widgets_two_runs.py", "test_widgets_encode_ahead.py", "test_litemedsam_decoder.py",
                 "test_precision.py", "test_embedding_store.py", "test_propagation.py", "test_widgets_segment.py",
                 "test_nothing_lost.py", "test_widgets_switching.py", "test_clinician_session.py")


def pytest_configure(config):
    """Each pytest-xdist worker computes on one thread (``OMP_NUM_THREADS=1``, read by torch at its import and
    inherited by the processes a test starts): two workers on two cores, never four threads fighting for them.
    ``MEDSAM_EVAL_WORKER_THREADS`` sets another count (2 with ``OMP_WAIT_POLICY=PASSIVE``: docs/architecture.md)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        threads = os.environ.get("MEDSAM_EVAL_WORKER_THREADS", "1")
        for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[variable] = threads


def pytest_collection_modifyitems(config, items):
    """A reproduce test is a slow one too (``make test-quick`` selects by slow). Under pytest-xdist, the longest
    files first (a stable sort: each file's tests keep their order)."""
    for item in items:
        if item.get_closest_marker("reproduce") is not None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(LONGEST_FILES)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


class FigureCheck:
    """``figure(key, measured)``: one figure of a reproduce test against the value the docs state
    (``figures.STATED``), kept for the run's summary; ``figure.assert_all_match()`` fails the test on a miss."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.seen: list[tuple] = []

    def __call__(self, key: str, measured: float | list[float]) -> bool:
        from figures import STATED

        entry = STATED[key]
        matched = entry.matches(measured)
        self.seen.append((entry, measured, matched))
        self.config._figures_checked.append((entry, measured, matched))
        return matched

    def assert_all_match(self) -> None:
        missed = [f"{entry.what}: {entry.written(measured)}, docs/{entry.page} states {entry.text}"
                  for entry, measured, matched in self.seen if not matched]
        assert not missed, "; ".join(missed)


@pytest.fixture
def figure(request) -> FigureCheck:
    return FigureCheck(request.config)


def pytest_sessionstart(session):
    session.config._figures_checked = []


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """make reproduce's table: every figure checked, beside the value the docs state."""
    checked = getattr(config, "_figures_checked", [])
    if not checked:
        return
    terminalreporter.section("figures against the docs", sep="=", bold=True)
    for entry, measured, matched in checked:
        verdict = "ok" if matched else "MISSED"
        terminalreporter.write_line(f"{verdict:7} {entry.what}: measured {entry.written(measured)}, "
                                    f"docs/{entry.page} states {entry.text}", red=not matched, green=matched)
