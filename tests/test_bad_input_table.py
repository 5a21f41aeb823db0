"""Issue 17: a table of bad inputs, each through ``info``, ``score``, ``segment`` and ``run``.

Each command must answer with one line naming the file and the problem, exit
status 2, no traceback and no ``internal error``; ``run`` records the bad case
as a failed row with the same reason and goes on with the others. The files
are made in ``tmp_path`` from the real hippocampus data.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval.benchmark import load_table, run_benchmark
from napari_medsam_eval.cli import main

from test_bad_files import _video
from test_run_table_checks import box_run  # noqa: F401 (a fixture: a finished box run)

CASE = "hippocampus_001"
OTHER = "hippocampus_004"


def _image(shared: Path) -> Path:
    return shared / "hippocampus_mri" / "imagesTr" / f"{CASE}.nii.gz"


def _label(shared: Path) -> Path:
    return shared / "hippocampus_mri" / "labelsTr" / f"{CASE}.nii.gz"


def _array(path: Path) -> np.ndarray:
    return sitk.GetArrayFromImage(sitk.ReadImage(str(path)))


def _write_like(array: np.ndarray, reference: Path, path: Path) -> Path:
    image = sitk.GetImageFromArray(array)
    image.CopyInformation(sitk.ReadImage(str(reference)))
    sitk.WriteImage(image, str(path))
    return path


def _nan_image(folder: Path, shared: Path) -> Path:
    array = _array(_image(shared)).astype(np.float32)
    array[3, 3, 3] = np.nan
    return _write_like(array, _image(shared), folder / "bad.nii.gz")


def _four_d(folder: Path, shared: Path) -> Path:
    volume = sitk.ReadImage(str(_image(shared)))
    path = folder / "bad.nii.gz"
    sitk.WriteImage(sitk.JoinSeries([volume, volume]), str(path))  # two time points
    return path


def _npz(folder: Path, **arrays) -> Path:
    path = folder / "bad.npz"
    np.savez(path, **arrays)
    return path


def _broken_link(folder: Path, shared: Path) -> Path:
    path = folder / "bad.nii.gz"
    path.symlink_to(folder / "gone.nii.gz")
    return path


def _fraction_label(folder: Path, shared: Path) -> Path:
    array = _array(_label(shared)).astype(np.float32)
    array[array == 1] = 0.5
    return _write_like(array, _label(shared), folder / "bad.nii.gz")


def _undeclared_label(folder: Path, shared: Path) -> Path:
    array = _array(_label(shared)).copy()
    array[0, 0, 0] = 7
    return _write_like(array, _label(shared), folder / "bad.nii.gz")


def _shifted_label(folder: Path, shared: Path) -> Path:
    image = sitk.ReadImage(str(_label(shared)))
    image.SetSpacing((1.0, 1.0, 2.5))
    path = folder / "bad.nii.gz"
    sitk.WriteImage(image, str(path))
    return path


def _smaller_label(folder: Path, shared: Path) -> Path:
    array = _array(_label(shared))[:, :-3]
    path = folder / "bad.nii.gz"
    sitk.WriteImage(sitk.GetImageFromArray(array), str(path))
    return path


def _image_as_label(folder: Path, shared: Path) -> Path:
    path = folder / "bad.nii.gz"
    shutil.copy(_image(shared), path)
    return path


# (name, maker, where: "image" or "label", message fragment); OTHER_FRAGMENTS: where a command words it
# otherwise; NOT_A_CASE: files a dataset listing does not take as a case (no run); DISPLAY_ONLY: label
# files `info --label` may show (it describes; `score` and `run` judge them against the dataset)
Maker = Callable[[Path, Path], Path]
INPUTS: list[tuple[str, Maker, str, str]] = [
    ("missing file", lambda f, s: f / "bad.nii.gz", "image", "file not found"),
    ("empty file", lambda f, s: _bytes(f / "bad.nii.gz", b""), "image", "file is empty (0 bytes)"),
    ("text named .nii.gz", lambda f, s: _bytes(f / "bad.nii.gz", b"hello\n"), "image", "is a text file, not a NIfTI"),
    ("truncated .nii.gz", lambda f, s: _bytes(f / "bad.nii.gz", _image(s).read_bytes()[:4000]), "image",
     "truncated or corrupt"),
    ("gzip of garbage", lambda f, s: _bytes(f / "bad.nii.gz", gzip.compress(b"x" * 500)), "image",
     "cannot be read as NIfTI"),
    ("folder named .nii.gz", lambda f, s: _folder(f / "bad.nii.gz"), "image", "folder is empty"),
    ("folder of link loops only", lambda f, s: _loops(f / "bad.nii.gz"), "image",
     "folder holds only symbolic links that reach no file (a, b: link loops"),
    ("unknown suffix", lambda f, s: _bytes(f / "bad.xyz", b"abc"), "image", "unknown format '.xyz'"),
    ("NaN voxel", _nan_image, "image", "non-finite voxel"),
    ("4D image (two time points)", _four_d, "image", "4D image"),
    ("npz without imgs", lambda f, s: _npz(f, gts=np.zeros((3, 4, 5), np.uint8)), "image", "no 'imgs' key"),
    ("npz spacing of 2 values", lambda f, s: _npz(f, imgs=np.zeros((3, 4, 5), np.uint8),
                                                  gts=np.zeros((3, 4, 5), np.uint8), spacing=np.ones(2)),
     "image", "spacing has 2 values"),
    ("npz spacing of 4 values", lambda f, s: _npz(f, imgs=np.zeros((3, 4, 5), np.uint8),
                                                  gts=np.zeros((3, 4, 5), np.uint8), spacing=np.ones(4)),
     "image", "spacing has 4 values"),
    ("broken symbolic link", _broken_link, "image", "broken symbolic link"),
    ("fractional label values", _fraction_label, "label", "non-integer"),
    ("undeclared label value", _undeclared_label, "label", "[7]"),
    ("label with other spacing", _shifted_label, "label", "spacing"),
    ("label of another shape", _smaller_label, "label", "shape"),
    ("image given as the label", _image_as_label, "label", "distinct values"),
]


OTHER_FRAGMENTS = {("image given as the label", "run"): "does not declare"}
NOT_A_CASE = {"missing file", "folder named .nii.gz", "folder of link loops only", "unknown suffix"}
DISPLAY_ONLY = {"undeclared label value", "image given as the label"}


def _bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _folder(path: Path) -> Path:
    path.mkdir()
    return path


def _loops(path: Path) -> Path:
    """A folder whose only entries are two links to each other (it once read "folder is empty")."""
    path.mkdir()
    (path / "a").symlink_to("b")
    (path / "b").symlink_to("a")
    return path


def _run_cli(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.err


def _assert_one_line(code: int, err: str, fragment: str, command: str) -> None:
    assert code == 2, f"{command}: exit {code}, {err}"
    assert "internal error" not in err and "Traceback" not in err, f"{command}: {err}"
    errors = [line for line in err.strip().splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and fragment in errors[0], f"{command}: {errors!r} lacks {fragment!r}"


def _dataset_with(bad: Path, where: str, shared: Path, root: Path) -> Path:
    """An MSD dataset of two cases whose first case's image (or label) is ``bad``."""
    source = shared / "hippocampus_mri"
    for folder in ("imagesTr", "labelsTr"):
        (root / folder).mkdir(parents=True)
        for case in (CASE, OTHER):
            (root / folder / f"{case}.nii.gz").symlink_to(source / folder / f"{case}.nii.gz")
    shutil.copy(source / "dataset.json", root)
    target = root / ("imagesTr" if where == "image" else "labelsTr") / f"{CASE}.nii.gz"
    target.unlink()
    if bad.is_symlink() or bad.exists():
        os.replace(bad, target) if not bad.is_dir() else shutil.move(str(bad), str(target))
    return root


