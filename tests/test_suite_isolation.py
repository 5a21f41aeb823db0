"""The suite's own guard (suite_isolation.py): a run that writes outside its temporary folders fails, naming what."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from pathlib import Path

from suite_isolation import CACHE_VARIABLES, RAY_TOKEN_VARIABLES, checkout_state, outside_writes

TESTS = Path(__file__).resolve().parent


@pytest.mark.slow
def test_a_run_that_writes_in_the_home_folder_fails_and_names_the_file(tmp_path):
    home, suite = tmp_path / "home", tmp_path / "suite"
    home.mkdir()
    suite.mkdir()
    (home / "old.txt").write_text("there before the run")
    (suite / "test_writes.py").write_text(
        "import os\nfrom pathlib import Path\n\n"
        "def test_caches_point_into_the_run():\n"
        f"    for variable in {sorted(CACHE_VARIABLES)!r}:\n"
        "        assert not os.environ[variable].startswith(str(Path.home()))\n"
        "    token = Path(os.environ['RAY_AUTH_TOKEN_PATH'])  # a local Ray's token, not ~/.ray/auth_token\n"
        "    assert not str(token).startswith(str(Path.home())) and len(token.read_text()) == 64\n\n"
        "def test_writes_home():\n"
        "    (Path.home() / '.cache' / 'leak').mkdir(parents=True)\n"
        "    (Path.home() / '.cache' / 'leak' / 'file.bin').write_bytes(b'x')\n\n"
        "def test_another_program_writes_the_real_home():\n"
        f"    (Path({str(home)!r}) / '.cache').mkdir()\n"
        f"    (Path({str(home)!r}) / '.cache' / 'mesa.bin').write_bytes(b'x')\n")
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(TESTS)}
    for variable in ("PYTEST_XDIST_WORKER", *RAY_TOKEN_VARIABLES):  # as from a fresh shell
        env.pop(variable, None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "suite_isolation", "-p", "no:cacheprovider",
                           "--rootdir", str(suite), str(suite)], capture_output=True, text=True, env=env, cwd=suite)
    assert "3 passed" in done.stdout, done.stdout[-2000:]
    assert done.returncode == 1, done.stdout[-2000:]
    assert "written outside the run's temporary folders" in done.stdout
    assert "home: ~/.cache/leak/file.bin" in done.stdout and "old.txt" not in done.stdout
    assert not (home / ".cache" / "leak").exists()  # the user's home was never written: the run had its own
    assert "mesa.bin" not in done.stdout  # another program's write into the real home is none of the run's


def test_new_files_in_the_checkout_are_listed_and_python_caches_are_not(tmp_path):
    repo, home = tmp_path / "repo", tmp_path / "home"
    home.mkdir()
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("out/\n")
    (repo / "tracked.txt").write_text("a")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    before = checkout_state(repo)
    since = time.time_ns()
    assert outside_writes(home, since, before, repo) == []
    (repo / "tracked.txt").write_text("changed")
    (repo / "new.txt").write_text("new")
    (repo / "out").mkdir()
    (repo / "out" / "figure.png").write_bytes(b"png")
    (repo / "__pycache__").mkdir()
    (repo / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"")
    found = outside_writes(home, since, before, repo)
    assert found == ["checkout: !! out/", "checkout: ?? new.txt", "checkout: AM tracked.txt"], found
