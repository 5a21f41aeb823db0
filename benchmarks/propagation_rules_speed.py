"""Per-slice cost of the propagation's stop rules: the default volume rules against the legacy ones.

    python benchmarks/propagation_rules_speed.py [--quick] [--reps N] [--hippocampus-cases K]

Issue 12 asks that propagation per slice stays within 10 % of what it was
before the rules. The baseline, measured in the same run on the same cases, is
``propagation="legacy"`` (the rule before: a 2 px box, stop at an empty
prediction); the candidate is the default ``volume`` rules (box + max(2 px,
10 %), intensity consistency, IoU with the last slice). They segment different
numbers of slices (the rules stop earlier), so the figure is seconds per
slice the model was run on (a slice a rule rejects included). Two figures per setting:

* **cold**: the embedding cache emptied before each case: encoder + decoder + rules,
  what a user waits for;
* **warm**: every slice encoded beforehand: decoder + rules only, which makes
  the rules' own cost as visible as it can be.

Cases: the ``medsam2`` protocol's middle-slice box of each target (DeepLesion
6 cases, hippocampus first K, both labels). The order of the two settings
alternates across repetitions and cases; per-case times are medians.
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _litemedsam_common import deeplesion_cases, hippocampus_cases, machine_state  # noqa: E402
from _machine import cpu_line  # noqa: E402

from napari_medsam_eval.models.litemedsam import build  # noqa: E402
from napari_medsam_eval.protocols.medsam2 import MedSAM2Protocol  # noqa: E402
from napari_medsam_eval.propagation import PropagationRecord, propagate_volume  # noqa: E402

SETTINGS = ("legacy", "volume")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_target(backend, case_id, volume, label_map, value, reps: int, first: int, warm: bool) -> dict[str, float]:
    prompt = MedSAM2Protocol().prompt_for_mask(label_map == value, "volume", value)
    seconds: dict[str, list[float]] = {s: [] for s in SETTINGS}
    cpu: dict[str, list[float]] = {s: [] for s in SETTINGS}
    slices: dict[str, int] = {}
    calls = backend.encoder_calls
    for rep in range(reps):
        order = SETTINGS if (first + rep) % 2 == 0 else SETTINGS[::-1]
        for setting in order:
            if not warm:
                backend.clear_cache()
            start, cpu_start = time.perf_counter(), _cpu_seconds()
            record = PropagationRecord()
            propagate_volume(backend, volume, prompt, rules=setting, case_id=case_id, record=record)
            seconds[setting].append(time.perf_counter() - start)
            cpu[setting].append(_cpu_seconds() - cpu_start)
            slices[setting] = len(record.scores)  # slices the model was run on (a rejected one included)
    encoded = backend.encoder_calls - calls
    if warm and encoded:
        raise RuntimeError(f"{case_id}: {encoded} slices were encoded in a warm run (the cache is too small)")
    return ({s: float(np.median(seconds[s])) for s in SETTINGS} | {f"{s}_cpu": float(np.median(cpu[s])) for s in SETTINGS}
            | {f"{s}_slices": slices[s] for s in SETTINGS})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 DeepLesion and 3 hippocampus cases, 1 repetition")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per target (default 2)")
    parser.add_argument("--hippocampus-cases", type=int, default=None, help="first K cases (default 10)")
    args = parser.parse_args()
    reps = args.reps or (1 if args.quick else 2)
    k = args.hippocampus_cases or (3 if args.quick else 10)
    # a whole volume stays encoded for the warm runs; no persistent store, so the cold runs encode
    backend = build(device="cpu", cache_size=1024, embeddings=False)
    print(cpu_line())
    print(machine_state())
    print(f"engine {backend.describe().get('engine')}; {reps} repetition(s); seconds per slice the model was run on\n")
    print(f"{'data':20s} {'mode':5s} {'targets':>7s} {'legacy s/sl':>11s} {'volume s/sl':>11s} {'ratio':>6s} "
          f"{'CPU-s ratio':>11s}")
    datasets = [("deeplesion_ct_npz", list(deeplesion_cases(2 if args.quick else None))),
                ("hippocampus_mri", list(hippocampus_cases(k)))]
    for name, cases in datasets:
        for warm in (False, True):
            rows = []
            for i, (case_id, volume, label_map) in enumerate(cases):
                backend.clear_cache()
                if warm:  # every slice encoded once, outside the timing
                    for z in range(volume.shape[0]):
                        backend.embed(volume[z], cache_key=(case_id, z))
                for value in (int(v) for v in np.unique(label_map) if v > 0):
                    rows.append(run_target(backend, case_id, volume, label_map, value, reps, i, warm))
            per_slice = {s: sum(r[s] for r in rows) / sum(r[f"{s}_slices"] for r in rows) for s in SETTINGS}
            cpu_slice = {s: sum(r[f"{s}_cpu"] for r in rows) / sum(r[f"{s}_slices"] for r in rows) for s in SETTINGS}
            ratio = per_slice["volume"] / per_slice["legacy"]
            print(f"{name:20s} {'warm' if warm else 'cold':5s} {len(rows):7d} {per_slice['legacy']:11.4f} "
                  f"{per_slice['volume']:11.4f} {ratio:6.3f} {cpu_slice['volume'] / cpu_slice['legacy']:11.3f}")
    print("\nratio = wall seconds per slice with the volume rules / with the legacy rule (1.10 = 10 % slower);\n"
          "CPU-s ratio = the same with process CPU seconds, which other jobs on the machine distort less")


if __name__ == "__main__":
    main()
