"""Issue 29, items 4 and 5: files that lie about their size, colour label maps, pixel sizes from the file.

Each refusal is one ``error:`` line naming the file, exit 2, no ``internal
error``, through ``info``/``segment``/``score``; ``run`` records the case as a
failed row and scores the others. Files are made in ``tmp_path`` from the real
hippocampus and Kvasir data.
"""
from __future__ import annotations

import gzip
import io
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import av
import imageio.v3 as iio
import numpy as np
import pytest
import SimpleITK as sitk
import tifffile

from napari_medsam_eval.benchmark import run_benchmark
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.io import read_case, read_mask2d, read_medsam_npz
from napari_medsam_eval.io.sitk_io import short_sitk_message
from napari_medsam_eval.io.sizes import CEILING_ENV, MEMORY_FRACTION, RAISE_HINT, memory_ceiling

REPO = Path(__file__).resolve().parents[1]
CASE, OTHER = "hippocampus_001", "hippocampus_004"
BEFORE = "refused before allocating"


def _hippo(shared: Path, sub: str = "imagesTr", case: str = CASE) -> Path:
    return shared / "hippocampus_mri" / sub / f"{case}.nii.gz"


def _cli(capsys, *args) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def _one_error(code: int, err: str, path: Path, fragment: str) -> None:
    """Exit 2 and one ``error:`` line that names ``path`` and holds ``fragment``; no internal error."""
    assert code == 2, err
    assert "internal error" not in err and "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {path}: ") and fragment in errors[0], err


def _segment(capsys, path: Path, out: Path) -> tuple[int, str]:
    return _cli(capsys, "segment", path, "--model", "box", "--box", "5", "5", "20", "20", "--out", out)


# ------------------------------------------------------------ files whose header lies about their size
def _lying_nrrd(path: Path) -> Path:
    header = b"NRRD0004\ntype: unsigned char\ndimension: 3\nsizes: 2000 2000 1000\nencoding: raw\nendian: little\n\n"
    path.write_bytes(header + bytes(range(256)) * 4)  # 1 KB of data for a 4 GB header
    return path


def _lying_mha(path: Path, shared: Path, compressed: bool) -> Path:
    if not compressed:
        header = b"ObjectType = Image\nNDims = 3\nDimSize = 2000 2000 1000\nElementType = MET_UCHAR\n" \
                 b"ElementDataFile = LOCAL\n"
        path.write_bytes(header + bytes(1024))
        return path
    sitk.WriteImage(sitk.ReadImage(str(_hippo(shared))), str(path), True)
    data = path.read_bytes()
    path.write_bytes(re.sub(rb"DimSize = [0-9 ]+\n", b"DimSize = 2000 2000 1000\n", data, count=1))
    return path


def _lying_nifti(path: Path, shared: Path) -> Path:
    plain = path.with_name("plain.nii")
    sitk.WriteImage(sitk.ReadImage(str(_hippo(shared))), str(plain))
    header = bytearray(plain.read_bytes())
    struct.pack_into("<4h", header, 40, 3, 2000, 2000, 1000)  # dim[0..3]
    path.write_bytes(gzip.compress(bytes(header)) if path.name.endswith(".gz") else bytes(header))
    return path


LIES = [
    ("NRRD 2000^3 with 1 KB", lambda p, s: _lying_nrrd(p / "lie.nrrd"), "4.0 GB), but the file holds only 1.0 KB"),
    ("raw MHA", lambda p, s: _lying_mha(p / "lie.mha", s, False), "but the file holds only 1.0 KB"),
    ("compressed MHA", lambda p, s: _lying_mha(p / "lie.mha", s, True), "cannot expand to that"),
    ("NIfTI", lambda p, s: _lying_nifti(p / "lie.nii", s), "truncated or corrupt"),
    ("gzip NIfTI", lambda p, s: _lying_nifti(p / "lie.nii.gz", s), "cannot expand to that"),
]


@pytest.mark.parametrize("name, make, fragment", LIES, ids=[lie[0] for lie in LIES])
def test_header_that_lies_about_its_size_is_refused(tmp_path, shared_data, capsys, name, make, fragment):
    bad = make(tmp_path, shared_data)
    with pytest.raises(DataError, match=re.escape(fragment)):
        read_case(bad)
    _one_error(*_cli(capsys, "info", bad), bad, fragment)
    _one_error(*_segment(capsys, bad, tmp_path / "pred.nii.gz"), bad, fragment)
    assert not (tmp_path / "pred.nii.gz").exists()
    _one_error(*_cli(capsys, "score", bad, _hippo(shared_data, "labelsTr")), bad, fragment)


