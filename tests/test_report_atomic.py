"""Issue 44, item 2: a report is replaced whole or not at all.

``medsam-eval report`` killed with SIGKILL part-way (while it draws, and
while it swaps the new report in) leaves a report whose every link resolves:
the previous one untouched, or the new one whole; the next report removes
what the killed one left, and only that (a user's own files beside it stay).
In-process, every rename and removal of a report is checked against the
documents in place at that instant: a figure they link is never replaced or
removed under them.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from napari_medsam_eval.cli import main
from napari_medsam_eval.report import swap

#: the child: ``medsam-eval report ...`` that writes ``MARK`` and waits, to be killed, once it reaches ``WHEN``
#: (``drawing``: a figure of the new report is drawn; ``swapping``: a new figure is being copied into place)
CHILD = '''
import shutil, sys, time
from pathlib import Path
from napari_medsam_eval.report import figures

mark, when = Path(sys.argv[1]), sys.argv[2]


def pause():
    mark.write_text(when)
    time.sleep(300)


if when == "drawing":
    real_save = figures.save_figure

    def save_figure(figure, path):
        written = real_save(figure, path)
        pause()
        return written

    figures.save_figure = save_figure
else:
    real_copy = shutil.copyfile

    def copyfile(source, target, **kwargs):
        copied = real_copy(source, target, **kwargs)
        pause()
        return copied

    shutil.copyfile = copyfile
from napari_medsam_eval.cli import main
sys.exit(main(sys.argv[3:]))
'''
DOCUMENTS = ("report.md", "report.html")


def links(document: Path) -> set[str]:
    """The relative paths ``document`` (report.md or report.html) links: images and links."""
    text = document.read_text(encoding="utf-8")
    found = re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", text) if document.suffix == ".md" else \
        re.findall(r'(?:src|href)="([^"]+)"', text)
    return {link for link in found if "://" not in link and not link.startswith("#")}


def assert_whole(folder: Path) -> None:
    """Both documents are there and every file they link exists and is a PNG."""
    for name in DOCUMENTS:
        assert (folder / name).is_file(), name
        linked = links(folder / name)
        assert linked, f"{name} links no figure"
        for link in linked:
            data = (folder / name).parent.joinpath(link).read_bytes()
            assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{name} links {link}, which is not a whole PNG"


def snapshot(folder: Path) -> dict[str, bytes]:
    """The report files and every figure the documents link, by path."""
    names = {*DOCUMENTS, "task_summary.csv"} | {link for name in DOCUMENTS for link in links(folder / name)}
    return {name: (folder / name).read_bytes() for name in sorted(names)}


@pytest.fixture(scope="module")
def reported_run(tmp_path_factory, shared_data) -> Path:
    """A run of the box baseline on 3 hippocampus cases (6 rows), with a report of its 2 worst rows."""
    run = tmp_path_factory.mktemp("atomic") / "run"
    assert main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "3", "--out", str(run),
                 "--quiet", "--no-report"]) == 0
    assert main(["report", str(run), "--worst", "2"]) == 0
    return run


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    return copy


def _kill_report_at(tmp_path: Path, run: Path, when: str, *args: str) -> subprocess.Popen:
    """``medsam-eval report RUN *args`` in a child process, killed with SIGKILL once it reaches ``when``."""
    mark = tmp_path / "reached"
    process = subprocess.Popen([sys.executable, "-c", CHILD, str(mark), when, "report", str(run), *args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while not mark.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert mark.exists() and process.poll() is None, f"the report did not reach {when}: {process.stderr.read()!r}"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    return process


def _stages(run: Path) -> list[Path]:
    return sorted(p for p in run.iterdir() if p.name.startswith(swap.TMP_PREFIX))


@pytest.mark.slow
def test_a_report_killed_while_drawing_leaves_the_previous_one_whole(reported_run, tmp_path):
    run = _copy(reported_run, tmp_path)
    before = snapshot(run)
    assert_whole(run)
    _kill_report_at(tmp_path, run, "drawing", "--worst", "4")
    assert snapshot(run) == before, "the previous report (text and every figure it links) must be unchanged"
    assert_whole(run)
    assert _stages(run), "the killed report's stage folder is what it left"

    # what an older version left when killed (zero-byte temporaries of its atomic writes), and a user's own
    # files with names close to ours: the next report removes the former only
    figures = run / "figures"
    ours = [figures / ".slices_01_hippocampus_001.k3j4h5g6.png", figures / ".box_dice.a1b2c3d4.png",
            run / ".report.md.zz9_yy8x.tmp"]
    for path in ours:
        path.write_bytes(b"")
    users = {run / ".notes.png": b"my notes", figures / ".notes.png": b"mine", figures / "my_plot.png": b"plot",
             run / "notes.md": b"# mine\n", figures / ".slices_hand_drawn.png": b"drawn by hand"}
    for path, data in users.items():
        path.write_bytes(data)
    assert main(["report", str(run), "--worst", "4"]) == 0
    assert_whole(run)
    assert not _stages(run) and not any(path.exists() for path in ours)
    assert not [p for p in figures.iterdir() if p.name.startswith(swap.TMP_PREFIX)]
    assert all(path.read_bytes() == data for path, data in users.items()), "a user's file was touched"
    assert snapshot(run) != before and "Worst 4 cases" in (run / "report.md").read_text()


@pytest.mark.slow
def test_a_report_killed_while_swapping_leaves_the_new_one_whole(reported_run, tmp_path):
    """Killed while its figures replace the previous ones: the documents in place are the new report, linking
    its figures in the stage; the next report is the same report, linking ``figures/``."""
    run = _copy(reported_run, tmp_path)
    _kill_report_at(tmp_path, run, "swapping", "--worst", "4")
    assert_whole(run)
    (stage,) = _stages(run)
    interim = {name: (run / name).read_text() for name in DOCUMENTS}
    assert all(f"{stage.name}/figures/" in text for text in interim.values())
    assert main(["report", str(run), "--worst", "4"]) == 0
    assert_whole(run)
    assert not _stages(run)
    for name, text in interim.items():
        assert text.replace(f"{stage.name}/figures/", "figures/") == (run / name).read_text()


def test_no_instant_with_a_broken_link(reported_run, tmp_path, monkeypatch):
    """Every rename into the folder and every removal in ``figures/`` during two reports (other worst cases,
    so figures are replaced and others left stale): never of a file the documents in place link."""
    run = _copy(reported_run, tmp_path)
    real_replace, real_unlink = os.replace, Path.unlink
    seen: list[str] = []

    def linked_now() -> set[Path]:
        return {(run / link).resolve() for name in DOCUMENTS if (run / name).exists() for link in links(run / name)}

    def replace(source, target, *args, **kwargs):
        target = Path(target)
        assert target.resolve() not in linked_now(), f"{target} is replaced while a document in place links it"
        real_replace(source, target, *args, **kwargs)
        if target.parent == run and target.name in DOCUMENTS:
            assert_whole(run)
            seen.append(target.name)

    def unlink(path, *args, **kwargs):
        if str(path).startswith(str(run)):
            assert Path(path).resolve() not in linked_now(), f"{path} is removed while a document in place links it"
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(Path, "unlink", unlink)
    for worst in ("4", "1"):
        assert main(["report", str(run), "--worst", worst]) == 0
        assert_whole(run)
    monkeypatch.undo()
    assert seen.count("report.md") >= 3, "the second report is swapped in twice: interim, then final"
    assert len(list((run / "figures").glob("slices_*.png"))) == 1, "the stale worst-case figures are removed"
    assert not _stages(run)
