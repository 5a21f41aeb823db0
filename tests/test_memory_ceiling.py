"""Issue 44: reading a volume peaks at most 2x its decoded size plus a fixed overhead, and a header declaring
more than the decoded-size limit is refused before anything is inflated.

Each measurement runs the console script in a child process under ``/usr/bin/time -v`` (its "Maximum
resident set size": the child's own peak, not the pytest process's). The fixed overhead is the same
command's peak on a tiny file of the same format (the interpreter and the imports), plus
:data:`BLOCK_SLACK` for the block buffers of :mod:`napari_medsam_eval.core.array_blocks` (a few MB each,
whatever the volume's size). ``benchmarks/memory_ceiling.py`` measures the same at 500 MiB and 2 GiB.
"""
from __future__ import annotations

import io
import re
import shutil
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval.core.decoded_limit import RAISE_HINT

CLI = Path(sys.executable).with_name("medsam-eval")
TIME = shutil.which("time", path="/usr/bin")
MiB = 1 << 20
#: the block buffers' share of the fixed overhead (see the module doc)
BLOCK_SLACK = 32 * MiB

pytestmark = pytest.mark.skipif(TIME is None or not CLI.exists(), reason="needs /usr/bin/time and the console script")


def _peak(*args: str) -> tuple[int, int, str, float]:
    """(exit status, peak resident bytes, stderr, seconds) of ``medsam-eval *args`` in a child process."""
    start = time.perf_counter()
    done = subprocess.run([TIME, "-v", str(CLI), *map(str, args)], capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1)) * 1024
    return done.returncode, peak, done.stderr, seconds


def _npz(path: Path, depth: int) -> int:
    imgs = np.zeros((depth, 1024, 1024), np.uint8)
    imgs[:, 300:700, 300:700] = 200
    gts = np.zeros_like(imgs)
    gts[:, 400:600, 400:600] = 1
    np.savez_compressed(path, imgs=imgs, gts=gts, spacing=np.array([1.0, 1.0, 2.0]))
    return imgs.nbytes + gts.nbytes


def _nifti(path: Path, depth: int) -> int:
    y, x = np.mgrid[:512, :512]
    slab = (((y - 256) ** 2 + (x - 256) ** 2 < 200 ** 2) * 1040 - 1000 + x // 8).astype(np.int16)
    volume = np.broadcast_to(slab, (depth, 512, 512)).copy()
    sitk.WriteImage(sitk.GetImageFromArray(volume), str(path), True)
    return volume.nbytes


@pytest.mark.slow
@pytest.mark.parametrize("name, write, depth", [("CT_big.npz", _npz, 128), ("ct.nii.gz", _nifti, 256)],
                         ids=["npz 256 MiB (imgs + gts)", "int16 nii.gz 128 MiB"])
def test_info_peaks_within_twice_the_decoded_size(tmp_path, name, write, depth):
    tiny, big = tmp_path / f"tiny_{name}", tmp_path / name
    write(tiny, 2)
    decoded = write(big, depth)
    code, overhead, err, _ = _peak("info", tiny)
    assert code == 0, err
    code, peak, err, _ = _peak("info", big)
    assert code == 0, err
    assert peak <= 2 * decoded + overhead + BLOCK_SLACK, (
        f"peak {peak / MiB:.0f} MiB for {decoded / MiB:.0f} MiB decoded (overhead {overhead / MiB:.0f} MiB): "
        f"{(peak - overhead) / decoded:.2f}x")


# ------------------------------------------------------------ headers declaring 512 MiB, on a few MB of disk
DECLARED = 512 * MiB


def _zeros_stream(write, total: int) -> None:
    chunk = bytes(16 * MiB)
    for _ in range(total // len(chunk)):
        write(chunk)


def _big_npz(path: Path) -> Path:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|u1", "fortran_order": False, "shape": (512, 1024, 1024)})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("imgs.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            _zeros_stream(member.write, DECLARED)
    return path


def _big_nifti_gz(path: Path) -> Path:
    """A gzip NIfTI whose header (SimpleITK's, for uint8) declares 1024 x 1024 x 512 voxels, all of them zeros."""
    small = path.with_name("small.nii")
    sitk.WriteImage(sitk.Image(2, 2, 2, sitk.sitkUInt8), str(small))
    header = bytearray(small.read_bytes()[:352])  # the 348-byte header and 4 extension bytes
    struct.pack_into("<4h", header, 40, 3, 1024, 1024, 512)  # dim[0..3]
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)  # gzip
    with open(path, "wb") as handle:
        handle.write(compressor.compress(bytes(header)))
        _zeros_stream(lambda chunk: handle.write(compressor.compress(chunk)), DECLARED)
        handle.write(compressor.flush())
    return path


def _sparse(path: Path, header: bytes) -> Path:
    """``header`` and DECLARED zero bytes of raw data, as a sparse file (no disk used)."""
    with open(path, "wb") as handle:
        handle.write(header)
        handle.truncate(len(header) + DECLARED)
    return path


BIG = [
    ("npz", lambda f: _big_npz(f / "CT_big.npz")),
    ("NIfTI gz", lambda f: _big_nifti_gz(f / "big.nii.gz")),
    ("NRRD", lambda f: _sparse(f / "big.nrrd", b"NRRD0004\ntype: unsigned char\ndimension: 3\nsizes: 1024 1024 512\n"
                                               b"encoding: raw\nendian: little\n\n")),
    ("MHA", lambda f: _sparse(f / "big.mha", b"ObjectType = Image\nNDims = 3\nDimSize = 1024 1024 512\n"
                                             b"ElementType = MET_UCHAR\nElementDataFile = LOCAL\n")),
]


@pytest.mark.parametrize("name, make", BIG, ids=[item[0] for item in BIG])
def test_a_header_above_the_limit_is_refused_before_inflating(tmp_path, name, make):
    """An honest 512 MiB header under ``--max-decoded-gb 0.1``: exit 2, one error naming the file, its size,
    the limit and how to raise it, in a child whose peak stays far below what reading would take."""
    path = make(tmp_path)
    code, peak, err, seconds = _peak("info", path, "--max-decoded-gb", "0.1")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and errors[0].startswith(f"error: {path}: header declares "), err
    assert "(536.9 MB" in errors[0] and "above the memory ceiling of 100.0 MB" in errors[0], err
    assert errors[0].endswith(RAISE_HINT), err
    assert peak < DECLARED // 2, f"peak {peak / MiB:.0f} MiB: the data were inflated"
    assert seconds < 30


def test_the_env_variable_sets_the_limit_and_a_bad_value_is_named(tmp_path):
    path = _sparse(tmp_path / "big.nrrd", b"NRRD0004\ntype: unsigned char\ndimension: 3\nsizes: 1024 1024 512\n"
                                         b"encoding: raw\nendian: little\n\n")
    done = subprocess.run([str(CLI), "info", str(path)], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "MEDSAM_EVAL_MAX_IMAGE_GB": "0.2"})
    assert done.returncode == 2, done.stderr
    assert "above the memory ceiling of 200.0 MB (set by MEDSAM_EVAL_MAX_IMAGE_GB)" in done.stderr
    code, _, err, _ = _peak("info", path, "--max-decoded-gb", "-1")
    assert code == 2 and "argument --max-decoded-gb: must be more than 0, got -1" in err
