"""MedSAM2 re-propagation with the frames' features kept, against a model that encodes every frame.

    python benchmarks/sam2_feature_cache.py [--case NAME] [--reps N] [--checkpoint PATH]

What a correction or a prompt-sensitivity repeat does: propagate MedSAM2 (bidirectional, the
``medsam2`` protocol's box on the lesion's middle slice) over one DeepLesion volume, then again over
the same frames. Timed, alternating, ``--reps`` times each after one untimed warm-up:

* **kept**: the second propagation of a backend built with the default ``feature_cache`` (the first
  one of each repetition fills the cache and is not timed);
* **baseline**: the same propagation by a backend built with ``feature_cache="off"`` (it encodes
  every frame, as sam2's video predictor does by itself).

Printed: the CPU, the median seconds of each, the ratio, and whether the masks are identical. Without
``--checkpoint`` the weights are MedSAM2's 512 config seeded at random (the time does not depend on
the weights).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _litemedsam_common import DEEPLESION  # noqa: E402
from _machine import cpu_line  # noqa: E402

from napari_medsam_eval.models import sam2_backend as sb  # noqa: E402
from napari_medsam_eval.models.sam2_features import SHARED  # noqa: E402
from napari_medsam_eval.core.prompt import Prompt  # noqa: E402


def middle_box_prompt(gts: np.ndarray) -> Prompt:
    z = np.flatnonzero(gts.any(axis=(1, 2)))
    key = int((z.min() + z.max()) // 2)
    ys, xs = np.nonzero(gts[key])
    return Prompt(1, slice_index=key, boxes=[(int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))])


def timed(backend, frames, prompt) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    masks = backend.propagate(frames, prompt)
    return time.perf_counter() - start, masks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="CT_Lesion_000002_03_01_035-047.npz")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--checkpoint", type=Path, default=None)
    args = parser.parse_args()
    with np.load(DEEPLESION / args.case) as data:
        frames, gts = data["imgs"], data["gts"]
    prompt = middle_box_prompt(gts)
    weights = {"checkpoint": args.checkpoint} if args.checkpoint else {"random_init": True}
    kept = sb.build_medsam2(device="cpu", **weights)
    baseline = sb.build_medsam2(device="cpu", feature_cache="off", **weights)
    print(cpu_line())
    print(f"case {args.case}: {frames.shape[0]} slices of {frames.shape[1]}x{frames.shape[2]}, key slice "
          f"{prompt.slice_index}")
    timed(baseline, frames, prompt)  # warm-up
    kept_times, baseline_times, identical = [], [], True
    for _ in range(args.reps):
        SHARED.clear()
        _, first = timed(kept, frames, prompt)  # fills the cache
        seconds, again = timed(kept, frames, prompt)
        kept_times.append(seconds)
        seconds, plain = timed(baseline, frames, prompt)
        baseline_times.append(seconds)
        identical &= bool(np.array_equal(first, again) and np.array_equal(again, plain))
    kept_s, baseline_s = statistics.median(kept_times), statistics.median(baseline_times)
    print(f"re-propagation with the features kept: {kept_s:.2f} s (median of {args.reps}; "
          f"{[round(t, 2) for t in kept_times]})")
    print(f"baseline, every frame encoded:         {baseline_s:.2f} s ({[round(t, 2) for t in baseline_times]})")
    print(f"ratio baseline/kept: {baseline_s / kept_s:.2f}x; masks identical: {identical}; "
          f"cache {len(SHARED)} frames, {SHARED.size / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
