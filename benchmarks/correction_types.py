"""Box vs point vs paint corrections: what each simulated user reaches in 0..K steps.

    python benchmarks/correction_types.py [--quick] [--model litemedsam] [--types box point paint paint-region]
                                          [--out DIR] [--embeddings DIR]

Runs the ``corrections`` protocol (K = 5) once per correction type on DeepLesion (all 6
cases) and on the first 20 hippocampus cases (``--quick``: 2 and 4), through
:func:`~napari_medsam_eval.benchmark.runner.run_benchmark` exactly as ``medsam-eval run ...
--protocol corrections --protocol-options '{"correction": TYPE}'`` does, and prints per task
and type the median DSC after each step, the gain after K over the propagated result (step
0) and the median NoC@80/85/90 (K + 1 = not reached), with the CPU it ran on. The runs share
one embedding store (``--embeddings``, default a folder under ``--out``), so each slice is
encoded once for all types.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from napari_medsam_eval.benchmark.runner import run_benchmark
from napari_medsam_eval.evaluation.interaction_effort import NOC_COLUMNS, curves_by_task, format_noc, noc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_line  # noqa: E402

DATA = Path(os.environ.get("MEDSAM_EVAL_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
#: (folder, cases) measured; --quick takes fewer
DATASETS = (("deeplesion_ct_npz", 6), ("hippocampus_mri", 20))
TYPES = ("box", "point", "paint", "paint-region")


def summarise(table, kind: str, k: int) -> list[str]:
    """One line per task: the median DSC after 0..K, the gain after K and the median NoC."""
    lines = []
    for task, curves in curves_by_task(table).items():
        medians = np.nanmedian(curves, axis=0)
        nocs = [np.median([noc(c, t) for c in curves]) for t in (0.80, 0.85, 0.90)]
        steps = " ".join(f"{v:.3f}" for v in medians)
        lines.append(f"{task:32s} {kind:12s} n={curves.shape[0]:2d}  {steps}  gain {medians[-1] - medians[0]:+.3f}  "
                     f"NoC@80/85/90 {' / '.join(format_noc(v, k) for v in nocs)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--model", default="litemedsam")
    parser.add_argument("--types", nargs="+", default=list(TYPES))
    parser.add_argument("--datasets", nargs="+", default=[name for name, _ in DATASETS])
    parser.add_argument("--interactions", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("/tmp/correction_types"))
    parser.add_argument("--embeddings", type=Path, default=None)
    parser.add_argument("--summarise", type=Path, nargs="+", metavar="RUN",
                        help="only print the summary of run folders already written (finished or not)")
    args = parser.parse_args()
    print(cpu_line(), flush=True)
    if args.summarise:
        from napari_medsam_eval.report.results import load_run

        for run in args.summarise:
            loaded = load_run(run)
            kind = ((loaded.manifest.get("protocol") or {}).get("options") or {}).get("correction", "auto")
            cases = loaded.table["case_id"].nunique()
            print(f"{run} ({cases} cases)")
            print("\n".join(summarise(loaded.table, kind, args.interactions)))
        return
    store = args.embeddings or args.out / "embeddings"
    model_options = {"device": "cpu"} | ({"embeddings": str(store)} if args.model == "litemedsam" else {})
    lines = ["task                             correction   n     median DSC after 0..K steps"]
    counts = dict(DATASETS)
    for name in args.datasets:
        count = counts[name]
        limit = max(2, count // 5) if args.quick else count
        for kind in args.types:
            start = time.perf_counter()
            table = run_benchmark(DATA / name, args.out / f"{name}_{kind}", args.model, "corrections",
                                  model_options=model_options, limit=limit,
                                  protocol_options={"interactions": args.interactions, "correction": kind})
            bad = table[table["status"] != "ok"]
            print(f"{name} {kind}: {len(table)} targets in {time.perf_counter() - start:.0f} s"
                  + (f"; {len(bad)} not ok: {bad['error'].tolist()}" if len(bad) else ""), flush=True)
            new = summarise(table, kind, args.interactions)
            lines += new
            print("\n".join(new), flush=True)
    print("\n" + "\n".join(lines))
    print(f"\n{', '.join(NOC_COLUMNS)}: median over targets; > K = not reached within K")


if __name__ == "__main__":
    main()