@pytest.mark.parametrize("name, make, where, fragment", INPUTS, ids=[i[0] for i in INPUTS])
def test_bad_input_through_every_command(tmp_path, shared_data, capsys, name, make, where, fragment):
    folder = tmp_path / "inputs"
    folder.mkdir()
    bad = make(folder, shared_data)
    label, image = _label(shared_data), _image(shared_data)
    if where == "image":
        _assert_one_line(*_run_cli(capsys, "info", bad), fragment, "info")
        _assert_one_line(*_run_cli(capsys, "segment", bad, "--model", "box", "--box", "5", "5", "20", "20",
                                   "--out", tmp_path / "pred.nii.gz"), fragment, "segment")
        assert not (tmp_path / "pred.nii.gz").exists()
        if not bad.name.endswith(".npz") or "spacing" in name:  # an npz holds its own ground truth
            _assert_one_line(*_run_cli(capsys, "score", bad, label), fragment, "score (as prediction)")
    else:
        if name not in DISPLAY_ONLY:
            _assert_one_line(*_run_cli(capsys, "info", image, "--label", bad), fragment, "info --label")
        _assert_one_line(*_run_cli(capsys, "score", bad, label), fragment, "score (as prediction)")
    if "npz" in name or name in NOT_A_CASE:
        return  # not a case of an MSD dataset; the npz layout's own tests cover npz cases
    # run: the bad case is a failed row naming the reason, the other case is scored
    again = tmp_path / "again"
    again.mkdir()
    dataset = _dataset_with(make(again, shared_data), where, shared_data, tmp_path / "data")
    table = run_benchmark(dataset, tmp_path / "run", "box")
    bad_rows = table[table["case_id"] == CASE]
    assert len(bad_rows) >= 1 and (bad_rows["status"] == "failed").all(), bad_rows[["status", "error"]]
    expected = OTHER_FRAGMENTS.get((name, "run"), fragment)
    assert all(expected in error for error in bad_rows["error"]), list(bad_rows["error"])
    assert (table[table["case_id"] == OTHER]["status"] == "ok").all()


