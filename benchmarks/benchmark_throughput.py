"""Benchmark throughput: cases/min of ``medsam-eval run`` with 1 and with 2 workers, and peak memory.

    python benchmarks/benchmark_throughput.py [--limit 6] [--rounds 1] [--model-options JSON]

Each run is the real CLI (``medsam-eval run hippocampus_mri --model litemedsam
--protocol medsam2 --workers N --limit K``) in a fresh output folder, so model
loading and worker start-up count, as they do for a user. Rounds interleave the
configurations so a noisy machine affects them alike. Peak memory is the
largest sum of memory over the CLI process and all its children,
sampled every 0.2 s with psutil, as PSS (shared pages split between the
processes mapping them) and RSS. Three configurations: one worker on one thread
(``OMP_NUM_THREADS=1``: the baseline the scaling of workers is measured
against), one worker on all cores (the default), two workers (each gets
``cores // workers`` threads: one on a 2-core machine).
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
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_line  # noqa: E402

DATA = Path(os.environ.get("MEDSAM_EVAL_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def _tree_memory(process: psutil.Process) -> tuple[int, int]:
    """(sum of RSS, sum of PSS) in bytes over a process and its children.

    RSS counts the shared library pages (libtorch alone is ~0.5 GiB) once per
    process; PSS splits shared pages between the processes that map them, so
    its sum is what the tree really holds.
    """
    rss = pss = 0
    for proc in [process, *process.children(recursive=True)]:
        try:
            info = proc.memory_full_info()
        except psutil.Error:  # a child exited between listing and reading
            continue
        rss, pss = rss + info.rss, pss + getattr(info, "pss", info.rss)
    return rss, pss


def run_once(workers: int, limit: int, out: Path, model_options: str | None, threads: int | None = None
             ) -> dict[str, float]:
    """One CLI run; wall seconds, cases done, peak memory (MiB) of the process tree.

    ``threads``: when given, ``OMP_NUM_THREADS`` for the run (torch, and so the
    encoder engine, take their thread count from it).
    """
    command = [str(Path(sys.executable).with_name("medsam-eval")), "run", str(DATA / "hippocampus_mri"),
               "--model", "litemedsam", "--protocol", "medsam2", "--workers", str(workers),
               "--limit", str(limit), "--out", str(out), "--quiet", "--no-report"]
    if model_options:
        command += ["--model-options", model_options]
    start = time.perf_counter()
    env = dict(os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {}))
    env.pop("MEDSAM_EVAL_EMBEDDINGS", None)  # no persistent store: every run encodes, as the figures assume
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    watched, peak_rss, peak_pss = psutil.Process(child.pid), 0, 0
    while child.poll() is None:
        rss, pss = _tree_memory(watched)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(0.2)
    seconds = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"run with {workers} worker(s) failed:\n{child.stderr.read()[-2000:]}")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    cases = len({row["case_id"] for row in rows if row.get("status") == "ok"})
    return {"seconds": seconds, "cases": cases, "peak_rss_mib": peak_rss / 2**20, "peak_pss_mib": peak_pss / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=6, help="cases per run (first K of hippocampus_mri)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--model-options", default=None, help="JSON passed to --model-options")
    args = parser.parse_args()
    # (label, workers, threads): one worker on one core is the baseline the
    # scaling is measured against; one worker on all cores is the default
    configs = [("1 worker, 1 thread", 1, 1), ("1 worker, all cores", 1, None), ("2 workers, 1 thread each", 2, None)]
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in configs}
    print(cpu_line(), flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="medsam-throughput-"))
    try:
        for round_index in range(args.rounds):
            order = configs if round_index % 2 == 0 else configs[::-1]
            for index, (label, workers, threads) in enumerate(order):
                out = scratch / f"r{round_index}-{index}"
                result = run_once(workers, args.limit, out, args.model_options, threads)
                results[label].append(result)
                print(f"round {round_index}: {label}: {result['cases']} cases in {result['seconds']:.1f} s, "
                      f"peak PSS {result['peak_pss_mib']:.0f} MiB (RSS {result['peak_rss_mib']:.0f} MiB)", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rate = {k: float(np.median([60 * r["cases"] / r["seconds"] for r in rs])) for k, rs in results.items()}
    pss = {k: float(max(r["peak_pss_mib"] for r in rs)) for k, rs in results.items()}
    rss = {k: float(max(r["peak_rss_mib"] for r in rs)) for k, rs in results.items()}
    print(f"\n{cpu_line()}")
    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f} cases/run={args.limit} rounds={args.rounds}")
    print(f"{'configuration':26s} {'cases/min':>10s} {'peak PSS MiB':>13s} {'peak RSS MiB':>13s}")
    for label in results:
        print(f"{label:26s} {rate[label]:10.2f} {pss[label]:13.0f} {rss[label]:13.0f}")
    two, single, default = rate[configs[2][0]], rate[configs[0][0]], rate[configs[1][0]]
    print(f"ratio 2 workers / 1 worker on 1 thread (baseline): {two / single:.2f}x")
    print(f"ratio 2 workers / 1 worker on all cores (the default): {two / default:.2f}x")

if __name__ == "__main__":
    main()
