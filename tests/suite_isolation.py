"""The suite keeps out of the user's files, and shares its caches for one run (a pytest plugin).

At the start of a run (the controller, not a pytest-xdist worker, which inherits
the environment) every cache a test could fill is pointed into one temporary
folder of the run: the encoder exports and the embedding store of our own
(``NAPARI_MEDSAM_EVAL_CACHE``, ``MEDSAM_EVAL_EMBEDDINGS``), and the XDG folders
and matplotlib's, where napari, pip, fontconfig and matplotlib would write
under the home folder, and Ray's authentication token, which Ray would write
there too. The store is how a slice or frame is encoded once per run for a
given model, precision and input: every backend a test builds
without an ``embeddings`` option of its own (in this process or in a command
it starts) reads and writes it. Tests that count encoder passes or test the
store itself pass their own store, or ``embeddings=False``.

The home folder itself is the run's too: ``HOME`` points at an empty folder of the run, so whatever a
test (or a command it starts) writes under ``~`` lands there, and the user's own home is never touched.

At the end the run fails (exit status 1) when anything was written in that home folder during the run,
or when the checkout has files that git did not show at the start: tracked
files changed, new untracked files, new ignored files other than Python's
caches. The list is printed. Only the suite's own writes are seen: another program of the same user
writing into the real ``~/.cache`` meanwhile (napari, Mesa's shader cache) is none of the run's.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: what Python and pytest themselves leave in a checkout (bytecode, pytest's cache, an editable install's
#: metadata): not a test's writing
OWN_LEFTOVERS = ("__pycache__/", ".pytest_cache/", ".egg-info/")
#: the variables each cache folder is read from, and the sub-folder of the run's folder it gets
CACHE_VARIABLES = {
    "NAPARI_MEDSAM_EVAL_CACHE": "medsam-eval-cache",
    "MEDSAM_EVAL_EMBEDDINGS": "embeddings",
    "XDG_CACHE_HOME": "xdg-cache",
    "XDG_CONFIG_HOME": "xdg-config",
    "XDG_DATA_HOME": "xdg-data",
    "XDG_STATE_HOME": "xdg-state",
    "MPLCONFIGDIR": "matplotlib",
}
#: Ray (2.60 and later) turns token authentication on for a local cluster and, with no token at hand,
#: writes one to ``~/.ray/auth_token``: the run's local Rays read a token kept in the run's folder instead
RAY_TOKEN_VARIABLES = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
#: tools that keep their installation under the home folder and find it through it: with ``HOME`` the run's, they
#: are pointed at the user's (rustup's proxy for ``rustc``, which pip asks for its version, would make a new one)
TOOL_HOMES = {"RUSTUP_HOME": ".rustup", "CARGO_HOME": ".cargo"}
#: set to keep the user's own cache variables (a run that should use warm caches): the end check still runs
KEEP_CACHES = "MEDSAM_EVAL_TESTS_KEEP_CACHES"


def _is_worker() -> bool:
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


def checkout_state(repo: Path = REPO) -> set[str]:
    """The checkout's changed, untracked and ignored paths as git lists them, Python's own caches left out."""
    command = ["git", "-C", str(repo), "status", "--porcelain=v1", "--untracked-files=normal", "--ignored=matching"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return set()
    return {line for line in done.stdout.splitlines() if line and not any(part in line for part in OWN_LEFTOVERS)}


def written_since(root: Path, since_ns: int, skip: tuple[Path, ...]) -> list[Path]:
    """Files under ``root`` modified at or after ``since_ns`` (symbolic links not followed), ``skip`` left out."""
    skipped = {str(path) for path in skip}
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.join(folder, d) not in skipped]
        for name in files:
            path = os.path.join(folder, name)
            try:
                if os.lstat(path).st_mtime_ns >= since_ns:
                    found.append(Path(path))
            except OSError:
                continue
    return sorted(found)


def outside_writes(home: Path, since_ns: int, checkout_before: set[str], repo: Path = REPO) -> list[str]:
    """What the run wrote where it should not: files under ``home`` (named as ``~/...``) and new lines of the
    checkout's status."""
    home = home.resolve()
    skip = tuple(p for p in (repo.resolve(), Path(sys.prefix).resolve(), Path(tempfile.gettempdir()).resolve())
                 if p != home and home not in p.parents)
    lines = ([f"home: ~/{path.relative_to(home).as_posix()}" for path in written_since(home, since_ns, skip)]
             if home.is_dir() else [])
    lines += [f"checkout: {line}" for line in sorted(checkout_state(repo) - checkout_before)]
    return lines


def pytest_configure(config: pytest.Config) -> None:
    if _is_worker() or hasattr(config, "_suite_isolation"):
        return
    run_folder = Path(tempfile.mkdtemp(prefix="medsam-eval-tests-"))
    home = run_folder / "home"  # the run's own home folder: the suite's writes under ~ land here, and only them
    home.mkdir()
    config._suite_isolation = {"folder": run_folder, "start_ns": time.time_ns() - 1_000_000_000,
                               "checkout": checkout_state(), "home": home, "saved": {"HOME": os.environ.get("HOME")}}
    real_home = Path.home()
    for variable, sub in TOOL_HOMES.items():
        if not os.environ.get(variable) and (real_home / sub).is_dir():
            config._suite_isolation["saved"][variable] = None
            os.environ[variable] = str(real_home / sub)
    os.environ["HOME"] = str(home)
    if not os.environ.get(KEEP_CACHES):
        for variable, sub in CACHE_VARIABLES.items():
            config._suite_isolation["saved"][variable] = os.environ.get(variable)
            os.environ[variable] = str(run_folder / sub)
    if not any(os.environ.get(variable) for variable in RAY_TOKEN_VARIABLES):
        config._suite_isolation["saved"]["RAY_AUTH_TOKEN_PATH"] = None
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(_ray_token(run_folder))


def _ray_token(run_folder: Path) -> Path:
    """A random token for the run's local Ray clusters, in a file only the user can read."""
    import secrets

    path = run_folder / "ray-auth-token"
    path.write_text(secrets.token_hex(32))
    path.chmod(0o600)
    return path


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = getattr(session.config, "_suite_isolation", None)
    if state is None:
        return
    found = outside_writes(state["home"], state["start_ns"], state["checkout"])
    state["found"] = found
    if found and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    state = getattr(config, "_suite_isolation", None)
    if state and state.get("found"):
        terminalreporter.section("written outside the run's temporary folders", sep="=", red=True, bold=True)
        for line in state["found"][:50]:
            terminalreporter.write_line(line)
        if len(state["found"]) > 50:
            terminalreporter.write_line(f"... and {len(state['found']) - 50} more")


def pytest_unconfigure(config: pytest.Config) -> None:
    state = getattr(config, "_suite_isolation", None)
    if state is None:
        return
    for variable, value in state["saved"].items():
        if value is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = value
    shutil.rmtree(state["folder"], ignore_errors=True)