@pytest.mark.parametrize("args, fragment", [
    (["--box", "30", "5", "10", "20"], "x0 > x1"),
    (["--box", "500", "500", "600", "600"], "lies wholly outside"),
    (["--box", "5", "5", "20", "20", "--slice", "99"], "--slice 99 is outside"),
    (["--point", "5", "900", "1"], "lies outside"),
])
def test_bad_prompts_to_segment(tmp_path, shared_data, capsys, args, fragment):
    code, err = _run_cli(capsys, "segment", _image(shared_data), "--model", "box", *args,
                         "--out", tmp_path / "pred.nii.gz")
    _assert_one_line(code, err, fragment, "segment")


@pytest.mark.parametrize("tolerance", ["-1", "nan"])
def test_bad_tolerance_to_score(shared_data, capsys, tolerance):
    code, err = _run_cli(capsys, "score", _label(shared_data), _label(shared_data), "--tolerance-mm", tolerance)
    _assert_one_line(code, err, "--tolerance-mm must be a positive number", "score")


def test_bad_dataset_folders_to_run(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    for dataset, fragment in [(tmp_path / "nowhere", "not found"), (empty, "")]:
        code, err = _run_cli(capsys, "run", dataset, "--model", "box", "--out", tmp_path / "run", "--quiet")
        _assert_one_line(code, err, fragment, "run")
        assert not (tmp_path / "run").exists(), "a refused run leaves no folder"


# -- every option checked before work: the value a user types, refused naming the option --------

LESION = "CT_Lesion_000002_03_01_035-047.npz"
BOX = ["--box", "246", "273", "276", "322"]


@pytest.mark.parametrize("args, fragment", [
    (["--point", "260", "300", "5"], "LABEL must be 1 (positive) or 0 (negative)"),
    ([*BOX, "nan"], "argument --box: not a finite number"),
    ([*BOX, "--slice", "nan"], "argument --slice: not a whole number"),
    ([*BOX, "--slice", "five"], "argument --slice: not a whole number: 'five'"),
    ([*BOX, "--label-value", "-3"], "argument --label-value: must be 1..65535"),
    ([*BOX, "--label-value", "0"], "argument --label-value: must be 1..65535"),
    ([*BOX, "--model-options", '{"foo": 1'], "--model-options must be a JSON object"),
    ([*BOX, "--model-options", '{"cache_size": NaN}'], "NaN is not a number"),
    ([*BOX, "--propagation", '{"margin": Infinity}'], "Infinity is not a number"),
    ([*BOX, "--propagation", "fast"], "propagation: unknown rules 'fast'"),
    ([*BOX, "--propagation", '{"margin": true}'], "propagation: margin must be a finite number, got True"),
    ([*BOX, "--propagation", '{"margn": 3}'], "propagation: unknown option(s) ['margn']; the options are"),
    ([*BOX, "--propagation", '{"min_iou": 2}'], "min_iou must be between 0 and 1"),
    ([*BOX, "--window", "a,b"], "--window"),
    ([*BOX, "--window", "40,-5"], "positive width"),
    ([*BOX, "--window", "lungs"], "--window: unknown CT window 'lungs'"),
])
def test_bad_options_to_segment_are_refused_before_work(tmp_path, shared_data, capsys, args, fragment):
    out = tmp_path / "pred.npz"
    code, err = _run_cli(capsys, "segment", shared_data / "deeplesion_ct_npz" / LESION, "--model", "box", *args,
                         "--out", out)
    _assert_one_line(code, err, fragment, "segment")
    assert not out.exists()


def test_model_options_are_checked_against_the_model(tmp_path, shared_data, capsys):
    """A model's options are its builder's parameters: an unknown one is listed with the valid ones, a value
    of another type is named; both before the model is built."""
    image = shared_data / "deeplesion_ct_npz" / LESION
    for options, fragment in [('{"foo": 1}', "unknown option(s) ['foo']; the options are ['cache_size'"),
                              ('{"num_threads": "two"}', "num_threads must be an integer (or null), got 'two'"),
                              ('{"cache_size": true}', "cache_size must be an integer, got True")]:
        code, err = _run_cli(capsys, "segment", image, "--model", "litemedsam", *BOX, "--model-options", options,
                             "--out", tmp_path / "pred.npz")
        _assert_one_line(code, err, fragment, "segment")


@pytest.mark.parametrize("args, fragment", [
    (["--limit", "0"], "argument --limit: must be 1 or more"),
    (["--limit", "-2"], "argument --limit: must be 1 or more"),
    (["--workers", "0"], "argument --workers: must be 1 or more"),
    (["--seed", "-1"], "argument --seed: must be a whole number from 0 to 9223372036854775807"),
    (["--seed", str(2**63)], "argument --seed: must be a whole number from 0 to 9223372036854775807"),
    (["--seed", str(2**64)], "argument --seed: must be a whole number from 0 to 9223372036854775807"),
    (["--gpus-per-worker", "nan"], "argument --gpus-per-worker: not a finite number"),
    (["--protocol-options", '{"margin": "five"}'], "margin must be an integer, got 'five'"),
    (["--protocol-options", '{"margin": true}'], "margin must be an integer, got True"),
    (["--protocol-options", '{"margin": 2.5}'], "margin must be an integer, got 2.5"),
    (["--protocol-options", '{"margin": -1}'], "margin must be a non-negative integer"),
    (["--protocol-options", '{"key_slice": 5}'], "key_slice must be text, got 5"),
    (["--protocol-options", '{"key_slcie": "middle"}'], "unknown option(s) ['key_slcie']; the options are"),
    (["--protocol-options", "[1, 2]"], "--protocol-options must be a JSON object"),
    (["--propagation", '{"hold": 1.5}'], "hold must be an integer (or null), got 1.5"),
])
def test_bad_options_to_run_are_refused_before_work(tmp_path, shared_data, capsys, args, fragment):
    """Refused when the options are parsed, with the option named; a seed too large for the table or for
    numpy too (it ended in an internal error after every case ran)."""
    out = tmp_path / "run"
    code, err = _run_cli(capsys, "run", shared_data / "hippocampus_mri", "--model", "box", "--out", out,
                         "--quiet", *args)
    _assert_one_line(code, err, fragment, "run")
    assert not out.exists(), "a refused run leaves no folder"


@pytest.mark.parametrize("command", [["propagation-study", "--limit", "-1"], ["prompt-study", "--limit", "0"],
                                     ["compare", "--resamples", "0"], ["report", "--worst", "-1"],
                                     ["prompt-study", "--seed", str(2**80)], ["prompt-study", "--seed", str(2**32)],
                                     ["compare", "--seed", str(2**63)]])
def test_counts_are_whole_and_in_range_everywhere(tmp_path, shared_data, capsys, command):
    name, *flags = command
    positional = {"propagation-study": [shared_data / "hippocampus_mri", "--out", tmp_path / "o"],
                  "prompt-study": [shared_data / "kvasir_seg_2d", "--out", tmp_path / "o"],
                  "compare": [tmp_path, tmp_path], "report": [tmp_path]}[name]
    code, err = _run_cli(capsys, name, *positional, *flags)
    _assert_one_line(code, err, f"argument {flags[0]}", name)


# -- results that are valid but mean little say so ------------------------------------------------------------


def test_a_constant_image_and_an_empty_mask_are_named(tmp_path, shared_data, capsys):
    """A CT with no intensity variation segmented from a box: the mask is written, with a warning naming
    the constant image; a run over it notes the rows; a box on an empty region warns of the empty mask."""
    with np.load(shared_data / "deeplesion_ct_npz" / LESION) as data:
        imgs, gts, spacing = data["imgs"], data["gts"], data["spacing"]
    flat = tmp_path / "flat" / "flat.npz"
    flat.parent.mkdir()
    np.savez_compressed(flat, imgs=np.full_like(imgs, 40), gts=gts, spacing=spacing)
    code = main(["segment", str(flat), "--model", "box", *BOX, "--out", str(tmp_path / "pred.npz")])
    err = capsys.readouterr().err
    assert code == 0 and "warning: constant image" in err
    table = run_benchmark(flat.parent, tmp_path / "run", "box")
    assert all("constant image" in notes for notes in table["notes"])
    code = main(["score", str(shared_data / "deeplesion_ct_npz" / LESION), str(shared_data / "deeplesion_ct_npz" / LESION),
                 "--labels", "0", "1"])
    assert code == 0 and "warning: label 0 is the background" in capsys.readouterr().err


def test_special_files_are_refused_not_read(tmp_path, capsys):
    """A named pipe would block the first read for ever, a device never ends: both are refused at once."""
    fifo = tmp_path / "scan.nii.gz"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a named pipe"), (Path("/dev/null"), "a character device")):
        code, err = _run_cli(capsys, "info", path)
        _assert_one_line(code, err, f"not a regular file ({kind})", "info")


def test_an_unreachable_ray_address_is_refused_at_once(tmp_path, shared_data, capsys):
    """ray.init retries an address nobody answers for minutes; the run refuses it before any work."""
    code, err = _run_cli(capsys, "run", shared_data / "hippocampus_mri", "--model", "box", "--out", tmp_path / "run",
                         "--executor", "ray", "--ray-address", "127.0.0.1:1", "--quiet")
    _assert_one_line(code, err, "Ray address '127.0.0.1:1': nothing answers there", "run")
    code, err = _run_cli(capsys, "run", shared_data / "hippocampus_mri", "--model", "box", "--out", tmp_path / "run",
                         "--executor", "ray", "--ray-address", "nowhere", "--quiet")
    _assert_one_line(code, err, "is not host:port", "run")
    assert not (tmp_path / "run").exists()


def test_the_engine_given_twice_must_agree(tmp_path, shared_data, capsys):
    code, err = _run_cli(capsys, "segment", shared_data / "deeplesion_ct_npz" / LESION, "--model", "litemedsam",
                         *BOX, "--engine", "openvino", "--model-options", '{"engine": "torch"}',
                         "--out", tmp_path / "pred.npz")
    _assert_one_line(code, err, "--engine openvino and --model-options engine 'torch' disagree", "segment")


@pytest.mark.parametrize("study, name", [("propagation-study", "rows.csv"), ("prompt-study", "mode_table.md")])
def test_the_studies_never_replace_a_users_file(tmp_path, shared_data, capsys, study, name):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / name).write_text("my own notes\n")
    dataset = shared_data / ("hippocampus_mri" if study == "propagation-study" else "kvasir_seg_2d")
    code, err = _run_cli(capsys, study, dataset, "--out", folder, "--limit", "1", "--quiet")
    _assert_one_line(code, err, f"would replace {name}, which medsam-eval did not write there", study)
    assert (folder / name).read_text() == "my own notes\n"


