"""Issue 29, "never touch what is not ours": no command deletes or overwrites a file it did not make.

* a user's folder (``tmp/old/`` older than an hour, ``entries/x.zarr/pic.jpg``, ``notes.txt``) given as an
  embedding store to ``segment``, ``run``, ``cache info`` or ``cache clear --yes`` is refused (exit 2, one
  ``error:`` line naming it and what it holds) and left byte for byte as it was;
* a store made by a real LiteMedSAM run keeps working: ``cache info`` writes nothing, the stale-temporary
  sweep and ``cache clear`` remove only what is the store's own and name what they leave;
* ``run --resume`` on a folder that is not a run folder (``results.csv``, ``report.md``, ``run.log``) is
  refused before anything in it is touched; a run folder of ours resumes as before;
* an output that resolves to an input (``segment X --out X``, through a symbolic or hard link; a run
  folder that is or lies inside its dataset) is refused before any work;
* ``report --out`` and ``compare --out`` never replace a file they did not write there.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.cli import main
from napari_medsam_eval.embeddings import ENV_DIR, EmbeddingKey, EmbeddingStore, open_store
from napari_medsam_eval.embeddings import layout
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.io import read_case, write_mask

LESION = "CT_Lesion_000009_03_01_036-048.npz"
HOUR = 3600
#: the cheap model and a prompt that is refused before it is ever used
SEGMENT = ["--box", "0", "0", "5", "5", "--slice", "0", "--model", "box"]


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (and ``root`` itself): kind, mode, mtime, size and SHA-256 of files, link targets."""
    found: dict[str, tuple] = {".": ("dir", root.stat().st_mtime_ns)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            info = path.lstat()
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[relative] = ("link", os.readlink(path))
            elif path.is_dir():
                found[relative] = ("dir", info.st_mode, info.st_mtime_ns)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                found[relative] = ("file", info.st_mode, info.st_mtime_ns, info.st_size, digest)
    return found


def refused(code: int, capsys: pytest.CaptureFixture, *named: object) -> str:
    """The one ``error:`` line of a refused command (exit 2), which names each of ``named``."""
    err = capsys.readouterr().err
    assert code == 2, err
    assert "internal error" not in err and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for item in named:
        assert str(item) in lines[0], (item, lines[0])
    return lines[0]


def make_old(path: Path) -> None:
    stamp = time.time() - 2 * HOUR
    os.utime(path, (stamp, stamp))


def user_folder(root: Path) -> Path:
    """A folder a user made, laid out like a store but without its marker."""
    (root / "tmp" / "old").mkdir(parents=True)
    (root / "tmp" / "old" / "draft.txt").write_text("unsaved work")
    (root / "entries" / "x.zarr").mkdir(parents=True)
    (root / "entries" / "x.zarr" / "pic.jpg").write_bytes(b"\xff\xd8\xff\xe0 a holiday photo")
    (root / "notes.txt").write_text("mine")
    for path in (root / "tmp" / "old" / "draft.txt", root / "tmp" / "old", root / "entries" / "x.zarr" / "pic.jpg"):
        make_old(path)
    return root


@pytest.fixture
def lesion(shared_data: Path, tmp_path: Path) -> Path:
    """A writable copy of one DeepLesion npz (never write into the shared data)."""
    path = tmp_path / "case" / LESION
    path.parent.mkdir()
    shutil.copyfile(shared_data / "deeplesion_ct_npz" / LESION, path)
    return path


# --- embedding store -------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["segment", "run", "cache info", "cache clear"])
def test_a_user_folder_is_never_taken_for_an_embedding_store(command, shared_data, lesion, tmp_path, capsys):
    folder = user_folder(tmp_path / "photos")
    before = snapshot(folder)
    argv = {
        "segment": ["segment", str(lesion), *SEGMENT, "--out", str(tmp_path / "mask.npz"), "--embeddings", str(folder)],
        "run": ["run", str(shared_data / "deeplesion_ct_npz"), "--model", "box", "--limit", "1", "--quiet",
                "--out", str(tmp_path / "run"), "--embeddings", str(folder)],
        "cache info": ["cache", "info", "--dir", str(folder)],
        "cache clear": ["cache", "clear", "--yes", "--dir", str(folder)],
    }[command]
    line = refused(main(argv), capsys, folder, "not an embedding store", "notes.txt", "entries/", "tmp/")
    assert "give an empty folder or one made by --embeddings" in line
    assert snapshot(folder) == before
    assert not (tmp_path / "mask.npz").exists() and not (tmp_path / "run").exists()


def test_the_api_refuses_a_user_folder_and_a_marker_of_another_format(tmp_path, monkeypatch):
    folder = user_folder(tmp_path / "photos")
    before = snapshot(folder)
    with pytest.raises(DataError, match="not an embedding store"):
        open_store(str(folder))
    monkeypatch.setenv(ENV_DIR, str(folder))  # the napari path: backends built with the environment's store
    with pytest.raises(DataError, match="not an embedding store"):
        open_store(None)
    assert snapshot(folder) == before

    for text in ('{"format": 1, "album": "holidays"}', '{"format": "1"}', '{"kind": "photos", "format": 1}',
                 "[1]", "not json"):
        (folder / "store.json").write_text(text)
        with pytest.raises(DataError, match="store.json is not the store's marker"):
            EmbeddingStore(folder)
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "store.json").write_text('{"format": 1, "limit_bytes": 1234}')  # made before "kind"
    assert EmbeddingStore(tmp_path / "legacy").limit_bytes == 1234
    (tmp_path / "empty").mkdir()
    EmbeddingStore(tmp_path / "empty")
    assert layout.read_marker(tmp_path / "empty")[0] == {"kind": layout.STORE_KIND, "format": layout.STORE_FORMAT}


