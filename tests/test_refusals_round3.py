"""Issue 67, third round of "nothing silently wrong": what a dataset declares is obeyed or refused, hostile files
cost nothing, and internal errors end in one line naming the input.

Each test below failed on main 5e84dbe (an exit 0 scoring the wrong regions, a RecursionError, a MemoryError,
an IndexError, a misleading message) and asserts the one-line refusal now given.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from napari_medsam_eval.api import read_case
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.errors import MedsamEvalError

HIPPO = ("hippocampus_001", "hippocampus_004")


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in "\n".join(err) and "internal error" not in "\n".join(err), err
    return errors[0]


# ------------------------------------------------------------------------------------------------ dataset.json
def _msd(tmp_path: Path, shared: Path, dataset_json: str | None) -> Path:
    """A two-case MSD folder (links to the shared hippocampus files) with ``dataset_json`` as its dataset.json."""
    root = tmp_path / "msd"
    for folder in ("imagesTr", "labelsTr"):
        (root / folder).mkdir(parents=True)
        for case in HIPPO:
            (root / folder / f"{case}.nii.gz").symlink_to(shared / "hippocampus_mri" / folder / f"{case}.nii.gz")
    if dataset_json is not None:
        (root / "dataset.json").write_text(dataset_json)
    return root


BAD_DATASET_JSON = {
    "negative": ('{"labels": {"background": 0, "whole": [1, -2]}}', "'labels' entry 'whole': [1, -2]"),
    "non-integer": ('{"labels": {"background": 0, "core": [2.5]}}', "'labels' entry 'core': [2.5]"),
    "string in a region": ('{"labels": {"background": 0, "whole": [1, "2"]}}', "'labels' entry 'whole': [1, \"2\"]"),
    "nested list": ('{"labels": {"background": 0, "whole": [1, [2]]}}', "'labels' entry 'whole': [1, [2]]"),
    "syntax error": ('{"labels": {"background": 0, "whole": [1, 2],}}', "is not valid JSON"),
    "a JSON list": ('[{"labels": {"1": "anterior"}}]', "holds a JSON list, not an object"),
    "negative single": ('{"labels": {"background": 0, "anterior": -1}}', "'labels' entry 'anterior': -1"),
}


@pytest.mark.parametrize("kind", list(BAD_DATASET_JSON))
def test_a_dataset_json_it_cannot_obey_refuses_the_run_info_and_the_api(tmp_path, shared_data, capsys, kind):
    text, words = BAD_DATASET_JSON[kind]
    root = _msd(tmp_path, shared_data, text)
    out = tmp_path / "run"
    assert main(["run", str(root), "--model", "box", "--out", str(out), "--quiet", "--no-report"]) == 2
    line = _one_line_error(capsys)
    assert str(root / "dataset.json") in line and words in line, line
    assert not out.exists()  # refused before any case: nothing scored as label_1 / label_2
    image = root / "imagesTr" / f"{HIPPO[0]}.nii.gz"
    assert main(["info", str(image)]) == 2
    line = _one_line_error(capsys)
    assert str(root / "dataset.json") in line and words in line, line
    with pytest.raises(MedsamEvalError, match="dataset.json") as refused:
        read_case(image, root / "labelsTr" / f"{HIPPO[0]}.nii.gz")
    assert words in str(refused.value)


def test_a_dataset_json_declaring_regions_is_obeyed(tmp_path, shared_data):
    """The same folder with well-formed regions: the declared regions are the targets, not label_1 / label_2."""
    from napari_medsam_eval.datasets import resolve_layout

    root = _msd(tmp_path, shared_data, '{"labels": {"background": 0, "whole": [1, 2], "back": [2]}}')
    layout = resolve_layout(root, None)
    assert [t.text() for t in layout.dataset_targets(root)] == ["whole=1,2", "back=2"]
    root.joinpath("dataset.json").unlink()
    assert layout.dataset_targets(root) is None  # no file: no error, nothing declared


# ------------------------------------------------------------------- npz: hostile prompt pickles and members
GiB = 1 << 30
#: what a child process may map: a hostile member that is read or expanded ends in MemoryError under it
ADDRESS_LIMIT = 2 * GiB


def _stored_zip(path: Path, members: list[tuple[str, bytes, int, bytes]]) -> Path:
    """A zip of stored (uncompressed) members, each ``prefix + zeros * b"\\0" + suffix``, the zeros left as a
    hole in the file (sparse: a 2 GiB member costs no disk). The CRC of a member with zeros is not computed
    (a hostile file's may be anything; nothing refused here reads that far)."""
    import struct
    import zlib

    central, offset = b"", 0
    with open(path, "wb") as handle:
        for name, prefix, zeros, suffix in members:
            size = len(prefix) + zeros + len(suffix)
            crc = 0 if zeros else zlib.crc32(prefix + suffix)
            raw = name.encode()
            local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, crc, size, size, len(raw), 0) + raw
            handle.write(local + prefix)
            handle.seek(zeros, 1)
            handle.write(suffix)
            central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0x21, crc, size, size,
                                   len(raw), 0, 0, 0, 0, 0, offset) + raw
            offset += len(local) + size
        handle.write(central)
        handle.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), offset, 0))
    return path