def test_the_largest_seed_runs(tmp_path, capsys):
    """2**63 - 1, the largest seed --seed takes, runs and is recorded as given."""
    out = tmp_path / "run"
    assert main(["run", str(Path(__file__).resolve().parents[1] / "sample_data" / "phantom_2d"), "--model", "box", "--out", str(out), "--quiet",
                 "--no-report", "--seed", str(2**63 - 1)]) == 0
    assert int(load_table(out)["seed"].iloc[0]) == 2**63 - 1


def test_dataset_json_entries_outside_the_dataset_are_refused_per_case(tmp_path, shared_data, capsys):
    """An MSD ``dataset.json`` listing a case by ``../..`` and one by an absolute path elsewhere: each of those
    cases is a failed row naming the file (the others are scored); with --allow-outside they are read too.
    Nothing outside the run folder changes (md5 of every file)."""
    source = shared_data / "hippocampus_mri"
    root, outside = tmp_path / "data" / "hippo", tmp_path / "elsewhere"
    for folder in ("imagesTr", "labelsTr"):
        (root / folder).mkdir(parents=True)
        (outside / folder).mkdir(parents=True)
    names = ("hippocampus_001", "hippocampus_004", "hippocampus_007")
    for name, where in zip(names, (root, outside, outside)):
        for folder in ("imagesTr", "labelsTr"):
            shutil.copy(source / folder / f"{name}.nii.gz", where / folder)
    info = json.loads((source / "dataset.json").read_text())
    info["training"] = [
        {"image": "./imagesTr/hippocampus_001.nii.gz", "label": "./labelsTr/hippocampus_001.nii.gz"},
        {"image": "../../elsewhere/imagesTr/hippocampus_004.nii.gz",
         "label": "../../elsewhere/labelsTr/hippocampus_004.nii.gz"},
        {"image": str(outside / "imagesTr" / "hippocampus_007.nii.gz"),
         "label": str(outside / "labelsTr" / "hippocampus_007.nii.gz")}]
    (root / "dataset.json").write_text(json.dumps(info))
    before = {p: hashlib.md5(p.read_bytes()).hexdigest() for p in tmp_path.rglob("*") if p.is_file()}
    assert main(["run", str(root), "--model", "box", "--out", str(tmp_path / "run"), "--quiet", "--no-report"]) == 0
    table = load_table(tmp_path / "run")
    failed = table[table["status"] == "failed"]
    assert sorted(set(failed["case_id"])) == ["hippocampus_004", "hippocampus_007"]
    assert all("outside the dataset folder" in e and "--allow-outside" in e for e in failed["error"])
    assert "../../elsewhere/imagesTr/hippocampus_004.nii.gz" in " ".join(failed["error"])
    assert set(table.loc[table["case_id"] == "hippocampus_001", "status"]) == {"ok"}
    assert main(["run", str(root), "--model", "box", "--out", str(tmp_path / "allowed"), "--quiet", "--no-report",
                 "--allow-outside"]) == 0
    allowed = load_table(tmp_path / "allowed")
    assert set(allowed["status"]) == {"ok"} and allowed["case_id"].nunique() == 3
    assert json.loads((tmp_path / "allowed" / "manifest.json").read_text())["config"]["allow_outside"] is True
    after = {p: hashlib.md5(p.read_bytes()).hexdigest() for p in before}
    assert after == before
    capsys.readouterr()


