"""Peak memory of ``medsam-eval info`` and ``segment`` against the decoded size of what they read.

The guarantee (docs/guarantees.md): reading a volume peaks at no more than twice
its decoded size plus a fixed overhead (the interpreter and the imports). Each
command runs in a child process under ``/usr/bin/time -v`` (its "Maximum resident
set size"); the overhead is the same command's peak on a tiny file of the same
format, so ``peak <= 2 x decoded + overhead`` is the rule checked.

Inputs, written to a temporary folder:

* a 512 x 512 x 1000 int16 CT as ``.nii.gz`` (500 MiB decoded; smooth values so
  gzip is quick); ``segment`` prepares it with ``--modality CT``;
* a 2 GiB MedSAM npz (``imgs`` uint8 2048 x 1024 x 1024, zeros but for a bright
  block, honest header: about 2 MB on disk).

``segment`` runs with ``--model box`` (the box itself on every slice: no network,
so the figure is the read path, the intensity preparation and the mask written).
``--scale 0.25`` makes every input a quarter as large (a quick check).

    python benchmarks/memory_ceiling.py [--scale 1.0]
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import SimpleITK as sitk

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_line  # noqa: E402

CLI = Path(sys.executable).with_name("medsam-eval")
TIME = "/usr/bin/time"
MiB = 1 << 20


def write_ct(path: Path, depth: int) -> int:
    """A smooth int16 CT of ``depth`` x 512 x 512 (a body-like disc of tissue in air); its decoded bytes."""
    y, x = np.mgrid[:512, :512]
    disc = ((y - 256) ** 2 + (x - 256) ** 2 < 200 ** 2).astype(np.int16)
    slab = (disc * 1040 - 1000 + (x // 8).astype(np.int16)).astype(np.int16)
    volume = np.broadcast_to(slab, (depth, 512, 512)).copy()
    image = sitk.GetImageFromArray(volume)
    image.SetSpacing((0.8, 0.8, 1.5))
    sitk.WriteImage(image, str(path), True)
    return volume.nbytes


def write_npz(path: Path, depth: int) -> int:
    """A MedSAM npz of ``depth`` x 1024 x 1024 uint8 zeros but for a bright block; its decoded bytes."""
    imgs = np.zeros((depth, 1024, 1024), np.uint8)
    imgs[:, 300:700, 300:700] = 200
    np.savez_compressed(path, imgs=imgs, spacing=np.array([1.0, 1.0, 2.0]))
    return imgs.nbytes


def peak_rss(*args: str) -> int:
    """Peak resident bytes of ``medsam-eval *args`` in a child process (``/usr/bin/time -v``)."""
    done = subprocess.run([TIME, "-v", str(CLI), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"medsam-eval {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1)) * 1024


def commands(image: Path, out: Path, modality: list[str]) -> dict[str, list[str]]:
    return {"info": ["info", str(image)],
            "segment": ["segment", str(image), *modality, "--model", "box", "--box", "350", "350", "650", "650",
                        "--out", str(out)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="size of the inputs, 1.0 = as documented")
    scale = parser.parse_args().scale
    print(cpu_line())
    folder = Path(tempfile.mkdtemp(prefix="memory_ceiling_"))
    try:
        inputs = [("int16 CT .nii.gz", "ct.nii.gz", write_ct, max(2, round(1000 * scale)), ["--modality", "CT"]),
                  ("uint8 npz", "CT_big.npz", write_npz, max(2, round(2048 * scale)), [])]
        print("| input | command | decoded | overhead | peak RSS | (peak - overhead) / decoded | within 2x + overhead |")
        print("|---|---|---|---|---|---|---|")
        for what, name, write, depth, modality in inputs:
            tiny, big = folder / f"tiny_{name}", folder / name
            write(tiny, 2)
            decoded = write(big, depth)
            for command in ("info", "segment"):
                out = folder / "pred.npz"
                out.unlink(missing_ok=True)
                overhead = peak_rss(*commands(tiny, out, modality)[command])
                out.unlink(missing_ok=True)
                peak = peak_rss(*commands(big, out, modality)[command])
                ratio = (peak - overhead) / decoded
                holds = "yes" if peak <= 2 * decoded + overhead else "**no**"
                print(f"| {what} {' x '.join(map(str, _shape(big)))} | {command} | {decoded / MiB:.0f} MiB | "
                      f"{overhead / MiB:.0f} MiB | {peak / MiB:.0f} MiB | {ratio:.2f} | {holds} |", flush=True)
            big.unlink()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _shape(path: Path) -> tuple[int, ...]:
    """The image's shape (numpy order) from its header, without decoding it."""
    if path.suffix == ".npz":
        with zipfile.ZipFile(path) as archive, archive.open("imgs.npy") as member:
            np.lib.format.read_magic(member)
            return tuple(int(n) for n in np.lib.format.read_array_header_1_0(member)[0])
    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    reader.ReadImageInformation()
    return tuple(int(n) for n in reader.GetSize()[::-1])


if __name__ == "__main__":
    main()