def _npy(array: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _object_array(*items) -> np.ndarray:
    array = np.empty(len(items), dtype=object)
    for index, item in enumerate(items):
        array[index] = item
    return array


def _small_imgs() -> tuple[str, bytes, int, bytes]:
    return ("imgs.npy", _npy(np.zeros((3, 8, 8), np.uint8)), 0, b"")


def _bounded_cli(tmp_path: Path, *args: str) -> tuple[int, str]:
    """``medsam-eval *args`` in a child process that may map at most :data:`ADDRESS_LIMIT` (exit status, stderr)."""
    script = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({ADDRESS_LIMIT}, {ADDRESS_LIMIT}))
        from napari_medsam_eval.cli import main
        sys.exit(main({list(args)!r}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    return done.returncode, done.stderr


def _shared_list_bomb(levels: int) -> list:
    value: list = [1]
    for _ in range(levels):
        value = [value, value]  # a few hundred bytes pickled (shared references), 2**40 items copied
    return value


def _nested(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def _self_reference() -> list:
    value: list = ["clicks"]
    value.append(value)
    return value


class _ShortObjectState:
    """Pickles as an object array of 10 elements whose state lists 2 (numpy reads past the list: a crash)."""

    def __reduce__(self):
        rebuild = np.ndarray.__reduce__(np.zeros(1))[0]
        return rebuild, (np.ndarray, (0,), b"b"), (1, (10,), np.dtype(object), False, [1, 2])


class _HugeShape:
    """Pickles as an array of a terabyte of float64 (numpy would allocate it)."""

    def __reduce__(self):
        rebuild = np.ndarray.__reduce__(np.zeros(1))[0]
        return rebuild, (np.ndarray, (1 << 37,), b"f8")


HOSTILE_PROMPTS = {
    "[x, x] nested 40 levels": (lambda: _object_array(_shared_list_bomb(40)), "more than 32 levels"),
    "[x, x] nested 25 levels": (lambda: _object_array(_shared_list_bomb(25)), "values once its shared references"),
    "a list holding itself": (lambda: _object_array(_self_reference()), "holds itself"),
    "nested 200 levels": (lambda: _object_array(_nested(200)), "more than 32 levels"),
    "object state shorter than its shape": (lambda: _object_array(_ShortObjectState()), "one item per element"),
    "a terabyte array shape": (lambda: _object_array(_HugeShape()), "above the 67.1 MB a prompt array may take"),
    "1.1 million objects": (lambda: _object_array([None] * 1_100_000), "more than 1,000,000 operations"),
    "an integer of 100,001 bits": (lambda: _object_array([1 << 100_000]), "an integer of 100,001 bits"),
}


@pytest.mark.parametrize("kind", list(HOSTILE_PROMPTS))
def test_a_hostile_prompt_pickle_is_refused_before_it_costs_anything(tmp_path, kind):
    """Under a 2 GiB address-space limit the read ends with one line naming the file and the key, not
    MemoryError, RecursionError or a crash (all of which 5e84dbe gave)."""
    build, words = HOSTILE_PROMPTS[kind]
    path = _stored_zip(tmp_path / "CT_hostile.npz", [_small_imgs(), ("clicks.npy", _npy(build()), 0, b"")])
    code, err = _bounded_cli(tmp_path, "info", str(path))
    assert code == 2, err
    assert f"error: {path}: array 'clicks' is a pickle beyond what a prompt key holds" in err and words in err, err
    with pytest.raises(MedsamEvalError, match="array 'clicks'"):
        read_case(path)


def test_a_2_gib_bytes_prompt_is_refused_before_it_is_read(tmp_path):
    marker = b"MARKER"
    whole = _npy(_object_array(marker))
    cut = whole.index(b"C\x06" + marker)  # SHORT_BINBYTES "MARKER" -> BINBYTES of 2 GiB
    size = 2 * GiB - 64
    prefix = whole[:cut] + b"B" + size.to_bytes(4, "little")
    path = _stored_zip(tmp_path / "CT_bytes.npz", [_small_imgs(), ("boxes.npy", prefix, size, whole[cut + 8:])])
    code, err = _bounded_cli(tmp_path, "info", str(path))
    assert code == 2, err
    assert f"error: {path}: array 'boxes' holds a pickle of 2.1 GB, above the 67.1 MB a prompt key may hold" in err, err


def test_the_challenge_prompts_are_still_read_within_the_bounds(tmp_path):
    """What the challenge writes: boxes and clicks as lists of dictionaries of numpy integers."""
    box = {"z_min": 1, "z_max": 4, "z_mid": 3, "z_mid_x_min": 9, "z_mid_y_min": 8, "z_mid_x_max": 25, "z_mid_y_max": 23}
    path = tmp_path / "CT_case.npz"
    np.savez_compressed(path, imgs=np.zeros((6, 40, 40), np.uint8), boxes=[{k: np.int64(v) for k, v in box.items()}],
                        clicks=[{"fg": [[3, 15, 15]], "bg": []}], clicks_order=[["fg"]])
    case = read_case(path)
    assert case.metadata["cvpr25_boxes"] == [box] and case.metadata["clicks"] == [{"fg": [[3, 15, 15]], "bg": []}]


def test_a_cvpr_box_with_a_nan_z_mid_names_file_and_key(tmp_path, capsys):
    box = {"z_min": 1, "z_max": 4, "z_mid": float("nan"), "z_mid_x_min": 9, "z_mid_y_min": 8, "z_mid_x_max": 25,
           "z_mid_y_max": 23}
    path = tmp_path / "CT_nan.npz"
    np.savez_compressed(path, imgs=np.zeros((6, 40, 40), np.uint8), boxes=[box])
    assert main(["info", str(path)]) == 2
    line = _one_line_error(capsys)
    assert line == f"error: {path}: array 'boxes' box 0 (class 1): z_mid is nan, not a whole number of voxels", line


@pytest.mark.parametrize("member", ["a 2 GiB member that is not an array", "an array named without .npy"])
def test_every_npz_member_counts_against_the_decoded_size_limit(tmp_path, member):
    if member.startswith("a 2 GiB"):
        members = [_small_imgs(), ("notes", b"not an array", 2 * GiB, b"")]
        words = "the largest: member 'notes' of 2.1 GB that is not an array"
    else:
        header = _npy(np.zeros((1100, 1000, 1000), np.uint8)[:0])  # the header of an empty array...
        header = header.replace(b"(0, 1000, 1000)", b"(1100, 1000, 1000)")  # ...declaring 1.1 GB, held as a hole
        members = [("imgs", header, 1100 * 1000 * 1000, b"")]
        words = "the largest: array 'imgs' of shape (1100, 1000, 1000) uint8 (1.1 GB)"
    path = _stored_zip(tmp_path / "CT_members.npz", members)
    code, err = _bounded_cli(tmp_path, "info", str(path), "--max-decoded-gb", "1")
    assert code == 2, err
    assert words in err and "above the memory ceiling of 1.0 GB (set by --max-decoded-gb 1.0)" in err, err


# ----------------------------------------------------------------------------------------- sheared NRRD
def _nrrd(path: Path, directions: str) -> Path:
    volume = np.zeros((4, 8, 8), np.uint8)
    volume[1:3, 2:6, 2:6] = 1
    header = (f"NRRD0004\ntype: uint8\ndimension: 3\nspace: left-posterior-superior\nsizes: 8 8 4\n"
              f"space directions: {directions}\nkinds: domain domain domain\nencoding: raw\n"
              "space origin: (0,0,0)\n\n")
    path.write_bytes(header.encode() + volume.tobytes())
    return path


def test_a_sheared_nrrd_is_refused_like_a_sheared_nifti(tmp_path, capsys):
    sheared = _nrrd(tmp_path / "sheared.nrrd", "(1,0,0) (0.5,1,0) (0,0,2)")
    assert main(["info", str(sheared)]) == 2
    line = _one_line_error(capsys)
    assert line == (f"error: {sheared}: its axes are not orthogonal (sheared): axes x and y meet at 63.4 degrees, "
                    "not 90 (direction 1, 0.4472, 0, 0, 0.8944, 0, 0, 0, 1); distances on its voxel grid would be "
                    "wrong: resample it onto orthogonal axes first"), line
    with pytest.raises(MedsamEvalError, match="not orthogonal"):
        read_case(sheared, sheared)
    rotated = _nrrd(tmp_path / "rotated.nrrd", "(0.6,0.8,0) (-0.8,0.6,0) (0,0,2)")  # oblique but orthogonal: read
    assert tuple(read_case(rotated, rotated).spacing) == (2.0, 1.0, 1.0)


# ------------------------------------------------------------- internal errors that are now one line each
SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(scope="module")
def regions_run(tmp_path_factory) -> Path:
    """A box-model run of the sample BraTS-like regions (3 cases x 3 regions: pairs for a bootstrap)."""
    out = tmp_path_factory.mktemp("round3") / "run"
    assert main(["run", str(SAMPLE / "phantom_regions"), "--model", "box", "--out", str(out), "--quiet",
                 "--no-report"]) == 0
    return out


@pytest.mark.parametrize("option", ["--protocol-options", "--model-options", "--propagation"])
def test_an_option_nested_30000_levels_is_refused_by_name(tmp_path, capsys, option):
    deep = "[" * 30_000
    assert main(["run", str(SAMPLE / "phantom_2d"), "--model", "box", "--out", str(tmp_path / "run"), "--quiet",
                 option, deep]) == 2
    line = _one_line_error(capsys)
    assert line.startswith(f"error: {option} must be") and "'[[[[[[" in line and "(30000 characters)" in line, line
    assert len(line) < 400 and not (tmp_path / "run").exists()


def test_compare_with_a_trillion_resamples_is_refused_before_reading(regions_run, capsys):
    assert main(["compare", str(regions_run), str(regions_run), "--resamples", "999999999999"]) == 2
    assert _one_line_error(capsys) == ("error: --resamples must be a whole number of resamples from 1 to 1,000,000 "
                                       "(each keeps one median: 1,000,000 take 8 MB), got 999999999999")
    from napari_medsam_eval.report import compare_runs

    with pytest.raises(MedsamEvalError, match="n_boot must be a whole number of resamples"):
        compare_runs(regions_run, regions_run, n_boot=10**12)


def _edited_copy(run: Path, folder: Path, column: str, cell: str) -> Path:
    """A copy of ``run``'s results.csv (alone in ``folder``) whose first row's ``column`` holds ``cell``."""
    import pandas as pd

    table = pd.read_csv(run / "results.csv", dtype=str, keep_default_na=False)
    table.loc[0, column] = cell
    folder.mkdir()
    table.to_csv(folder / "results.csv", index=False)
    return folder / "results.csv"


@pytest.mark.parametrize("cell, words", [('["a", 0.5]', "slice_dice holds '[\"a\", 0.5]', not a list of numbers"),
                                         ("[[0.5], [0.7]]", "slice_dice holds '[[0.5], [0.7]]', not a list of numbers"),
                                         ("per slice: 0.5", "slice_dice holds 'per slice: 0.5', not a JSON list")])
def test_report_of_a_table_whose_slice_dice_is_not_numbers_names_file_and_line(regions_run, tmp_path, capsys,
                                                                                cell, words):
    table = _edited_copy(regions_run, tmp_path / "edited", "slice_dice", cell)
    assert main(["report", str(table.parent), "--out", str(tmp_path / "report")]) == 2
    line = _one_line_error(capsys)
    assert line.startswith(f"error: {table}: line 2: {words}"), line
    assert main(["report", str(table.parent), "--out", str(tmp_path / "lenient"), "--lenient"]) == 0


def test_load_table_of_a_deeply_nested_json_cell_names_file_line_and_column(regions_run, tmp_path):
    from napari_medsam_eval.api import load_table

    table = _edited_copy(regions_run, tmp_path / "edited", "attributes", "[" * 5000 + "]" * 5000)
    with pytest.raises(MedsamEvalError) as refused:
        load_table(table.parent, parsed=True)
    assert str(refused.value).startswith(f"{table}: line 2: attributes nests 5000 levels of JSON (at most 32 are "
                                         "read)"), refused.value
    assert len(load_table(table.parent, lenient=True)) == 8  # lenient: the row is skipped and counted


# ------------------------------------------------------------------------------------ smaller: messages
def test_explain_on_a_folder_that_is_not_a_run_says_so(tmp_path, capsys):
    folder = tmp_path / "analysis"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    assert main(["explain", str(folder), "--quiet"]) == 2
    assert _one_line_error(capsys) == (f"error: {folder}: not a run folder of medsam-eval (no manifest.json; it holds "
                                       "notes.txt); explain takes a folder that `medsam-eval run` made")


def test_the_cli_says_resume_in_its_own_words(tmp_path, capsys):
    from napari_medsam_eval.benchmark.runner import run_benchmark

    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    assert main(["run", str(SAMPLE / "phantom_2d"), "--model", "box", "--out", str(out), "--quiet"]) == 2
    assert _one_line_error(capsys) == (f"error: {out}: the run folder is not empty; resume it with --resume, or "
                                       "choose a new folder")
    with pytest.raises(MedsamEvalError, match=r"resume it with resume=True, replace the earlier run with "
                                              r"overwrite=True, or choose a new folder"):
        run_benchmark(SAMPLE / "phantom_2d", out, "box")


def test_a_limit_given_by_max_decoded_gb_is_named_as_that_option(tmp_path, shared_data, capsys, monkeypatch):
    monkeypatch.delenv("MEDSAM_EVAL_MAX_IMAGE_GB", raising=False)
    image = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    assert main(["info", str(image), "--max-decoded-gb", "0.00001"]) == 2
    line = _one_line_error(capsys)
    assert "above the memory ceiling of 10.0 KB (set by --max-decoded-gb 1e-05)" in line, line
    monkeypatch.setenv("MEDSAM_EVAL_MAX_IMAGE_GB", "0.00001")
    assert main(["info", str(image)]) == 2
    assert "(set by MEDSAM_EVAL_MAX_IMAGE_GB)" in _one_line_error(capsys)


def test_a_zero_frame_mp4_is_refused_naming_the_file(tmp_path, capsys):
    import av

    path = tmp_path / "empty.mp4"
    with av.open(str(path), "w") as container:  # a stream declared, no frame written
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        container.start_encoding()
    assert main(["info", str(path)]) == 2
    assert _one_line_error(capsys) == (f"error: {path}: cannot be decoded as a video: it holds no video stream (its "
                                       "streams: none), no frame to read or score")


def test_a_full_disk_at_the_report_is_no_clean_success_and_leaves_no_partial_png(tmp_path, capsys, monkeypatch):
    """The disk fills while the report copies its first figure into place: the run's results stand, the command
    exits 3 (docs/guarantees.md) with one line saying so, and no partial temporary PNG is left behind."""
    import errno
    import shutil

    copy = shutil.copyfile

    def full_disk(source, target, *args, **kwargs):
        if Path(target).parent.name == "figures":
            Path(target).write_bytes(Path(source).read_bytes()[:100])  # part of the figure, then no room
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
        return copy(source, target, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", full_disk)
    out = tmp_path / "run"
    assert main(["run", str(SAMPLE / "phantom_2d"), "--model", "box", "--out", str(out), "--quiet"]) == 3
    line = _one_line_error(capsys)
    assert line.startswith(f"error: {out}: the report could not be written (") and "No space left on device" in line
    assert line.endswith(f"the results are complete: `medsam-eval report {out}` writes it"), line
    assert (out / "results.csv").is_file() and json.loads((out / "manifest.json").read_text())["status"] == "completed"
    leftovers = [p.name for p in out.rglob("*") if p.name.startswith(".medsam-eval-report-tmp-")]
    assert leftovers == [], leftovers