def test_a_folder_being_made_a_store_by_another_process_is_waited_for(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    (root / ".store.json.4242").write_text("")  # another process between its marker's write and rename

    def finish() -> None:
        time.sleep(0.3)
        (root / "store.json").write_text(layout.marker_text(None))
        (root / ".store.json.4242").unlink()

    writer = threading.Thread(target=finish)
    writer.start()
    try:
        assert layout.check_store_folder(root) is True
    finally:
        writer.join()


def fake_temporary(store: Path, name: str, age_s: float) -> Path:
    """A temporary named (``<32 hex>.<8 characters>.zarr``) and laid out as the store's crashed writer leaves one."""
    path = store / "tmp" / name
    (path / "c" / "0").mkdir(parents=True)
    (path / "c" / "0" / "0").write_bytes(b"\0" * 64)
    for item in (path / "c" / "0" / "0", path / "c" / "0", path / "c", path):
        stamp = time.time() - age_s
        os.utime(item, (stamp, stamp))
    return path


def test_a_store_made_by_a_run_keeps_working_and_clear_takes_only_its_own(shared_data, tmp_path, capsys,
                                                                          cache_root):
    store = tmp_path / "store"
    run = ["run", str(shared_data / "kvasir_seg_2d"), "--model", "litemedsam", "--limit", "1", "--quiet",
           "--no-report", "--model-options", '{"engine": "torch", "device": "cpu"}', "--embeddings", str(store)]
    assert main([*run, "--out", str(tmp_path / "first")]) == 0
    ours = sorted(p.name for p in (store / "entries").iterdir())
    assert len(ours) == 1 and layout.ENTRY_NAME.match(ours[0])
    # the user's things dropped into the store's folder, and a crashed writer's stale temporary
    (store / "entries" / "x.zarr").mkdir()
    (store / "entries" / "x.zarr" / "pic.jpg").write_bytes(b"photo")
    (store / "tmp" / "old").mkdir()
    (store / "tmp" / "old" / "draft.txt").write_text("unsaved")
    make_old(store / "tmp" / "old")
    (store / "notes.txt").write_text("mine")
    stale = fake_temporary(store, "ab" * 16 + ".x1y2z3_4.zarr", 2 * HOUR)
    fresh = fake_temporary(store, "cd" * 16 + ".abcdefgh.zarr", 0)
    capsys.readouterr()

    before = snapshot(store)
    assert main(["cache", "info", "--dir", str(store)]) == 0
    assert "entries: 1" in capsys.readouterr().out
    assert snapshot(store) == before, "cache info writes, touches and deletes nothing"

    # normal use: a second run reads the entry; a write sweeps only the store's own stale temporary
    assert main([*run, "--out", str(tmp_path / "second")]) == 0
    first, second = (pd.read_csv(tmp_path / name / "results.csv") for name in ("first", "second"))
    pd.testing.assert_series_equal(first["dice"], second["dice"])
    EmbeddingStore(store).put(EmbeddingKey("litemedsam", "c" * 64, "torch", "p", "x"), np.ones((1, 4, 8, 8)))
    assert not stale.exists() and fresh.exists(), "only a stale temporary of the store's own naming goes"
    users = {k: v for k, v in before.items() if k.split("/")[-1] in ("x.zarr", "pic.jpg", "old", "draft.txt",
                                                                     "notes.txt")}
    assert {k: v for k, v in snapshot(store).items() if k in users} == users

    capsys.readouterr()
    assert main(["cache", "clear", "--yes", "--dir", str(store)]) == 0
    out = capsys.readouterr().out
    assert "removed 2 stored embeddings" in out and "1 unfinished writes" in out
    assert "left 3 item(s)" in out and "entries/x.zarr/" in out and "notes.txt" in out and "tmp/old/" in out
    assert sorted(p.name for p in (store / "entries").iterdir()) == ["x.zarr"]
    assert sorted(p.name for p in (store / "tmp").iterdir()) == ["old"]
    assert {k: v for k, v in snapshot(store).items() if k in users} == users
    assert layout.read_marker(store)[0] is not None, "the marker stays"


# --- run folders -----------------------------------------------------------------------------------


@pytest.mark.parametrize("manifest", [None, {"name": "my survey", "format": "v2"}])
def test_resume_refuses_a_folder_that_is_not_a_run_folder(manifest, shared_data, tmp_path, capsys):
    folder = tmp_path / "analysis"
    folder.mkdir()
    (folder / "results.csv").write_text("patient,score\n1,0.9\n")
    (folder / "report.md").write_text("# My report\n")
    (folder / "run.log").write_text("my log\n")
    if manifest is not None:
        (folder / "manifest.json").write_text(json.dumps(manifest))
    before = snapshot(folder)
    code = main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "1", "--quiet",
                 "--out", str(folder), "--resume"])
    line = refused(code, capsys, folder, "cannot resume", "manifest.json")
    assert ("results.csv" in line and "report.md" in line) if manifest is None else "not a run manifest" in line
    assert snapshot(folder) == before