# ------------------------------------------------------------ issue 44: the decoded-size limit, every reader
#: a limit of 10 KB (--max-decoded-gb is in GB): every small file below is above it
TINY_LIMIT = "0.00001"


def _limit_dicom(folder: Path, shared: Path) -> Path:
    from dicom_series import write_series

    volume = sitk.Cast(sitk.ReadImage(str(_image(shared))), sitk.sitkInt16)
    write_series(volume, folder / "series", "1.2.826.0.1.3680043.2.1125.44")
    return folder / "series"


def _limit_frames(folder: Path) -> Path:
    (folder / "frames").mkdir()
    for t in range(3):
        imageio_write(folder / "frames" / f"frame{t}.png", np.full((40, 50), t * 40, np.uint8))
    return folder / "frames"


def imageio_write(path: Path, array: np.ndarray) -> Path:
    import imageio.v3 as iio

    iio.imwrite(path, array)
    return path


LIMITED: list[tuple[str, Callable[[Path, Path], Path], str]] = [
    ("npz", lambda f, s: _npz(f, imgs=np.zeros((20, 30, 40), np.uint8)), "arrays of 24.0 KB in all"),
    ("NIfTI gz", lambda f, s: _image(s), "35 x 51 x 35 voxels of 8-bit unsigned integer (62.5 KB)"),
    ("NRRD", lambda f, s: _write_like(_array(_image(s)), _image(s), f / "big.nrrd"), "(62.5 KB)"),
    ("MHA", lambda f, s: _write_like(_array(_image(s)), _image(s), f / "big.mha"), "(62.5 KB)"),
    ("DICOM series", _limit_dicom, "a series of 35 x 51 x 35 voxels of 16-bit signed integer (125.0 KB)"),
    ("video", lambda f, s: _video(f / "big.avi", frames=10), "10 frames of 64 x 48 RGB (92.2 KB)"),
    ("PNG", lambda f, s: imageio_write(f / "big.png", np.zeros((100, 120, 3), np.uint8)),
     "120 x 100 pixels of mode RGB (36.0 KB)"),
    ("frame folder", lambda f, s: _limit_frames(f), "3 frames of 50 x 40 pixels of mode L (6.0 KB)"),
]