def test_lying_nrrd_allocates_nothing(tmp_path):
    bad = _lying_nrrd(tmp_path / "lie.nrrd")
    # the peak resident size of this process's memory (VmHWM; getrusage's ru_maxrss would carry the
    # parent's peak over the fork, so a test run by a large pytest process would see pytest's)
    code = ("import sys\nfrom napari_medsam_eval.io import read_case\n"
            "try:\n    read_case(sys.argv[1])\nexcept Exception as error:\n    print(error)\n"
            "print(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')))\n")
    done = subprocess.run([sys.executable, "-c", code, str(bad)], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)
    message, peak_kb = done.stdout.strip().splitlines()
    assert BEFORE in message and "2000 x 2000 x 1000 voxels" in message
    assert int(peak_kb) < 1_000_000, f"peak RSS {int(peak_kb) // 1024} MB: the 4 GB were allocated"


def test_lying_image_fails_its_case_in_run(tmp_path, shared_data):
    root = tmp_path / "msd"
    for sub in ("imagesTr", "labelsTr"):
        (root / sub).mkdir(parents=True)
        (root / sub / f"{OTHER}.nii.gz").symlink_to(_hippo(shared_data, sub, OTHER))
    (root / "labelsTr" / f"{CASE}.nii.gz").symlink_to(_hippo(shared_data, "labelsTr"))
    _lying_nrrd(root / "imagesTr" / f"{CASE}.nrrd")
    shutil.copy(shared_data / "hippocampus_mri" / "dataset.json", root)
    table = run_benchmark(root, tmp_path / "run", model="box")
    bad = table[table["case_id"] == CASE]
    assert len(bad) >= 1 and (bad["status"] == "failed").all() and bad["error"].str.contains(BEFORE).all()
    assert (table[table["case_id"] == OTHER]["status"] == "ok").all()


ALLOCATION = ("Exception thrown in SimpleITK ImageFileReader_Execute: /tmp/SimpleITK-build/ITK-prefix/include/"
              "ITK-5.4/itkImportImageContainer.hxx:179:\nFailed to allocate memory for image.")
NRRD_SHORT = ("Exception thrown in SimpleITK ImageFileReader_Execute: /tmp/ITK/Modules/IO/NRRD/src/"
              "itkNrrdImageIO.cxx:935:\nITK ERROR: NrrdImageIO(0x5651a8918f90): Read: Error reading x.nrrd:\n"
              "[nrrd] nrrdLoad: trouble reading \"x.nrrd\"\n[nrrd] _nrrdEncodingRaw_read: fread got only 1024 "
              "1-sized things, not 4000000000 (2.56e-05% of expected)\n")


def test_simpleitk_reason_is_kept(tmp_path, shared_data, monkeypatch, capsys):
    assert short_sitk_message(RuntimeError(ALLOCATION)) == "Failed to allocate memory for image."
    assert short_sitk_message(RuntimeError(NRRD_SHORT)) == (
        "Read: Error reading x.nrrd: [nrrd] _nrrdEncodingRaw_read: fread got only 1024 1-sized things, "
        "not 4000000000 (2.56e-05% of expected)")

    def fail(self):
        raise RuntimeError(ALLOCATION)

    monkeypatch.setattr(sitk.ImageFileReader, "Execute", fail)
    image = _hippo(shared_data)
    _one_error(*_cli(capsys, "info", image), image, "cannot be read as NIfTI: Failed to allocate memory for image.")


def test_memory_ceiling_is_named(shared_data, monkeypatch, capsys):
    ceiling, how = memory_ceiling()
    assert ceiling > 0 and how.startswith(f"{MEMORY_FRACTION:.0%} of ")
    monkeypatch.setenv(CEILING_ENV, "0.00001")
    image = _hippo(shared_data)
    _one_error(*_cli(capsys, "info", image), image,
               f"35 x 51 x 35 voxels of 8-bit unsigned integer (62.5 KB), above the memory ceiling of 10.0 KB "
               f"(set by {CEILING_ENV}); {BEFORE}; {RAISE_HINT}")
    monkeypatch.setenv(CEILING_ENV, "lots")
    code, err = _cli(capsys, "info", image)
    assert code == 2 and err.strip().startswith(f"error: {CEILING_ENV}='lots' is not a number of GB")


