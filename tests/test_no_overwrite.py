"""Issue 44, item 1: no command replaces a file it did not write, and none writes into a dataset.

Through the command line (:func:`napari_medsam_eval.cli.main`), on copies of the shared data in
``tmp_path`` (files the tool did not make): ``segment --out``, ``report --out``, ``compare --out``,
``propagation-study --out`` and ``prompt-study --out``

* refuse an existing file they did not write (one ``error:`` line naming it, exit 2, its bytes unchanged);
* replace it with ``--overwrite``;
* replace their own earlier output without ``--overwrite`` (the folder's ledger holds its SHA-256), but
  not once it was edited since;
* refuse a path inside a copied dataset folder (MSD with and without ``dataset.json``, a 2D
  ``images/`` + ``masks/`` folder, a MedSAM npz case, through a folder link) even with ``--overwrite``.

Every file outside the output is checked by its md5 before and after. The napari writer (napari's save
dialog asks before replacing) refuses a dataset's files too.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from napari_medsam_eval.cli import main
from napari_medsam_eval.core.ledger import LEDGER

from test_ownership import refused

CASE = "hippocampus_001"
OTHER = "hippocampus_004"
#: the cheap model and a box inside every hippocampus slice
SEGMENT = ["--model", "box", "--box", "5", "5", "20", "20"]


def md5s(root: Path, leave_out: tuple[Path, ...] = ()) -> dict[str, str]:
    """The md5 of every file under ``root`` but those in ``leave_out`` (and the ledger beside them)."""
    skipped = {p.resolve() for p in leave_out} | {p.parent.resolve() / LEDGER for p in leave_out}
    return {p.relative_to(root).as_posix(): hashlib.md5(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.resolve() not in skipped}


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()




def copy(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


def msd_copy(shared: Path, root: Path, with_json: bool = True) -> Path:
    """A small MSD dataset: two hippocampus cases (image and label), with its ``dataset.json`` or without."""
    source = shared / "hippocampus_mri"
    for name in (CASE, OTHER):
        for folder in ("imagesTr", "labelsTr"):
            copy(source / folder / f"{name}.nii.gz", root / folder / f"{name}.nii.gz")
    if with_json:
        copy(source / "dataset.json", root / "dataset.json")
    return root


# --- segment --out -----------------------------------------------------------------------------------


def _volume_case(shared: Path, tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A copied volume, the user's own label beside it (a copy of another case's ground truth), the prompt."""
    image = copy(shared / "hippocampus_mri" / "imagesTr" / f"{CASE}.nii.gz", tmp_path / "in" / "scan.nii.gz")
    mine = copy(shared / "hippocampus_mri" / "labelsTr" / f"{OTHER}.nii.gz",
                tmp_path / "out" / "my_manual_label.nii.gz")
    return image, mine, SEGMENT