@pytest.mark.parametrize("name, make, fragment", LIMITED, ids=[item[0] for item in LIMITED])
def test_every_reader_refuses_a_decoded_size_above_the_limit(tmp_path, shared_data, capsys, name, make, fragment):
    """``--max-decoded-gb`` (and MEDSAM_EVAL_MAX_IMAGE_GB) refuses from the header alone: one ``error:`` line naming
    the file, its decoded size, the limit and how to raise it; exit 2; with the default limit the file reads."""
    path = make(tmp_path, shared_data)
    limit = "0.000005" if name == "frame folder" else TINY_LIMIT
    assert main(["info", str(path), "--max-decoded-gb", limit]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {path}: header declares "), err
    assert fragment in errors[0] and "above the memory ceiling of" in errors[0], err
    assert "refused before allocating; raise it with --max-decoded-gb GB or MEDSAM_EVAL_MAX_IMAGE_GB=GB" in err
    assert "Traceback" not in err and "internal error" not in err
    assert main(["info", str(path)]) == 0
    capsys.readouterr()


def test_run_records_an_image_above_the_limit_as_a_failed_row(tmp_path, shared_data, capsys):
    """A dataset case whose image is above ``--max-decoded-gb`` is a failed row naming the file and the limit;
    the other cases are scored."""
    root = tmp_path / "hippo"
    for folder in ("imagesTr", "labelsTr"):
        (root / folder).mkdir(parents=True)
    shutil.copy(_image(shared_data), root / "imagesTr")
    shutil.copy(_label(shared_data), root / "labelsTr")
    big = np.kron(_array(_image(shared_data)), np.ones((2, 2, 2), np.uint8))  # 8x the voxels: 500 KB
    big_label = np.kron(_array(_label(shared_data)), np.ones((2, 2, 2), np.uint8))
    for array, folder in ((big, "imagesTr"), (big_label, "labelsTr")):
        sitk.WriteImage(sitk.GetImageFromArray(array), str(root / folder / "hippocampus_900.nii.gz"))
    shutil.copy(shared_data / "hippocampus_mri" / "dataset.json", root)
    assert main(["run", str(root), "--model", "box", "--out", str(tmp_path / "run"), "--quiet", "--no-report",
                 "--max-decoded-gb", "0.0002"]) == 0
    table = load_table(tmp_path / "run")
    failed = table[table["status"] == "failed"]
    assert set(failed["case_id"]) == {"hippocampus_900"}
    assert all("above the memory ceiling of 200.0 KB" in e and "--max-decoded-gb" in e for e in failed["error"])
    assert set(table.loc[table["case_id"] == CASE, "status"]) == {"ok"}
    capsys.readouterr()


# -- issue 44: a results table edited by hand, read by report and compare -------------------------------------




def _csv_records(path: Path) -> tuple[list[str], list[list[str]]]:
    import csv

    with open(path, newline="", encoding="utf-8") as stream:
        header, *records = list(csv.reader(stream))
    return header, records


def _hand_edit(run: Path, folder: Path, edit: str) -> tuple[Path, str, tuple[str, int] | None]:
    """``run``'s results.csv alone (a table made elsewhere) in ``folder``, edited by hand: the CSV, the
    message fragment naming the bad line, and the (case, label) a lenient reading leaves out (None: no row lost)."""
    import csv
    import io

    folder.mkdir()
    shutil.copy(run / "manifest.json", folder)
    header, records = _csv_records(run / "results.csv")
    assert len((run / "results.csv").read_text().splitlines()) == len(records) + 1  # one line per record
    case, label = header.index("case_id"), header.index("target_label")
    line_of = lambda index: index + 2  # noqa: E731 - after the header, one line per record
    if edit == "duplicated row":
        records.append(list(records[1]))
        fragment = (f"line {line_of(len(records) - 1)}: case {records[1][case]} label {records[1][label]} appears "
                    f"again (first at line {line_of(1)})")
        lost = None
    elif edit == "dice as text":
        records[2][header.index("dice")] = "0.8x"
        fragment, lost = f"line {line_of(2)}: dice holds '0.8x', not a number", (records[2][case], records[2][label])
    else:  # a row cut short
        lost = (records[3][case], records[3][label])
        records[3] = records[3][:10]
        fragment = f"line {line_of(3)}: a row cut short: 10 of the header's {len(header)} fields"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *records])
    (folder / "results.csv").write_text(out.getvalue(), encoding="utf-8")
    return folder / "results.csv", fragment, None if lost is None else (lost[0], int(lost[1]))


