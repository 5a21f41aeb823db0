"""Propagation after encoding ahead against propagation from an empty cache, on DeepLesion.

    python benchmarks/encode_ahead_speed.py [--quick] [--reps N] [--cases K] [--engine auto]

What the Segment widget does, without Qt: per DeepLesion case a
:class:`~napari_medsam_eval.session.session.Session` holds the CT volume and LiteMedSAM;

* **after encode ahead**: the cache is emptied, every slice is encoded with
  :func:`napari_medsam_eval.session.encode_ahead.iter_encode_ahead` (nearest to the
  prompt's slice first; its time is reported, not counted), then
  ``Session.propagate`` from the ``medsam2`` ground-truth prompt (the box on the
  lesion's middle slice) is timed; it must make no encoder call;
* **baseline**: the cache emptied, the same ``Session.propagate`` timed (it
  encodes every slice it visits).

The two alternate in order across cases and repetitions; per-case times are
medians over repetitions, after one untimed warm-up propagation. Issue 18's
target: under 1.5 s per DeepLesion case after encoding ahead, masks identical to
the baseline's. The persistent embedding store is off (``embeddings=False``),
so the baseline always runs the encoder. Also printed: the CPU, the encoder's
GFLOP per pass and the GFLOP/s encoding ahead reached (seconds per slice
include preprocessing and the cache bookkeeping, so it is a lower bound).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _litemedsam_common import DEEPLESION, machine_state  # noqa: E402
from _machine import cpu_line, encoder_gflop, gflops_text  # noqa: E402

from napari_medsam_eval.session.encode_ahead import iter_encode_ahead  # noqa: E402
from napari_medsam_eval.io import read_case  # noqa: E402
from napari_medsam_eval.session.session import Session  # noqa: E402

TARGET_S = 1.5


def timed_propagate(session: Session, prompt) -> tuple[float, np.ndarray, int]:
    """Seconds, mask and encoder calls of one ``Session.propagate``."""
    backend = session.backend
    calls = backend.encoder_calls
    start = time.perf_counter()
    result = session.propagate(prompt)
    seconds = time.perf_counter() - start
    if result.cancelled:
        raise RuntimeError("the propagation was cancelled")
    return seconds, np.asarray(result.mask), backend.encoder_calls - calls


def run_case(session: Session, prompt, reps: int, first: int) -> dict[str, object]:
    backend = session.backend
    times: dict[str, list[float]] = {"ahead": [], "baseline": []}
    encode_s: list[float] = []
    masks: dict[str, np.ndarray] = {}
    calls: dict[str, int] = {}
    for rep in range(reps):
        order = ("ahead", "baseline") if (first + rep) % 2 == 0 else ("baseline", "ahead")
        for which in order:
            backend.clear_cache()
            if which == "ahead":
                start = time.perf_counter()
                encoded = sum(1 for _ in iter_encode_ahead(session, prompt.slice_index))
                encode_s.append(time.perf_counter() - start)
                if encoded != session.n_slices:
                    raise RuntimeError(f"encoded {encoded} of {session.n_slices} slices")
            seconds, masks[which], calls[which] = timed_propagate(session, prompt)
            times[which].append(seconds)
    if calls["ahead"]:
        raise RuntimeError(f"{calls['ahead']} encoder calls after encoding ahead (the cache is too small?)")
    return {"slices": session.n_slices, "ahead": float(np.median(times["ahead"])),
            "baseline": float(np.median(times["baseline"])), "encode": float(np.median(encode_s)),
            "baseline_calls": calls["baseline"], "identical": bool(np.array_equal(masks["ahead"], masks["baseline"]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first 2 cases, 1 repetition")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per case (default 2; quick 1)")
    parser.add_argument("--cases", type=int, default=None, help="the first K cases (default all 6; quick 2)")
    parser.add_argument("--engine", default="auto", help="LiteMedSAM encoder engine (default auto)")
    args = parser.parse_args()
    reps = args.reps or (1 if args.quick else 2)
    print(cpu_line())
    print(machine_state(), flush=True)
    backend = Session.build_backend("litemedsam", device="cpu", engine=args.engine, embeddings=False)
    gflop = encoder_gflop(backend.model.image_encoder)
    session = Session()
    session.set_backend(backend, "litemedsam")
    paths = sorted(DEEPLESION.glob("CT_Lesion_*.npz"))[: args.cases or (2 if args.quick else None)]
    print(f"engine {backend.describe().get('engine')}; {len(paths)} cases; {reps} repetition(s)")
    print(f"{'case':34s} {'slices':>6s} {'encode s':>8s} {'ahead s':>8s} {'baseline s':>10s} {'ratio':>6s} "
          f"{'enc calls':>9s} identical", flush=True)
    rows = []
    for i, path in enumerate(paths):
        case = read_case(path)
        session.use_image(case.image, kind=case.kind, modality=case.modality, image_id=case.case_id)
        target = int(np.unique(case.label[case.label > 0])[0])
        prompt = session.prompt_from_ground_truth(case.label, target, "medsam2")
        if i == 0:  # untimed warm-up: first calls allocate and pick kernels
            backend.clear_cache()
            session.propagate(prompt)
        row = run_case(session, prompt, reps, first=i)
        rows.append(row)
        print(f"{path.stem:34s} {row['slices']:6d} {row['encode']:8.2f} {row['ahead']:8.3f} {row['baseline']:10.3f} "
              f"{row['baseline'] / row['ahead']:5.1f}x {row['baseline_calls']:9d} {'yes' if row['identical'] else 'NO'}",
              flush=True)
    ahead = float(np.median([r["ahead"] for r in rows]))
    baseline = float(np.median([r["baseline"] for r in rows]))
    per_slice = sum(r["encode"] for r in rows) / sum(r["slices"] for r in rows)
    print(f"\n{cpu_line()}\n{machine_state()}")
    print(f"median propagate after encode ahead {ahead:.3f} s, baseline (empty cache) {baseline:.3f} s, "
          f"ratio {baseline / ahead:.1f}x; target < {TARGET_S} s: {'met' if ahead < TARGET_S else 'not met'} "
          f"(max {max(r['ahead'] for r in rows):.3f} s)")
    print(f"masks identical: {sum(r['identical'] for r in rows)}/{len(rows)}")
    print(f"encode ahead: {per_slice:.3f} s per slice; encoder {gflop:.1f} GFLOP per pass: {gflops_text(gflop, per_slice)}")


if __name__ == "__main__":
    main()