def _image_case(shared: Path, tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A copied 2D image, a photo beside it (a copy of another image's mask: a real PNG), the prompt."""
    folder = shared / "kvasir_seg_2d"
    first, second = sorted((folder / "masks").glob("*.png"))[:2]
    source = next((folder / "images").glob(first.stem + ".*"))
    image = copy(source, tmp_path / "in" / f"polyp{source.suffix}")
    photo = copy(second, tmp_path / "out" / "photo.png")
    return image, photo, ["--model", "box", "--box", "20", "20", "120", "120"]


@pytest.mark.parametrize("make", [_volume_case, _image_case], ids=["my_manual_label.nii.gz", "photo.png"])
def test_segment_refuses_a_file_it_did_not_write_and_overwrite_replaces_it(make, shared_data, tmp_path, capsys):
    image, theirs, prompt = make(shared_data, tmp_path)
    before, theirs_before = md5s(tmp_path, (theirs,)), md5(theirs)
    line = refused(main(["segment", str(image), *prompt, "--out", str(theirs)]), capsys, theirs)
    assert "did not write" in line and "--overwrite" in line
    assert md5(theirs) == theirs_before and md5s(tmp_path, (theirs,)) == before
    assert not (theirs.parent / LEDGER).exists()

    assert main(["segment", str(image), *prompt, "--out", str(theirs), "--overwrite"]) == 0
    assert md5(theirs) != theirs_before and md5s(tmp_path, (theirs,)) == before
    from napari_medsam_eval.io import read_label

    assert set(np.unique(read_label(theirs).array)) <= {0, 1}


def test_segment_rewrites_its_own_output_but_not_once_it_was_edited(shared_data, tmp_path, capsys):
    image, mine, prompt = _volume_case(shared_data, tmp_path)
    out = mine.with_name("pred.nii.gz")
    before = md5s(tmp_path, (out,))
    assert main(["segment", str(image), *prompt, "--out", str(out)]) == 0
    first = md5(out)
    assert main(["segment", str(image), "--model", "box", "--box", "8", "8", "30", "30", "--out", str(out)]) == 0
    assert md5(out) != first, "the second box must have been written over the first's mask"
    assert json.loads((out.parent / LEDGER).read_text())["files"]["pred.nii.gz"] == \
        hashlib.sha256(out.read_bytes()).hexdigest()
    assert md5s(tmp_path, (out,)) == before

    edited = copy(shared_data / "hippocampus_mri" / "labelsTr" / f"{CASE}.nii.gz", out)  # corrected elsewhere
    edited_md5 = md5(edited)
    capsys.readouterr()
    refused(main(["segment", str(image), *prompt, "--out", str(out)]), capsys, out, "changed since")
    assert md5(out) == edited_md5


@pytest.mark.parametrize("where", ["labelsTr", "imagesTr", "root", "no dataset.json", "masks", "through a link"])
def test_segment_never_writes_into_a_dataset_even_with_overwrite(where, shared_data, tmp_path, capsys):
    prompt = SEGMENT
    if where == "masks":
        dataset = tmp_path / "kvasir"
        folder = shared_data / "kvasir_seg_2d"
        mask = sorted((folder / "masks").glob("*.png"))[0]
        image = next((folder / "images").glob(mask.stem + ".*"))
        copy(image, dataset / "images" / image.name)
        out = copy(mask, dataset / "masks" / mask.name)
        image, prompt = dataset / "images" / image.name, ["--model", "box", "--box", "20", "20", "120", "120"]
    else:
        dataset = msd_copy(shared_data, tmp_path / "Task04_Hippocampus", with_json=where != "no dataset.json")
        image = dataset / "imagesTr" / f"{CASE}.nii.gz"
        out = {"imagesTr": dataset / "imagesTr" / f"{OTHER}.nii.gz", "root": dataset / "pred.nii.gz",
               }.get(where, dataset / "labelsTr" / f"{CASE}.nii.gz")
        if where == "through a link":
            (tmp_path / "results").symlink_to(dataset / "labelsTr", target_is_directory=True)
            out = tmp_path / "results" / f"{CASE}.nii.gz"
    before = md5s(tmp_path)
    for extra in ([], ["--overwrite"]):
        line = refused(main(["segment", str(image), *prompt, "--out", str(out), *extra]), capsys, out)
        assert "dataset folder" in line and "not even when told to overwrite" in line, line
        assert md5s(tmp_path) == before
    assert not any(p.name == LEDGER for p in tmp_path.rglob("*"))


def test_segment_never_writes_over_a_medsam_npz_case(shared_data, tmp_path, capsys):
    cases = sorted((shared_data / "deeplesion_ct_npz").glob("*.npz"))[:2]
    image, other = (copy(p, tmp_path / "npz" / p.name) for p in cases)
    before = md5s(tmp_path)
    line = refused(main(["segment", str(image), *SEGMENT, "--slice", "0", "--out", str(other), "--overwrite"]),
                   capsys, other)
    assert "MedSAM npz case" in line
    assert md5s(tmp_path) == before
    out = tmp_path / "npz" / "pred.npz"  # a new mask beside the cases is fine, and so is its re-run
    for _ in range(2):
        assert main(["segment", str(image), *SEGMENT, "--slice", "0", "--out", str(out)]) == 0
    assert md5s(tmp_path, (out,)) == before


# --- report, compare and the studies --out -----------------------------------------------------------


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, shared_data) -> Path:
    """One run of the box model over a copy of one hippocampus case (the inputs of report and compare)."""
    root = tmp_path_factory.mktemp("no-overwrite")
    dataset = msd_copy(shared_data, root / "hippo")
    out = root / "run"
    assert main(["run", str(dataset), "--model", "box", "--limit", "1", "--quiet", "--no-report",
                 "--out", str(out)]) == 0
    return out


def _provenance(shared: Path) -> Path:
    return shared / "hippocampus_mri" / "PROVENANCE.md"


@pytest.mark.parametrize("command, name", [("report", "report.md"), ("compare", "compare.md")])
def test_report_and_compare_out_refuse_overwrite_and_rewrite(command, name, run_folder, shared_data, tmp_path,
                                                           capsys):
    argv = ["report", str(run_folder)] if command == "report" else \
        ["compare", str(run_folder), str(run_folder), "--resamples", "10"]
    out = tmp_path / "mine"
    theirs = copy(_provenance(shared_data), out / name)  # a file the tool did not write
    runs = md5s(run_folder)
    theirs_md5 = md5(theirs)
    refused(main([*argv, "--out", str(out)]), capsys, out, name, "did not write")
    assert md5(theirs) == theirs_md5 and md5s(run_folder) == runs
    assert sorted(p.name for p in out.iterdir()) == [name]

    assert main([*argv, "--out", str(out), "--overwrite"]) == 0
    assert md5(theirs) != theirs_md5
    written = md5(theirs)
    assert main([*argv, "--out", str(out)]) == 0  # its own earlier output: no --overwrite needed
    assert md5(theirs) == written and md5s(run_folder) == runs

    dataset = msd_copy(shared_data, tmp_path / "Task04")
    inside = dataset / "labelsTr"
    before = md5s(dataset)
    capsys.readouterr()
    for extra in ([], ["--overwrite"]):
        line = refused(main([*argv, "--out", str(inside), *extra]), capsys, inside, "dataset folder")
        assert "not even when told to overwrite" in line
    assert md5s(dataset) == before and md5s(run_folder) == runs


def test_propagation_study_out_refuses_overwrite_and_rewrite(shared_data, tmp_path, capsys):
    dataset = msd_copy(shared_data, tmp_path / "hippo")
    argv = ["propagation-study", str(dataset), "--model", "box", "--limit", "1", "--quiet", "--no-official"]
    out = tmp_path / "study"
    theirs = copy(_provenance(shared_data), out / "table.md")
    inputs, theirs_md5 = md5s(dataset), md5(theirs)
    refused(main([*argv, "--out", str(out)]), capsys, out, "table.md", "did not write")
    assert md5(theirs) == theirs_md5 and sorted(p.name for p in out.iterdir()) == ["table.md"]

    assert main([*argv, "--out", str(out), "--overwrite"]) == 0
    assert md5(theirs) != theirs_md5
    (out / "rows.csv").write_text("case_id\nedited by hand\n")  # one of ours, changed since: not ours any more
    capsys.readouterr()
    refused(main([*argv, "--out", str(out)]), capsys, out, "rows.csv")
    (out / "rows.csv").unlink()
    assert main([*argv, "--out", str(out)]) == 0  # the rest is its own earlier output
    assert md5s(dataset) == inputs

    capsys.readouterr()
    for extra in ([], ["--overwrite"]):
        refused(main([*argv, "--out", str(dataset / "study"), *extra]), capsys, dataset / "study", "dataset folder")
    assert md5s(dataset) == inputs and not (dataset / "study").exists()


def test_prompt_study_out_refuses_a_file_it_did_not_write(shared_data, tmp_path, capsys, monkeypatch):
    """Refused before any work (no model is built); the written study is covered by test_prompt_mode_study."""
    import napari_medsam_eval.cli.study as study_cli

    def no_model(*args, **kwargs):
        raise AssertionError("the model was built before the output folder was checked")

    monkeypatch.setattr(study_cli, "build_study_backend", no_model)
    folder = shared_data / "kvasir_seg_2d"
    mask = sorted((folder / "masks").glob("*.png"))[0]
    image = next((folder / "images").glob(mask.stem + ".*"))
    dataset = tmp_path / "kvasir"
    copy(image, dataset / "images" / image.name)
    copy(mask, dataset / "masks" / mask.name)
    out = tmp_path / "study"
    theirs = copy(_provenance(shared_data), out / "mode_table.md")
    before = md5s(tmp_path)
    argv = ["prompt-study", str(dataset), "--limit", "1", "--quiet", "--no-figure"]
    refused(main([*argv, "--out", str(out)]), capsys, out, "mode_table.md", "did not write")
    for extra in ([], ["--overwrite"]):
        refused(main([*argv, "--out", str(dataset / "masks"), *extra]), capsys, dataset / "masks", "dataset folder")
    assert md5s(tmp_path) == before and md5(theirs) == before["study/mode_table.md"]


# --- the napari writer ---------------------------------------------------------------------------------


def test_the_napari_writer_never_saves_over_a_dataset_file(shared_data, tmp_path):
    from napari_medsam_eval._writer import write_labels

    dataset = msd_copy(shared_data, tmp_path / "Task04")
    label = dataset / "labelsTr" / f"{CASE}.nii.gz"
    before = md5s(tmp_path)
    data = np.zeros((4, 5, 6), np.uint8)
    with pytest.raises(ValueError, match="dataset folder"):
        write_labels(str(label), data, {"name": "edited"})
    assert md5s(tmp_path) == before
    elsewhere = copy(label, tmp_path / "mine" / "edited.nii.gz")  # napari's dialog asked: replaced
    assert write_labels(str(elsewhere), data, {"name": "edited"}) == [str(elsewhere)]
    assert md5(elsewhere) != before["Task04/labelsTr/" + label.name]
