"""The table of docs/propagation.md#what-would-fix-it: each shared set run and explained (issue 59).

For each set, the default model and protocol (LiteMedSAM on CPU, ``medsam2``, each kind's default rules) run
into ``--out/<set>`` with an embedding store of its own (``--out/store``) and their predictions saved, then
``medsam-eval explain`` re-runs every scored result with each stage made perfect. Printed: per task, the
median DSC as run and under each variant (median gain), the stage that costs most, and the cost: the run's
segmentation seconds (its rows' ``time_total_s``) against explain's wall-clock seconds (model loading
included) on the same results, and their ratio; the CPU they ran on.

    python scripts/explain_tables.py --out runs/explain [--shared-data ../shared/data] [--hippocampus 20]

Run folders that exist are resumed, so a second call only prints (and explains what is new).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from napari_medsam_eval.benchmark.explain import explain_run  # noqa: E402
from napari_medsam_eval.cli import main as cli  # noqa: E402
from napari_medsam_eval.report.explain_section import run_seconds, task_gains  # noqa: E402
from napari_medsam_eval.studies.counterfactuals import STAGE_WORDS, VARIANTS, VARIANT_WORDS  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
from error_parts_table import dataset_path  # noqa: E402 - one rule for the sets' folders


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def run(dataset: Path, out: Path, store: Path, limit: int | None) -> None:
    args = ["run", str(dataset), "--model", "litemedsam", "--out", str(out), "--quiet", "--no-report",
            "--save-predictions", "--embeddings", str(store)] + (["--limit", str(limit)] if limit else [])
    if (out / "manifest.json").exists():
        args.append("--resume")
    if cli(args) != 0:
        raise SystemExit(f"the run into {out} failed")


def explained(run_dir: Path) -> tuple[object, float]:
    """explain.csv's table and explain's seconds on its results (its rows' ``seconds``: the model's loading
    is left out, as the run's ``time_total_s`` leaves it out)."""
    table = explain_run(run_dir)
    return table, float(table["seconds"].fillna(0).sum())


def table_lines(table) -> list[str]:
    lines = []
    for _, r in task_gains(table).iterrows():
        cells = [f"{r[f'dice_{v}']:.3f} ({r[f'gain_{v}']:+.3f})" if r[f"n_{v}"] else "n/a" for v in VARIANTS]
        costliest = STAGE_WORDS[r["costliest"]] if r["costliest"] else "none"
        lines.append(f"| {r['task']} | {r['n']} | {r['dice_run']:.3f} | {r['prompt_slice_dice']:.3f} | "
                     + " | ".join(cells) + f" | {costliest} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--hippocampus", type=int, default=20, metavar="K", help="hippocampus cases (default 20)")
    args = parser.parse_args()
    sets = [("hippocampus_mri", "shared:hippocampus_mri", args.hippocampus),
            ("deeplesion_ct_npz", "shared:deeplesion_ct_npz", None),
            ("cvc_clinicdb_video", "shared:cvc_clinicdb_video", None),
            ("phantom_ct", "npz:sample_data/CT_phantom_abdomen.npz", None),
            ("phantom_video", "repo:sample_data/phantom_video", None)]
    header = ["task", "n", "as run", "prompt slice", *(VARIANT_WORDS[v] for v in VARIANTS), "costs most"]
    lines = ["| " + " | ".join(header) + " |", "|---|---:|---:|---:|" + "---:|" * len(VARIANTS) + "---|"]
    costs = []
    for name, spec, limit in sets:
        out = args.out / name
        run(dataset_path(spec, args.shared_data, args.out), out, args.out / "store", limit)
        table, took = explained(out)
        lines += table_lines(table)
        ran = run_seconds(out, table)
        costs.append(f"{name}: the run {ran:.0f} s, explain {took:.0f} s on its results"
                     + (f" ({took / ran:.2f}x)" if ran else ""))
        print(f"{name}: done", file=sys.stderr, flush=True)
    print("\n".join(lines))
    print("\ncost (segmentation seconds; a run made beside other work is not a measure):\n" + "\n".join(costs))
    print(f"\nCPU: {cpu_name()}; LiteMedSAM on CPU, default protocol (medsam2) and rules; explain with the run's "
          "embedding store")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