def test_resume_of_our_run_folders_works_as_before(shared_data, tmp_path, capsys):
    dataset = shared_data / "hippocampus_mri"
    out = tmp_path / "run"
    assert main(["run", str(dataset), "--model", "box", "--limit", "1", "--quiet", "--out", str(out)]) == 0
    assert main(["run", str(dataset), "--model", "box", "--limit", "2", "--quiet", "--out", str(out), "--resume"]) == 0
    assert pd.read_csv(out / "results.csv")["case_id"].nunique() == 2 and (out / "report.md").is_file()
    started = tmp_path / "killed_before_its_manifest"  # a run killed during its model build leaves its lock only
    started.mkdir()
    (started / ".run.lock").write_text("")
    assert main(["run", str(dataset), "--model", "box", "--limit", "1", "--quiet", "--no-report",
                 "--out", str(started), "--resume"]) == 0
    assert (started / "manifest.json").is_file() and (started / "run.log").is_file()


# --- outputs that resolve to inputs ----------------------------------------------------------------


@pytest.mark.parametrize("through", ["itself", "a symbolic link", "a hard link", "an input given by a link"])
def test_segment_never_writes_over_its_input(through, lesion, capsys):
    os.chmod(lesion, 0o644)
    before = snapshot(lesion.parent)
    image, out = lesion, lesion
    if through == "a symbolic link":
        out = lesion.with_name("link.npz")
        out.symlink_to(lesion)
    elif through == "a hard link":
        out = lesion.with_name("hard.npz")
        os.link(lesion, out)
    elif through == "an input given by a link":
        image = lesion.with_name("link.npz")
        image.symlink_to(lesion)
    linked = snapshot(lesion.parent)
    line = refused(main(["segment", str(image), *SEGMENT, "--out", str(out)]), capsys, out, image)
    assert "--out is the input image" in line
    assert snapshot(lesion.parent) == linked
    assert linked[lesion.name] == before[lesion.name]
    with np.load(lesion) as data:
        assert {"imgs", "gts"} <= set(data.files)


def test_the_mask_writer_refuses_the_image_it_was_read_from(lesion):
    case = read_case(lesion)
    before = snapshot(lesion.parent)
    with pytest.raises(DataError, match="the mask is the image"):
        write_mask(np.zeros(case.spatial_shape, np.uint8), lesion, case)
    assert snapshot(lesion.parent) == before


@pytest.mark.parametrize("where", ["the dataset", "inside the dataset"])
def test_a_run_folder_is_never_its_dataset(where, lesion, capsys):
    dataset = lesion.parent
    out = dataset if where == "the dataset" else dataset / "runs" / "first"
    before = snapshot(dataset)
    line = refused(main(["run", str(dataset), "--model", "box", "--quiet", "--out", str(out)]), capsys, out, dataset)
    assert ("is the dataset" if where == "the dataset" else "lies inside the dataset") in line
    assert snapshot(dataset) == before


# --- report and compare --out ------------------------------------------------------------------------


@pytest.mark.slow
def test_report_and_compare_out_never_replace_a_file_they_did_not_write(shared_data, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "2", "--quiet",
                 "--out", str(run)]) == 0
    mine = tmp_path / "mine"
    (mine / "figures").mkdir(parents=True)
    (mine / "report.md").write_text("# my own report\n")
    (mine / "figures" / "slices_01_holiday.png").write_bytes(b"my picture")
    (mine / "compare.csv").write_text("mine\n")
    before = snapshot(mine)
    capsys.readouterr()
    line = refused(main(["report", str(run), "--out", str(mine)]), capsys, mine, "report.md")
    assert "figures/slices_01_holiday.png" in line and "did not write" in line
    line = refused(main(["compare", str(run), str(run), "--out", str(mine), "--resamples", "10"]), capsys, mine)
    assert "compare.csv" in line
    assert snapshot(mine) == before

    new = tmp_path / "new"  # a report written there twice: the second replaces the first's files only
    for _ in range(2):
        assert main(["report", str(run), "--out", str(new)]) == 0
        assert main(["compare", str(run), str(run), "--out", str(new), "--resamples", "10"]) == 0
    (new / "notes.txt").write_text("mine")
    assert main(["report", str(run), "--out", str(new)]) == 0 and (new / "notes.txt").read_text() == "mine"
    assert main(["report", str(run)]) == 0 and (run / "report.md").is_file()