def _lying_npz(path: Path, shape: tuple[int, ...]) -> Path:
    """An npz whose ``imgs`` header claims ``shape`` over 1 KB of data (``gts`` honest)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|u1", "fortran_order": False, "shape": shape})
    gts = io.BytesIO()
    np.save(gts, np.zeros((4, 5, 6), np.uint8))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("imgs.npy", header.getvalue() + bytes(1024))
        archive.writestr("gts.npy", gts.getvalue())
    return path


def test_npz_header_claiming_40000_cubed_is_refused(tmp_path, shared_data, capsys):
    folder = tmp_path / "npz"
    folder.mkdir()
    bad = _lying_npz(folder / "CT_Lie_001.npz", (40000, 40000, 40000))
    fragment = "header declares array 'imgs' of shape (40000, 40000, 40000) uint8 (64.0 TB), but its archive member"
    with pytest.raises(DataError, match=re.escape(fragment)):
        read_medsam_npz(bad)
    _one_error(*_cli(capsys, "info", bad), bad, fragment)
    _one_error(*_segment(capsys, bad, tmp_path / "pred.npz"), bad, fragment)
    with np.load(shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz") as data:
        np.savez(folder / "CT_Lesion_001.npz", imgs=data["imgs"][:, 200:300, 200:300],
                 gts=data["gts"][:, 200:300, 200:300], spacing=data["spacing"])
    table = run_benchmark(folder, tmp_path / "run", model="box")
    lie = table[table["case_id"] == "CT_Lie_001"]
    assert len(lie) == 1 and lie.iloc[0]["status"] == "failed" and fragment in lie.iloc[0]["error"]
    assert (table[table["case_id"] == "CT_Lesion_001"]["status"] == "ok").all()


# ------------------------------------------------------------ videos cut short
def _video(path: Path, frames: int = 25, **options: str) -> Path:
    """A small video (a moving bright square), ``options`` for the container (``movflags=faststart``)."""
    with av.open(str(path), "w", options=options) as container:
        stream = container.add_stream("libx264" if path.suffix == ".mp4" else "mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        rng = np.random.default_rng(0)
        for t in range(frames):
            image = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
            image[10:30, t:t + 20] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


@pytest.mark.parametrize("suffix, options", [(".mp4", {"movflags": "faststart"}), (".avi", {})])
def test_video_cut_to_60_percent_is_refused_with_both_counts(tmp_path, capsys, suffix, options):
    whole = _video(tmp_path / f"whole{suffix}", **options)
    assert read_case(whole).image.shape[0] == 25
    cut = tmp_path / f"cut{suffix}"
    data = whole.read_bytes()
    cut.write_bytes(data[: int(len(data) * 0.6)])
    with pytest.raises(DataError, match=r"its container declares 25 frames but only \d+ decode"):
        read_case(cut)
    fragment = "its container declares 25 frames but only "
    _one_error(*_cli(capsys, "info", cut), cut, fragment)
    _one_error(*_segment(capsys, cut, tmp_path / "pred.nii.gz"), cut, fragment)


# ------------------------------------------------------------ colour label maps
def _kvasir(tmp_path: Path, shared: Path) -> Path:
    root = tmp_path / "kvasir"
    for sub in ("images", "masks"):
        (root / sub).mkdir(parents=True)
    for image in sorted((shared / "kvasir_seg_2d" / "images").iterdir())[:2]:
        (root / "images" / image.name).symlink_to(image)
        (root / "masks" / f"{image.stem}.png").symlink_to(shared / "kvasir_seg_2d" / "masks" / f"{image.stem}.png")
    return root


def _artery_vein_map(shape: tuple[int, int]) -> np.ndarray:
    """Red, blue, white and green classes on black."""
    rgb = np.zeros(shape + (3,), np.uint8)
    rgb[10:40, 10:60] = (255, 0, 0)
    rgb[50:70, 10:40] = (0, 0, 255)
    rgb[80:90, 10:30] = (255, 255, 255)
    rgb[100:105, 10:14] = (0, 255, 0)
    return rgb


def test_rgb_class_map_is_refused_naming_its_colours(tmp_path, shared_data, capsys):
    root = _kvasir(tmp_path, shared_data)
    image = sorted((root / "images").iterdir())[0]
    mask = root / "masks" / f"{image.stem}.png"
    gt = Path(mask.readlink())
    mask.unlink()
    iio.imwrite(mask, _artery_vein_map(iio.imread(gt).shape[:2]))
    fragment = ("colour mask holds 4 colours that stand for different classes: #ff0000 (1500 px), #0000ff (600 px), "
                "#ffffff (200 px), #00ff00 (20 px)")
    with pytest.raises(DataError, match=re.escape(fragment)):
        read_mask2d(mask)
    _one_error(*_cli(capsys, "info", image, "--label", mask), mask, fragment)
    _one_error(*_cli(capsys, "score", mask, gt), mask, fragment)
    table = run_benchmark(root, tmp_path / "run", model="box")
    bad = table[table["case_id"] == image.stem]
    assert len(bad) == 1 and bad.iloc[0]["status"] == "failed" and fragment in bad.iloc[0]["error"]
    assert (table[table["case_id"] != image.stem]["status"] == "ok").all()


def test_binary_masks_saved_as_colour_still_read(tmp_path):
    red = np.zeros((20, 24, 3), np.uint8)
    red[5:10, 5:15] = (255, 0, 0)
    red[10, 5:15] = (200, 0, 0)  # anti-aliased edge above half: foreground
    red[4, 5:15] = (60, 0, 0)    # below half: background
    grey = np.repeat(np.where(red[..., :1] > 0, 255, 0).astype(np.uint8), 3, axis=-1)  # 0/255 with R = G = B
    alpha = np.zeros((20, 24, 4), np.uint8)
    alpha[..., 2] = 255
    alpha[5:10, 5:15, 3] = 255  # the shape drawn in the alpha channel
    for name, pixels, expected in (("red.png", red, 60), ("grey.png", grey, 70), ("alpha.png", alpha, 50),
                                   ("red.jpg", red, None)):
        iio.imwrite(tmp_path / name, pixels, **({"quality": 90} if name.endswith(".jpg") else {}))
        labels, info = read_mask2d(tmp_path / name)
        assert set(np.unique(labels)) == {0, 1}, name
        assert expected is None or int(labels.sum()) == expected, (name, int(labels.sum()))
        assert info["label_names"] == {1: "foreground"}
    assert read_mask2d(tmp_path / "red.png")[1]["mask_encoding"] == "binary colour mask (#ff0000 on black) -> 0/1"
    assert abs(int(read_mask2d(tmp_path / "red.jpg")[0].sum()) - 60) <= 10


# ------------------------------------------------------------ pixel size from TIFF resolution tags
def _write_tiffs(folder: Path, style: str, n: int = 3) -> list[Path]:
    folder.mkdir(parents=True)
    pixels = np.random.default_rng(1).integers(0, 255, (20, 30), dtype=np.uint8)
    options = {"imagej": dict(imagej=True, resolution=(1 / 0.24, 1 / 0.24), metadata={"unit": "um"}),
               "cm": dict(resolution=(1 / 0.000024, 1 / 0.000024), resolutionunit="CENTIMETER"),
               "72dpi": dict(resolution=(72, 72), resolutionunit="INCH"), "none": {}}[style]
    paths = [folder / f"frame{i}.tif" for i in range(n)]
    for path in paths:
        tifffile.imwrite(path, pixels, **options)
    return paths


def _spacing_line(capsys, path: Path) -> str:
    assert main(["info", str(path)]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("spacing"))


@pytest.mark.parametrize("style, unit, values", [("imagej", "mm", "0.00024, 0.00024"), ("cm", "mm", "0.00024, 0.00024"),
                                                 ("72dpi", "pixels", "1.0, 1.0"), ("none", "pixels", "1.0, 1.0")])
def test_tiff_pixel_size_is_read_alike_for_an_image_and_a_frame_folder(tmp_path, capsys, style, unit, values):
    frames = _write_tiffs(tmp_path / "frames", style)
    single = _spacing_line(capsys, frames[0])
    folder = _spacing_line(capsys, tmp_path / "frames")
    assert single == f"spacing (y, x) = ({values}) {unit}"
    assert folder == f"spacing (t, y, x) = (1.0, {values}) {unit} (t: frames)"
    case = read_case(frames[0])
    expected = 0.00024 if unit == "mm" else 1.0
    assert case.spacing.values == pytest.approx((expected, expected), rel=1e-6)
    assert read_case(tmp_path / "frames").spacing.values == pytest.approx((1.0, expected, expected), rel=1e-6)
    assert case.metadata["spacing_unit"] == ("mm" if unit == "mm" else "pixel")


def test_frames_stating_different_pixel_sizes_are_refused(tmp_path, capsys):
    frames = _write_tiffs(tmp_path / "frames", "cm")
    tifffile.imwrite(frames[2], iio.imread(frames[0]), resolution=(1 / 0.00005, 1 / 0.00005),
                     resolutionunit="CENTIMETER")
    _one_error(*_cli(capsys, "info", tmp_path / "frames"), frames[2], "frame states pixel size 0.0005 x 0.0005 mm")
