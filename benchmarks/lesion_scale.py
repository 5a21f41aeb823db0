"""Lesions at scale: a lesion target on a label of thousands of small components, time and peak memory.

A synthetic MedSAM npz volume (uint8 image, a label of N small cubes apart from each other) is run with
``--targets "lesion=1:lesions"`` and the weight-free ``box`` model in a fresh process, once with N
components and, first, with one (run twice: the second is the time of one prompt on the same volume), in
one fresh process. Printed: the time per lesion
beside the time of one prompt, the process's peak memory (``ru_maxrss``) before the run (imports and
the model, a first run of one component) and at its end, the peak the run added against the case's decoded size (image + label), and
whether the rows and ``lesions.csv`` are complete (every lesion a row).

    python benchmarks/lesion_scale.py                      # 20,000 components in 32 x 512 x 512
    python benchmarks/lesion_scale.py --components 2000 --shape 16 256 256

The bound checked (issue 67): peak under 2x the case's decoded size plus the model (the process before
the run).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def make_case(folder: Path, shape: tuple[int, int, int], count: int, seed: int = 0) -> int:
    """``folder/CT_lesions.npz``: a uint8 volume and a label of ``count`` 2x2x2 cubes on a grid of 4 (never
    touching, not even by a corner); the case's decoded size in bytes."""
    rng = np.random.default_rng(seed)
    z, y, x = shape
    slots = np.stack(np.meshgrid(np.arange(0, z - 2, 4), np.arange(0, y - 2, 4), np.arange(0, x - 2, 4),
                                 indexing="ij"), axis=-1).reshape(-1, 3)
    if count > len(slots):
        raise SystemExit(f"{count} components do not fit a {shape} volume ({len(slots)} places)")
    label = np.zeros(shape, dtype=np.uint8)
    for cz, cy, cx in slots[rng.choice(len(slots), count, replace=False)]:
        label[cz:cz + 2, cy:cy + 2, cx:cx + 2] = 1
    image = (rng.integers(0, 60, shape) + label * 150).astype(np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(folder / "CT_lesions.npz", imgs=image, gts=label, spacing=np.array([1.0, 1.0, 1.0]))
    return int(image.nbytes + label.nbytes)


def _run(data: Path, out: Path) -> float:
    from napari_medsam_eval.benchmark import run_benchmark

    start = time.perf_counter()
    run_benchmark(data, out, "box", targets=["lesion=1:lesions"])
    return time.perf_counter() - start


def child(one: Path, many: Path, out: Path) -> None:
    """Run in a fresh process: the case of one component twice (the first loads every module a run uses,
    the second is the time of one prompt), then the case of many, with the peak memory before and after it."""
    import pandas as pd

    _run(one, out / "warm")  # imports, first calls
    one_seconds = _run(one, out / "one")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    seconds = _run(many, out / "many")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    rows = pd.read_csv(out / "many" / "results.csv")
    lesions = pd.read_csv(out / "many" / "lesions.csv")
    row = rows.iloc[0]
    print(json.dumps({"before": before, "after": after, "seconds": seconds, "one_seconds": one_seconds,
                      "status": str(row["status"]), "error": "" if pd.isna(row["error"]) else str(row["error"]),
                      "lesions_true": int(row["lesions_true"]), "lesions_found": int(row["lesions_found"]),
                      "lesions_csv_true": int((lesions["source"] == "true").sum()),
                      "lesions_csv_predicted": int((lesions["source"] == "predicted").sum())}))


def measure(shape: tuple[int, int, int], count: int, work: Path) -> dict:
    decoded = make_case(work / "one", shape, 1)
    make_case(work / "many", shape, count)
    done = subprocess.run([sys.executable, __file__, "--child", str(work / "one"), str(work / "many"),
                           str(work / "runs")], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the run of {count} components failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "decoded": decoded, "count": count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--components", type=int, default=20000)
    parser.add_argument("--shape", type=int, nargs=3, default=(32, 512, 512), metavar=("Z", "Y", "X"))
    parser.add_argument("--child", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    shape = tuple(args.shape)
    with tempfile.TemporaryDirectory() as tmp:
        many = measure(shape, args.components, Path(tmp))
    mb = 1 << 20
    added = many["after"] - many["before"]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the end, python {platform.python_version()}")
    print(f"case: {shape[0]} x {shape[1]} x {shape[2]} uint8 image + uint8 label, decoded {many['decoded'] / mb:.1f} MB")
    print(f"one prompt (1 component): {many['one_seconds']:.2f} s for the case")
    print(f"{many['count']} components: {many['seconds']:.1f} s, {1000 * many['seconds'] / many['count']:.2f} ms a lesion "
          f"({many['seconds'] / many['count'] / many['one_seconds']:.3f} x one prompt's case time)")
    print(f"peak memory: {many['before'] / mb:.0f} MB before the run (imports, the model), "
          f"{many['after'] / mb:.0f} MB at its end: the run added {added / mb:.0f} MB = "
          f"{added / many['decoded']:.2f} x the case's decoded size (bound: 2x, {2 * many['decoded'] / mb:.0f} MB), "
          f"{added / many['count'] / 1024:.1f} kB a lesion")
    print(f"rows: status {many['status']} {many['error']}; lesions true {many['lesions_true']} "
          f"(found {many['lesions_found']}); lesions.csv: {many['lesions_csv_true']} true, "
          f"{many['lesions_csv_predicted']} predicted")
    complete = many["lesions_true"] == many["count"] == many["lesions_csv_true"]
    within = many["after"] <= many["before"] + 2 * many["decoded"]
    print(f"complete: {complete}; within the bound: {within}")
    if not (complete and within):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