@pytest.mark.parametrize("edit", ["duplicated row", "dice as text", "row cut short"])
def test_a_hand_edited_results_table_is_refused_or_skipped_and_counted(box_run, tmp_path, capsys, edit):
    """Refused by ``report`` and ``compare`` in one line naming the file and the line; with --lenient the row
    is skipped, a warning line and the report say how many and why, and every count is the rows kept (a
    duplicated row is no longer counted twice, a dice of text no longer left out of the median only)."""
    from napari_medsam_eval.report import summarize_tasks

    csv_path, fragment, lost = _hand_edit(box_run, tmp_path / "edited", edit)
    folder = csv_path.parent
    for command in (["report", folder], ["compare", box_run, folder, "--resamples", "10"]):
        code, err = _run_cli(capsys, *command)
        _assert_one_line(code, err, fragment, command[0])
        assert f"error: {csv_path}: " in err and "--lenient" in err
    assert not (folder / "report.md").exists()

    original = load_table(box_run / "results.csv")
    kept = original if lost is None else original[~(original["case_id"].eq(lost[0])
                                                    & original["target_label"].eq(lost[1]))]
    rows = len(_csv_records(csv_path)[1])
    said = f"1 of {rows} rows of results.csv skipped (--lenient)"
    code, err = _run_cli(capsys, "report", folder, "--lenient")
    assert code == 0 and f"warning: {said}" in err and fragment.split(": ", 1)[1].split(" (first")[0] in err
    report = (folder / "report.md").read_text()
    assert f"warning: {said}" in report and f"results: results.csv, {len(kept)} rows" in report
    assert (folder / "task_summary.csv").read_text() == summarize_tasks(kept.reset_index(drop=True)).to_csv(index=False)
    code, err = _run_cli(capsys, "compare", box_run, folder, "--resamples", "10", "--lenient")
    assert code == 0 and f"warning: B: {said}" in err


