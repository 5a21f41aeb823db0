"""Ray overhead: cases/min of ``medsam-eval run`` on local workers and on Ray actors, and the ratio.

    python benchmarks/ray_overhead.py [--limit 12] [--rounds 1] [--no-local-2]

Each run is the real CLI (``medsam-eval run hippocampus_mri --model litemedsam --protocol
medsam2 --limit K``) in a fresh output folder, so model loading, worker start-up and (for
``--executor ray``) starting the local Ray in the process count, as they do for a user.
Configurations: local ``--workers 1`` (the baseline), ``--executor ray --workers 1``,
``--executor ray --workers 2`` and, unless ``--no-local-2``, local ``--workers 2`` (the
fair baseline of 2 Ray workers). Rounds interleave the configurations so a noisy machine
affects them alike. Every run's DSC column must equal the baseline's (the executors
compute the same table). The target: the Ray overhead (1 - ray/local cases/min) under 10%.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_line  # noqa: E402

DATA = Path(os.environ.get("MEDSAM_EVAL_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
TARGET_OVERHEAD = 0.10


def run_once(extra: list[str], limit: int, out: Path) -> dict[str, object]:
    """One CLI run: wall seconds, cases done, and the (case, label) -> DSC of its rows."""
    command = [str(Path(sys.executable).with_name("medsam-eval")), "run", str(DATA / "hippocampus_mri"),
               "--model", "litemedsam", "--protocol", "medsam2", "--limit", str(limit), "--out", str(out),
               "--quiet", "--no-report", *extra]
    env = dict(os.environ)
    env.pop("MEDSAM_EVAL_EMBEDDINGS", None)  # no persistent store: every run encodes
    start = time.perf_counter()
    child = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    seconds = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"run {' '.join(extra)} failed:\n{child.stderr[-2000:]}")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    cases = len({row["case_id"] for row in rows if row.get("status") == "ok"})
    dice = {(row["case_id"], row["target_label"]): row.get("dice") for row in rows}
    return {"seconds": seconds, "cases": cases, "dice": dice}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=12, help="cases per run (first K of hippocampus_mri)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-local-2", action="store_true", help="skip local --workers 2")
    args = parser.parse_args()
    configs = [("local, 1 worker", ["--workers", "1"]),
               ("ray, 1 worker", ["--executor", "ray", "--workers", "1"]),
               ("ray, 2 workers", ["--executor", "ray", "--workers", "2"])]
    if not args.no_local_2:
        configs.append(("local, 2 workers", ["--workers", "2"]))
    results: dict[str, list[dict[str, object]]] = {label: [] for label, _ in configs}
    print(cpu_line(), flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="medsam-ray-overhead-"))
    try:
        for round_index in range(args.rounds):
            order = configs if round_index % 2 == 0 else configs[::-1]
            for index, (label, extra) in enumerate(order):
                result = run_once(extra, args.limit, scratch / f"r{round_index}-{index}")
                results[label].append(result)
                print(f"round {round_index}: {label}: {result['cases']} cases in {result['seconds']:.1f} s",
                      flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    baseline = results[configs[0][0]][0]["dice"]
    same = all(r["dice"] == baseline for rs in results.values() for r in rs)
    rate = {k: float(np.median([60 * r["cases"] / r["seconds"] for r in rs])) for k, rs in results.items()}
    print(f"\n{cpu_line()}")
    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f} cases/run={args.limit} rounds={args.rounds}")
    print(f"{'configuration':20s} {'cases/min':>10s}")
    for label in results:
        print(f"{label:20s} {rate[label]:10.2f}")
    print(f"same DSC in every run: {same}")
    one = rate["ray, 1 worker"] / rate["local, 1 worker"]
    print(f"ratio ray 1 worker / local 1 worker: {one:.3f} (Ray overhead {100 * (1 - one):.1f}%; "
          f"target under {100 * TARGET_OVERHEAD:.0f}%: {'met' if 1 - one < TARGET_OVERHEAD else 'not met'})")
    print(f"ratio ray 2 workers / local 1 worker: {rate['ray, 2 workers'] / rate['local, 1 worker']:.3f}")
    if "local, 2 workers" in rate:
        two = rate["ray, 2 workers"] / rate["local, 2 workers"]
        print(f"ratio ray 2 workers / local 2 workers: {two:.3f} (Ray overhead {100 * (1 - two):.1f}%; "
              f"target under {100 * TARGET_OVERHEAD:.0f}%: {'met' if 1 - two < TARGET_OVERHEAD else 'not met'})")


if __name__ == "__main__":
    main()
