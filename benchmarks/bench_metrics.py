"""Time DSC + NSD + HD95 here against DeepMind's ``surface_distance`` on real volumes.

Run: ``python benchmarks/bench_metrics.py [--repeats 7] [--cpu]``. Each row times the
full path for one mask pair (DSC, surfel distances, NSD at 2 mm, HD95) as the median
of ``repeats`` runs after one warm-up, and checks that both give the same
numbers. Needs the ``surface-distance`` test extra and ``../shared/data``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import SimpleITK as sitk
import surface_distance as sd
from scipy import ndimage

from napari_medsam_eval.evaluation.metrics import compute_dice, compute_surface_distances

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_line  # noqa: E402

DATA = Path(os.environ.get("MEDSAM_EVAL_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def _pairs() -> list[tuple[str, np.ndarray, np.ndarray, tuple[float, ...]]]:
    """(name, pred, gt, spacing zyx): real ground truths against perturbed copies."""
    pairs = []
    for path in sorted((DATA / "hippocampus_mri" / "labelsTr").glob("*.nii.gz"))[:3]:
        image = sitk.ReadImage(str(path))
        gt = sitk.GetArrayFromImage(image) == 1
        pred = np.roll(ndimage.binary_dilation(gt), 1, axis=1)
        pairs.append((path.name.split(".")[0], pred, gt, image.GetSpacing()[::-1]))
    for path in sorted((DATA / "deeplesion_ct_npz").glob("*.npz")):
        with np.load(path) as npz:
            gt, spacing = npz["gts"] == 1, tuple(float(v) for v in npz["spacing"][::-1])
        pred = np.roll(ndimage.binary_erosion(gt, iterations=2), 3, axis=2)
        pairs.append((path.stem[:24], pred, gt, spacing))
    for path in sorted((DATA / "brats2021_flair" / "labelsTr").glob("*.nii.gz")):
        image = sitk.ReadImage(str(path))
        gt = sitk.GetArrayFromImage(image) == 1
        pred = np.roll(ndimage.binary_dilation(gt, iterations=2), 2, axis=0)
        pairs.append((path.name.split(".")[0], pred, gt, image.GetSpacing()[::-1]))
    return pairs


_clock = time.perf_counter


def _median_time(fn: Callable[[], tuple[float, ...]], repeats: int) -> tuple[float, tuple[float, ...]]:
    result = fn()
    times = []
    for _ in range(repeats):
        start = _clock()
        fn()
        times.append(_clock() - start)
    return float(np.median(times)), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpu", action="store_true", help="time process CPU, steadier on a busy machine")
    args = parser.parse_args()
    global _clock
    if args.cpu:
        _clock = time.process_time

    def ours(pred, gt, spacing):
        surfaces = compute_surface_distances(pred, gt, spacing)
        return compute_dice(pred, gt), surfaces.surface_dice(2.0), surfaces.robust_hausdorff(95)

    def theirs(pred, gt, spacing):
        surfaces = sd.compute_surface_distances(gt, pred, spacing)
        return (sd.compute_dice_coefficient(gt, pred), sd.compute_surface_dice_at_tolerance(surfaces, 2.0),
                sd.compute_robust_hausdorff(surfaces, 95))

    print(cpu_line())
    print(f"{'case':26s} {'shape':>15s} {'ours ms':>8s} {'sd ms':>8s} {'ratio':>6s} {'max |diff|':>10s}")
    ratios, sum_ours, sum_theirs = [], 0.0, 0.0
    for name, pred, gt, spacing in _pairs():
        t_ours, r_ours = _median_time(lambda: ours(pred, gt, spacing), args.repeats)
        t_theirs, r_theirs = _median_time(lambda: theirs(pred, gt, spacing), args.repeats)
        diff = max(abs(a - b) for a, b in zip(r_ours, r_theirs))
        ratios.append(t_theirs / t_ours)
        sum_ours, sum_theirs = sum_ours + t_ours, sum_theirs + t_theirs
        print(f"{name:26s} {str(gt.shape):>15s} {t_ours * 1e3:8.2f} {t_theirs * 1e3:8.2f} "
              f"{t_theirs / t_ours:6.1f} {diff:10.1e}")
    print(f"median ratio {np.median(ratios):.1f}x, min {min(ratios):.1f}x, total-time ratio {sum_theirs / sum_ours:.1f}x")


if __name__ == "__main__":
    main()
