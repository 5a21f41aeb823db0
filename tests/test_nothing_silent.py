"""Issue 57, "nothing silently wrong": each fault a user met ends in one clear line and a non-zero exit, never in
a success that is not one.

A full disk (a tmpfs of 40 KB in a private mount namespace, ``unshare -rm``), a changed file of the same size
under ``--resume``, a hand-edited table without a column, the API given NaN / non-binary masks or a spacing of
unknown order, a missing run folder, a report of a run still going, a seed out of range, a non-UTF-8 file name,
a bad ``MEDSAM_EVAL_MAX_IMAGE_GB``, a file name of 250 bytes, a manifest of another format; and the smaller ones:
file modes that follow the umask, no lock file left, paths named, a DICOM folder's series chosen on the command
line, argparse's refusals in two lines, a label in neither map, one exception family.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import SimpleITK as sitk

from napari_medsam_eval import api
from napari_medsam_eval.benchmark import load_table, run_benchmark
from napari_medsam_eval.benchmark.run_lock import RunLock
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.case import Spacing
from napari_medsam_eval.core.errors import DataError, InputError, MedsamEvalError, OptionError

CASES = ("hippocampus_001", "hippocampus_004")


@pytest.fixture
def hippo2(tmp_path: Path, shared_data: Path) -> Path:
    source, root = shared_data / "hippocampus_mri", tmp_path / "hippo2"
    for folder in ("imagesTr", "labelsTr"):
        (root / folder).mkdir(parents=True)
        for case in CASES:
            shutil.copy(source / folder / f"{case}.nii.gz", root / folder)
    shutil.copy(source / "dataset.json", root)
    return root


def _cli(*args: str, env: dict | None = None, preexec=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "napari_medsam_eval", *args], capture_output=True, text=True,
                          timeout=300, env=env, preexec_fn=preexec)


def _one_line_error(process: subprocess.CompletedProcess) -> str:
    assert process.returncode == 2, (process.returncode, process.stderr[-2000:])
    lines = [line for line in process.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in process.stderr and "internal error" not in process.stderr, \
        process.stderr[-2000:]
    return lines[0]


def _unshare_available() -> bool:
    return shutil.which("unshare") is not None and \
        subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


# -- 1. a full disk is never a success ---------------------------------------------------------------------------

@pytest.mark.slow
def test_a_run_whose_tables_do_not_fit_fails_and_resume_writes_them(tmp_path, hippo2):
    assert _unshare_available(), "this test needs `unshare -rm` (util-linux, user namespaces) to fill a disk"
    disk = tmp_path / "disk"
    disk.mkdir()
    out = disk / "run"
    args = ["run", str(hippo2), "--model", "box", "--quiet", "--no-report", "--out", str(out)]
    command = " ".join(f"'{part}'" for part in [sys.executable, "-m", "napari_medsam_eval", *args])
    # 40 KB: the rows (results.jsonl) and the manifest fit, the parquet table does not
    full = subprocess.run(["unshare", "-rm", "bash", "-c", f'mount -t tmpfs -o size=40k tmpfs "{disk}" && {command}; '
                           f'echo "status=$?"; cat "{out}/manifest.json"; echo; cat "{out}/run.log"; ls -a "{out}"'],
                          capture_output=True, text=True, timeout=300)
    assert "status=2" in full.stdout, full.stdout + full.stderr
    error = [line for line in full.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "No space left on device" in error[0] and "--resume" in error[0], full.stderr
    assert "results: " not in full.stdout  # no claim of a results file
    assert '"status": "completed"' not in full.stdout and "completed" not in full.stdout.split("run.log", 1)[-1]
    assert "results.jsonl" in full.stdout and "results.csv" not in full.stdout
    # the same run with room: everything on disk, exit 0
    done = _cli(*args[:-1], str(tmp_path / "room"))
    assert done.returncode == 0, done.stderr
    assert {"results.csv", "results.parquet", "manifest.json"} <= {p.name for p in (tmp_path / "room").iterdir()}


def test_a_run_whose_tables_cannot_be_written_raises_and_says_failed(tmp_path, hippo2, monkeypatch):
    """In-process (no mount needed): the tables' write refused, the run is a DataError, run.log and the manifest
    say failed; --resume then writes the tables."""
    import napari_medsam_eval.benchmark.runner as runner

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device", str(tmp_path / "run" / "results.parquet"))

    monkeypatch.setattr(runner, "write_tables", full)
    with pytest.raises(DataError, match="tables and manifest could not be written.*No space left.*--resume"):
        run_benchmark(hippo2, tmp_path / "run", "box")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "results.jsonl holds every finished case" in manifest["error"]
    assert "completed" not in (tmp_path / "run" / "run.log").read_text()
    monkeypatch.undo()
    table = run_benchmark(hippo2, tmp_path / "run", "box", resume=True)
    assert len(table) == 4 and (tmp_path / "run" / "results.csv").is_file()


# -- 2. a changed dataset is never resumed as it was --------------------------------------------------------------

def test_resume_redoes_a_case_whose_file_changed_keeping_its_size(tmp_path, hippo2, capsys):
    for case in CASES:  # uncompressed: a changed label keeps its byte count
        for folder in ("imagesTr", "labelsTr"):
            path = hippo2 / folder / f"{case}.nii.gz"
            sitk.WriteImage(sitk.ReadImage(str(path)), str(path.with_suffix("")), False)
            path.unlink()
    label = hippo2 / "labelsTr" / "hippocampus_001.nii"
    out = tmp_path / "run"
    before = run_benchmark(hippo2, out, "box")
    size, mtime = label.stat().st_size, label.stat().st_mtime_ns
    image = sitk.ReadImage(str(label))
    moved = sitk.GetImageFromArray(np.roll(sitk.GetArrayFromImage(image), 3, axis=2))
    moved.CopyInformation(image)
    sitk.WriteImage(moved, str(label), False)
    os.utime(label, ns=(mtime, mtime))  # the time put back too: only the contents tell
    assert label.stat().st_size == size
    resumed = run_benchmark(hippo2, out, "box", resume=True)
    fresh = run_benchmark(hippo2, tmp_path / "fresh", "box")
    pd.testing.assert_series_equal(resumed["dice"], fresh["dice"])
    changed = resumed["case_id"] == "hippocampus_001"
    assert not np.allclose(resumed.loc[changed, "dice"], before.loc[changed, "dice"])
    assert "files changed since they were run" in (out / "run.log").read_text()
    assert "redoing 1 case(s) whose files changed" in capsys.readouterr().err


# -- 3. a broken table is never reported ----------------------------------------------------------------------

@pytest.mark.parametrize("column", ["status", "dice", "task", "case_id"])
def test_a_table_missing_a_column_is_refused_naming_it(tmp_path, hippo2, capsys, column):
    run_benchmark(hippo2, tmp_path / "run", "box")
    edited = tmp_path / "edited"
    edited.mkdir()
    load_table(tmp_path / "run").drop(columns=[column]).to_csv(edited / "results.csv", index=False)
    assert main(["report", str(edited)]) == 2
    err = capsys.readouterr().err
    assert f"column {column} missing" in err and "results.csv" in err
    with pytest.raises(DataError, match=f"column {column} missing"):
        api.load_table(edited)


# -- 4. the API as strict as the CLI ------------------------------------------------------------------------------

def test_score_pair_refuses_what_is_not_a_binary_mask_or_a_spacing_of_known_order(shared_data):
    case = api.read_case(shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz")
    truth = case.label == 1
    good = api.score_pair(truth, truth, case.kind, case.spacing)
    assert good["dice"] == 1.0
    spoiled = truth.astype(float)
    spoiled[0, 0, 0] = np.nan
    bad = {"one NaN": (spoiled, "NaN"), "all NaN": (np.full(truth.shape, np.nan), "NaN"),
           "infinity": (np.where(truth, np.inf, 0.0), "infinite"), "0.5": (truth * 0.5, "0.5"),
           "two labels": (truth.astype(np.uint8) + (np.arange(truth.shape[0]) % 2)[:, None, None] * truth, "label map")}
    for name, (pred, words) in bad.items():
        with pytest.raises(InputError, match=words):
            api.score_pair(pred, truth, case.kind, case.spacing)
    with pytest.raises(InputError, match="order is unknown"):  # SimpleITK's x, y, z: HD95 0.314 instead of 0.943
        api.score_pair(truth, np.roll(truth, 2, axis=1), case.kind, case.spacing.xyz())
    assert api.score_pair(truth, truth, case.kind, (1.0, 1.0, 1.0))["dice"] == 1.0  # equal values: no order to get wrong
    with pytest.raises(InputError, match="for 'zyx' axes, a video"):
        api.score_pair(truth, truth, "video", case.spacing)
    with pytest.raises(MedsamEvalError):
        api.match_lesions(spoiled, truth, case.kind, case.spacing)


def test_load_table_of_no_run_is_an_error(tmp_path):
    with pytest.raises(DataError, match="run folder not found"):
        api.load_table(tmp_path / "missing")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a run")
    with pytest.raises(DataError, match="not a run folder"):
        api.load_table(tmp_path / "notes")


def test_one_exception_family_for_what_a_user_can_cause(tmp_path):
    with pytest.raises(MedsamEvalError):
        api.score_pair(np.zeros((3, 3), bool), np.zeros((4, 4), bool), "image", (1.0, 1.0))
    with pytest.raises(MedsamEvalError):
        api.build_model("no-such-model")
    with pytest.raises(MedsamEvalError) as refused:
        api.run_benchmark(api.RunConfig(tmp_path, tmp_path / "run", workers=0))
    assert isinstance(refused.value, ValueError)  # still a ValueError, as it was


# -- 6. a report of a run that has not ended says so ----------------------------------------------------------

def test_report_of_a_run_still_going_or_killed_says_so(tmp_path, hippo2, capsys):
    out = tmp_path / "run"
    run_benchmark(hippo2, out, "box")
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    with RunLock(out):  # another process writing into it
        assert main(["report", str(out)]) == 0
    assert "warning: the run is still going" in capsys.readouterr().err
    assert main(["report", str(out)]) == 0  # "running", no one holds it: killed
    err = capsys.readouterr().err
    assert "the run stopped without ending" in err and "--resume" in err
    assert "the run stopped without ending" in (out / "report.md").read_text()


# -- 7. a seed out of range is refused before any work -----------------------------------------------------------

def test_a_seed_out_of_range_is_refused_before_any_work(tmp_path, hippo2):
    for seed in (2**64, -1, 1.5, True):
        with pytest.raises(OptionError, match="seed must be a whole number"):
            api.run_benchmark(api.RunConfig(hippo2, tmp_path / "run", model="box", seed=seed))
    assert not (tmp_path / "run").exists()


# -- 8. a file name that is not UTF-8 ----------------------------------------------------------------------------

def test_a_file_name_that_is_not_utf8_is_refused_naming_it(tmp_path, hippo2):
    bad = os.fsdecode(b"hippocampus_004\xff")
    for folder in ("imagesTr", "labelsTr"):
        (hippo2 / folder / "hippocampus_004.nii.gz").rename(hippo2 / folder / f"{bad}.nii.gz")
    image = hippo2 / "imagesTr" / f"{bad}.nii.gz"
    for args in (["info", str(image)],
                 ["segment", str(hippo2 / "imagesTr" / "hippocampus_001.nii.gz"), "--model", "box", "--box", "5", "5",
                  "20", "20", "--slice", "10", "--out", str(tmp_path / f"{bad}.nii.gz")],
                 ["run", str(hippo2), "--model", "box", "--quiet", "--out", str(tmp_path / "run")]):
        line = _one_line_error(_cli(*args))  # (SimpleITK used to abort the process: exit 134)
        assert "hippocampus_004\\xff" in line or "\\xff.nii.gz" in line
        assert "not valid UTF-8; rename it" in line
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir() if p.is_file())  # no temporary left


# -- 9. a bad decoded-size ceiling is refused, not failed case by case -------------------------------------------

@pytest.mark.parametrize("value", ["abc", "0"])
def test_a_bad_max_image_gb_is_refused_at_the_start(tmp_path, hippo2, shared_data, value, monkeypatch):
    env = {**os.environ, "MEDSAM_EVAL_MAX_IMAGE_GB": value}
    line = _one_line_error(_cli("run", str(hippo2), "--model", "box", "--quiet", "--out", str(tmp_path / "run"),
                                env=env))
    assert "MEDSAM_EVAL_MAX_IMAGE_GB" in line and not (tmp_path / "run").exists()
    line = _one_line_error(_cli("prompt-study", str(shared_data / "kvasir_seg_2d"), "--limit", "1", "--quiet",
                                "--out", str(tmp_path / "study"), env=env))
    assert "MEDSAM_EVAL_MAX_IMAGE_GB" in line
    monkeypatch.setenv("MEDSAM_EVAL_MAX_IMAGE_GB", value)
    with pytest.raises(OptionError, match="MEDSAM_EVAL_MAX_IMAGE_GB"):
        api.run_benchmark(api.RunConfig(hippo2, tmp_path / "api_run", model="box"))


# -- 10. a long legal file name works; one too long is refused before the model ---------------------------------

def test_a_file_name_of_250_bytes_is_written_and_one_of_260_refused_first(tmp_path, shared_data, capsys, monkeypatch):
    import napari_medsam_eval.cli.segment as segment_cli

    image = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    args = ["segment", str(image), "--model", "box", "--box", "5", "5", "20", "20", "--slice", "10", "--out"]
    long_name = tmp_path / ("a" * 243 + ".nii.gz")  # 250 bytes
    assert main([*args, str(long_name)]) == 0, capsys.readouterr().err
    assert long_name.is_file()
    monkeypatch.setattr(segment_cli, "build_backend", lambda *a, **k: pytest.fail("the model was built first"))
    assert main([*args, str(tmp_path / ("a" * 253 + ".nii.gz"))]) == 2
    assert "the file name is 260 bytes, more than a file name may have (255)" in capsys.readouterr().err


# -- 11. a manifest of another format is never reported as if it were one -----------------------------------------

@pytest.mark.parametrize("found", [0, 2, 99, "1", None, "missing"])
def test_a_manifest_of_another_format_is_refused(tmp_path, hippo2, capsys, found):
    out = tmp_path / "run"
    run_benchmark(hippo2, out, "box")
    manifest = json.loads((out / "manifest.json").read_text())
    if found == "missing":
        manifest.pop("format")
    else:
        manifest["format"] = found
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert main(["report", str(out)]) == 2
    assert "this version of medsam-eval reads format 1" in capsys.readouterr().err
    assert main(["compare", str(out), str(out)]) == 2
    assert main(["run", str(hippo2), "--model", "box", "--out", str(out), "--resume", "--quiet"]) == 2


# -- and the smaller ones ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_a_run_folder_follows_the_umask_and_leaves_no_lock(tmp_path, hippo2, umask):
    out = tmp_path / f"run_{umask:o}"
    done = _cli("run", str(hippo2), "--model", "box", "--quiet", "--save-predictions", "--out", str(out),
                preexec=lambda: os.umask(umask))
    assert done.returncode == 0, done.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"results.csv", "results.parquet", "manifest.json", "report.md"} <= {p.name for p in files}
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path
    for folder in [out / "predictions", out / "figures"]:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask, folder
    assert not (out / ".run.lock").exists()


def test_small_refusals_name_what_they_refuse(tmp_path, shared_data, capsys):
    from dicom_series import write_series

    image = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    assert main(["segment", str(image), "--model", "box", "--box", "5", "5", "20", "20", "--slice", "10",
                 "--out", str(a_file / "x.nii.gz")]) == 2
    assert f"{a_file}: is a file, not a folder" in capsys.readouterr().err
    # argparse's refusal: its line and where the options are, not the whole usage
    assert main(["run", str(tmp_path), "--model", "nope", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("error: medsam-eval run: argument --model") and "--help" in err[1]
    # a label in neither map
    label = shared_data / "hippocampus_mri" / "labelsTr" / "hippocampus_001.nii.gz"
    assert main(["score", str(label), str(label), "--labels", "7"]) == 2
    assert "label 7 in neither the prediction nor the ground truth (labels they hold: 1, 2)" in capsys.readouterr().err
    # a DICOM folder of two series: chosen on the command line
    volume = sitk.Cast(sitk.ReadImage(str(image)), sitk.sitkInt16)
    folder = tmp_path / "two"
    write_series(volume[:, :, :5], folder, "1.2.826.0.1.3680043.2.1125.1", prefix="a")
    write_series(volume[:, :, :7], folder, "1.2.826.0.1.3680043.2.1125.2", prefix="b")
    assert main(["info", str(folder)]) == 2
    assert "--series-id UID" in capsys.readouterr().err
    assert main(["info", str(folder), "--series-id", "1.2.826.0.1.3680043.2.1125.2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["shape"][0] == 7


def test_os_errors_name_their_path():
    from napari_medsam_eval.core.errors import os_error_words

    assert os_error_words(FileExistsError(17, "File exists", "/data/run")) == "/data/run: File exists"
    assert os_error_words(OSError(28, "No space left on device")).startswith("No space left on device")
