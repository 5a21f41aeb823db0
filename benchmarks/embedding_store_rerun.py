"""A re-run with the embedding store: two ``medsam-eval run`` over DeepLesion sharing a fresh ``--embeddings`` folder.

    python benchmarks/embedding_store_rerun.py [--quick] [--limit K] [--protocol medsam2] [--keep DIR]

Issue 18's target: a second run (LiteMedSAM, any protocol) over
``../shared/data/deeplesion_ct_npz`` with the store takes at most 1/5 of the
first run's time, with an identical results table. Each run is the real CLI in a
new process (``medsam-eval run DATA --model litemedsam --protocol P --embeddings
STORE --out RUN_i --no-report --quiet``), so process start, imports and the model
build count in both wall times, as they do for a user. The store starts empty
(a temporary folder; ``$MEDSAM_EVAL_EMBEDDINGS*`` are removed from the runs'
environment): the first run encodes every slice it segments and stores it, the
second reads them back.

Printed: the CPU; per run the wall seconds, the table's summed ``time_encoder_s``
and ``time_total_s``; the second/first ratios; the store's entries and size; the
encoder's GFLOP per pass and the GFLOP/s the first run's encoding reached (stored
slices x GFLOP / summed encoder seconds: store writes included, so a lower bound);
and whether the two results tables agree exactly in dice, iou, nsd and hd95.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _litemedsam_common import DEEPLESION, machine_state  # noqa: E402
from _machine import cpu_line, encoder_gflop, gflops_text  # noqa: E402

from napari_medsam_eval.benchmark.store import load_table  # noqa: E402
from napari_medsam_eval.embeddings import EmbeddingStore, format_size  # noqa: E402

SCORE_COLUMNS = ("dice", "iou", "nsd", "hd95")


def run_cli(out: Path, store: Path, protocol: str, limit: int | None) -> float:
    """Wall seconds of one ``medsam-eval run`` into ``out`` with the store ``store``."""
    command = [str(Path(sys.executable).with_name("medsam-eval")), "run", str(DEEPLESION), "--model", "litemedsam",
               "--protocol", protocol, "--embeddings", str(store), "--out", str(out), "--no-report", "--quiet"]
    if limit:
        command += ["--limit", str(limit)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEDSAM_EVAL_EMBEDDINGS")}
    start = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def same_scores(first, second) -> tuple[bool, str]:
    """Whether the two tables hold the same rows with equal score columns (NaN equals NaN)."""
    keys = ["case_id", "target_label"]
    a, b = first.sort_values(keys).reset_index(drop=True), second.sort_values(keys).reset_index(drop=True)
    if len(a) != len(b) or list(a[keys].astype(str).itertuples(index=False)) != list(b[keys].astype(str).itertuples(index=False)):
        return False, f"different rows ({len(a)} vs {len(b)})"
    differing = [c for c in SCORE_COLUMNS if c in a and not np.array_equal(a[c].to_numpy(float), b[c].to_numpy(float),
                                                                           equal_nan=True)]
    if differing:
        worst = {c: float(np.nanmax(np.abs(a[c].to_numpy(float) - b[c].to_numpy(float)))) for c in differing}
        return False, f"{len(a)} rows; differ in {', '.join(f'{c} (max |diff| {d:.2e})' for c, d in worst.items())}"
    return True, f"{len(a)} rows, {'/'.join(SCORE_COLUMNS)} equal"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first 2 cases")
    parser.add_argument("--limit", type=int, default=None, help="the first K cases (default all 6; quick 2)")
    parser.add_argument("--protocol", default="medsam2", help="prompt protocol (default medsam2)")
    parser.add_argument("--keep", type=Path, default=None, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    limit = args.limit or (2 if args.quick else None)
    print(cpu_line())
    print(machine_state(), flush=True)
    gflop = encoder_gflop()
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="medsam-store-rerun-"))
    store_dir = scratch / "embeddings"
    if store_dir.exists():
        raise SystemExit(f"{store_dir} exists: the store must start empty")
    try:
        walls, tables = [], []
        for i in (1, 2):
            seconds = run_cli(scratch / f"run{i}", store_dir, args.protocol, limit)
            table = load_table(scratch / f"run{i}")
            walls.append(seconds)
            tables.append(table)
            print(f"run {i}: {table['case_id'].nunique()} cases, {len(table)} rows, wall {seconds:.1f} s, "
                  f"time_encoder_s {table['time_encoder_s'].sum():.2f} s, time_total_s {table['time_total_s'].sum():.2f} s",
                  flush=True)
            if i == 1:
                info = EmbeddingStore(store_dir, limit_bytes=None).info()
                entries, size = info.entries, info.size_bytes
        identical, detail = same_scores(*tables)
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    enc = [float(t["time_encoder_s"].sum()) for t in tables]
    tot = [float(t["time_total_s"].sum()) for t in tables]
    ratio = walls[1] / walls[0]
    print(f"\n{cpu_line()}\n{machine_state()}")
    print(f"dataset {DEEPLESION.name}, LiteMedSAM, protocol {args.protocol}, {tables[0]['case_id'].nunique()} cases; "
          f"store after run 1: {entries} entries, {format_size(size)}")
    print(f"{'':24s} {'run 1':>9s} {'run 2':>9s} {'run2/run1':>10s}")
    print(f"{'wall s (CLI process)':24s} {walls[0]:9.2f} {walls[1]:9.2f} {ratio:10.3f}")
    print(f"{'time_encoder_s (sum)':24s} {enc[0]:9.2f} {enc[1]:9.2f} {enc[1] / enc[0] if enc[0] else float('nan'):10.3f}")
    print(f"{'time_total_s (sum)':24s} {tot[0]:9.2f} {tot[1]:9.2f} {tot[1] / tot[0] if tot[0] else float('nan'):10.3f}")
    rest = [w - t for w, t in zip(walls, tot)]
    print(f"{'wall - time_total_s':24s} {rest[0]:9.2f} {rest[1]:9.2f}   (process start, imports, model build, writing)")
    print(f"speed-up of the re-run (wall): {walls[0] / walls[1]:.2f}x; target run2/run1 <= 0.20: "
          f"{'met' if ratio <= 0.2 else 'not met'}")
    if entries and enc[0]:
        print(f"encoder: {gflop:.1f} GFLOP per pass; run 1 encoded {entries} slices in {enc[0]:.2f} s "
              f"({enc[0] / entries:.3f} s per slice, store writes included): {gflops_text(gflop, enc[0] / entries)}")
    print(f"results tables identical: {'yes' if identical else 'NO'} ({detail})")


if __name__ == "__main__":
    main()