@pytest.mark.parametrize("target", ["a user's own mask", "a label of a dataset folder"])
def test_segment_out_never_replaces_a_file_it_did_not_write(tmp_path, shared_data, capsys, target):
    """``segment --out`` onto a user's file is refused unless --overwrite; a dataset's label even then
    (both replaced before issue 44; tests/test_no_overwrite.py has every writer)."""
    if target == "a user's own mask":
        out = tmp_path / "my_manual_label.nii.gz"
        shutil.copy(_label(shared_data), out)
    else:
        dataset = _dataset_with(tmp_path / "none", "image", shared_data, tmp_path / "data")
        out = dataset / "labelsTr" / f"{OTHER}.nii.gz"
        out.unlink()
        shutil.copy(_label(shared_data), out)  # a real file (the others are links to the shared data)
    before = hashlib.md5(out.read_bytes()).hexdigest()
    args = ["segment", _image(shared_data), "--model", "box", "--box", "5", "5", "20", "20", "--out", out]
    _assert_one_line(*_run_cli(capsys, *args), str(out), "segment")
    assert hashlib.md5(out.read_bytes()).hexdigest() == before
    code, err = _run_cli(capsys, *args, "--overwrite")
    if target == "a user's own mask":
        assert code == 0 and hashlib.md5(out.read_bytes()).hexdigest() != before, err
    else:
        _assert_one_line(code, err, "dataset", "segment --overwrite")
        assert hashlib.md5(out.read_bytes()).hexdigest() == before
