"""Benchmark throughput: cases/min of ``medsam-eval run`` with 1 and with 2 workers, and peak memory.

    python benchmarks/benchmark_throughput.py [--limit 6] [--rounds 1] [--model-options JSON]

Each run is the real CLI (``medsam-eval run hippocampus_mri --model litemedsam
--protocol medsam2 --workers N --limit K``) in a fresh output folder, so model
loading and worker start-up count, as they do for a user. Rounds interleave the
worker counts so a noisy machine affects both alike. Peak memory is the
largest sum of memory over the CLI process and all its children,
sampled every 0.2 s with psutil, as PSS (shared pages split between the
processes mapping them) and RSS. The baseline is the same command with one
worker (``cores // workers`` torch threads per worker: 2 threads for one
worker on a 2-core machine, 1 thread each for two workers).
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


def run_once(workers: int, limit: int, out: Path, model_options: str | None) -> dict[str, float]:
    """One CLI run; wall seconds, cases done, peak RSS (MiB) of the process tree."""
    command = [str(Path(sys.executable).with_name("medsam-eval")), "run", str(DATA / "hippocampus_mri"),
               "--model", "litemedsam", "--protocol", "medsam2", "--workers", str(workers),
               "--limit", str(limit), "--out", str(out), "--quiet", "--no-report"]
    if model_options:
        command += ["--model-options", model_options]
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
    results: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    scratch = Path(tempfile.mkdtemp(prefix="medsam-throughput-"))
    try:
        for round_index in range(args.rounds):
            for workers in (1, 2) if round_index % 2 == 0 else (2, 1):
                out = scratch / f"w{workers}-r{round_index}"
                result = run_once(workers, args.limit, out, args.model_options)
                results[workers].append(result)
                print(f"round {round_index}: {workers} worker(s) {result['cases']} cases in "
                      f"{result['seconds']:.1f} s, peak PSS {result['peak_pss_mib']:.0f} MiB "
                      f"(RSS {result['peak_rss_mib']:.0f} MiB)", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rate = {w: float(np.median([60 * r["cases"] / r["seconds"] for r in rs])) for w, rs in results.items()}
    pss = {w: float(max(r["peak_pss_mib"] for r in rs)) for w, rs in results.items()}
    rss = {w: float(max(r["peak_rss_mib"] for r in rs)) for w, rs in results.items()}
    print(f"\ncpus={os.cpu_count()} load={os.getloadavg()[0]:.1f} cases/run={args.limit} rounds={args.rounds}")
    print(f"{'workers':>8s} {'cases/min':>10s} {'peak PSS MiB':>13s} {'peak RSS MiB':>13s}")
    for workers in (1, 2):
        print(f"{workers:8d} {rate[workers]:10.2f} {pss[workers]:13.0f} {rss[workers]:13.0f}")
    print(f"ratio 2 workers / 1 worker (baseline): {rate[2] / rate[1]:.2f}x")


if __name__ == "__main__":
    main()
