"""Interactive latency of LiteMedSAM on a 512 x 512 CT slice (DeepLesion), per engine.

    python benchmarks/latency.py [--quick] [--reps N] [--engines auto torch]

Per repetition, interleaved across engines:

* **encoder pass**: the image encoder alone on the preprocessed slice;
* **first prompt**: ``segment`` with a box on a slice not yet encoded
  (preprocessing + encoder + decoder + resize to 512 x 512 + threshold);
* **re-prompt box** / **re-prompt points**: ``segment`` on the encoded slice with a
  moved box / with one positive and one negative point (decoder only).

Medians and 95th percentiles in milliseconds; ``first/encoder`` is the ratio
of the medians (the target is <= 1.2). A 50 ms pause before each call stands
for the person between clicks and lets spinning worker threads settle. Also
printed: the CPU, the encoder's GFLOP per pass (torch's FlopCounterMode) and the
GFLOP/s each engine's median encoder pass reached. The persistent embedding
store is off (``embeddings=False``), so every first prompt encodes.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _litemedsam_common import DEEPLESION, machine_state, percentile, timed  # noqa: E402
from _machine import cpu_line, encoder_gflop, gflops_text  # noqa: E402

from napari_medsam_eval.models.litemedsam import build, preprocess_slice  # noqa: E402
from napari_medsam_eval.core.prompt import Prompt  # noqa: E402

PAUSE_S = 0.05


def lesion_slice() -> tuple[np.ndarray, tuple[int, int, int, int]]:
    with np.load(DEEPLESION / "CT_Lesion_000001_02_01_008-023.npz") as npz:
        imgs, gts = npz["imgs"], npz["gts"]
    z = int(np.argmax((gts > 0).sum(axis=(1, 2))))
    ys, xs = np.nonzero(gts[z])
    return imgs[z], (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))


def one_round(backend, image, box, rep: int) -> dict[str, float]:
    """Seconds of each measured call for one repetition (a fresh cache key per repetition)."""
    x0, y0, x1, y1 = box
    key = ("latency", rep)
    padded = preprocess_slice(image)[0]
    calls = {
        "encoder pass": lambda: backend.encoder_engine(padded),
        "first prompt": lambda: backend.segment(image, Prompt(1, boxes=[box]), cache_key=key),
        "re-prompt box": lambda: backend.segment(image, Prompt(1, boxes=[(x0 - 4, y0 - 4, x1 + 4, y1 + 4)]),
                                                 cache_key=key),
        "re-prompt points": lambda: backend.segment(
            image, Prompt(1, points=[((x0 + x1) / 2, (y0 + y1) / 2), (x0 - 20, y0 - 20)], point_labels=[1, 0]),
            cache_key=key),
    }
    out = {}
    for name, call in calls.items():
        time.sleep(PAUSE_S)
        out[name], _ = timed(call)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 repetitions")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 30)")
    parser.add_argument("--engines", nargs="+", default=["auto", "torch"], help="engines to compare (default auto torch)")
    args = parser.parse_args()
    reps = args.reps or (8 if args.quick else 30)
    print(cpu_line())
    print(machine_state(), flush=True)
    backends = {e: build(device="cpu", cache_size=4, engine=e, embeddings=False) for e in args.engines}
    gflop = encoder_gflop(next(iter(backends.values())).model.image_encoder)
    image, box = lesion_slice()
    for backend in backends.values():  # warm-up
        one_round(backend, image, box, -1)
    results = {e: [] for e in backends}
    for rep in range(reps):
        for engine, backend in backends.items():
            results[engine].append(one_round(backend, image, box, rep))
    print(f"\n{reps} repetitions, slice {image.shape[0]} x {image.shape[1]}; {machine_state()}")
    print(cpu_line())
    print(f"encoder: {gflop:.1f} GFLOP per pass (FlopCounterMode, eager torch)")
    print(f"{'engine':12s} {'call':18s} {'median ms':>10s} {'p95 ms':>8s}")
    for engine, rounds in results.items():
        label = f"{engine}->{backends[engine].describe()['engine']}"
        medians = {}
        for name in rounds[0]:
            values = [r[name] * 1000 for r in rounds]
            medians[name] = float(np.median(values))
            print(f"{label:12s} {name:18s} {medians[name]:10.1f} {percentile(values, 95):8.1f}")
        print(f"{label:12s} {'first/encoder':18s} {medians['first prompt'] / medians['encoder pass']:10.2f}")
        print(f"{label:12s} {'encoder GFLOP/s':18s} {gflops_text(gflop, medians['encoder pass'] / 1000)}")


if __name__ == "__main__":
    main()
