"""Why LiteMedSAM misses on the shared sets: the error parts of each task, and what corrections remove.

Runs the default model and protocol (LiteMedSAM on CPU, ``medsam2``) over the shared sets and the bundled
phantoms, then the ``corrections`` protocol on DeepLesion with boxes and with paint, each into a run folder
under ``--out`` (kept: ``--resume`` finishes a folder a killed run left), and prints two Markdown tables:

* per task: n, mean DSC, each error part's mean (they add up to 1 - mean DSC) and the results by their
  dominant part;
* corrections: how each part changed from the default run's (the same cases) to the corrected one.

    python scripts/error_parts_table.py --out runs/error_parts [--shared-data ../shared/data] [--limit N]

All four sets in about an hour on two cores (the 80 hippocampus cases take most of it); one embedding
store under ``--out`` lets the correction runs reuse the default run's slices.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from napari_medsam_eval.benchmark.store import load_table  # noqa: E402
from napari_medsam_eval.cli import main as cli  # noqa: E402
from napari_medsam_eval.evaluation.error_parts import OK, PARTS, part_name  # noqa: E402
from napari_medsam_eval.report.compare_parts import part_changes  # noqa: E402
from napari_medsam_eval.report.error_section import task_parts  # noqa: E402

#: (run name, dataset folder relative to the shared data or the repository, extra run options)
DEFAULT_RUNS = (
    ("deeplesion", "shared:deeplesion_ct_npz", []),
    ("hippocampus", "shared:hippocampus_mri", []),
    ("colonoscopy", "shared:cvc_clinicdb_video", []),
    ("phantom_ct", "npz:sample_data/CT_phantom_abdomen.npz", []),
    ("phantom_video", "repo:sample_data/phantom_video", []),
    ("phantom_2d", "repo:sample_data/phantom_2d", []),
)
#: the corrections runs, each compared with the default run of the same set
CORRECTION_RUNS = (
    ("deeplesion_box", "deeplesion", "shared:deeplesion_ct_npz", ["--protocol", "corrections", "--protocol-options",
                                                                  '{"correction": "box"}']),
    ("deeplesion_paint", "deeplesion", "shared:deeplesion_ct_npz", ["--protocol", "corrections", "--protocol-options",
                                                                    '{"correction": "paint"}']),
)


def dataset_path(spec: str, shared: Path, out: Path) -> Path:
    """``shared:<set>`` in the shared data, ``repo:<folder>`` in the repository, ``npz:<file>`` a one-case npz
    set (a folder under ``out`` linking the repository's file)."""
    where, relative = spec.split(":", 1)
    if where != "npz":
        return (shared if where == "shared" else REPO) / relative
    folder = out / "datasets" / Path(relative).stem
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / Path(relative).name
    if not link.exists():
        link.symlink_to(REPO / relative)
    return folder


def run(name: str, dataset: Path, extra: list[str], out: Path, store: Path, limit: int | None) -> Path:
    """The run folder of ``name``, made (or finished) with the default model."""
    folder = out / name
    args = ["run", str(dataset), "--model", "litemedsam", "--out", str(folder), "--embeddings", str(store),
            "--no-report", "--quiet", *extra, *(["--limit", str(limit)] if limit else [])]
    if (folder / "manifest.json").exists():
        args.append("--resume")
    print(f"[{name}] medsam-eval {' '.join(args)}", flush=True)
    if cli(args) != 0:
        raise SystemExit(f"the run {name} failed")
    return folder


def parts_markdown(folders: dict[str, Path]) -> str:
    """Per task: n, mean DSC, the prompt slice's median DSC, 1 - mean DSC and each part's mean, the results by
    dominant part."""
    header = ["task", "n", "mean DSC", "prompt-slice DSC (median)", "1 - mean DSC", *(part_name(p) for p in PARTS),
              "dominant: ok / " + " / ".join(part_name(p) for p in PARTS)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for folder in folders.values():
        table = load_table(folder)
        prompt_dice = table[table["status"] == "ok"].groupby("task")["prompt_slice_dice"].median()
        for _, r in task_parts(table).iterrows():
            counts = " / ".join(str(r[f"dominant_{k}"]) for k in (OK, *PARTS))
            on_prompt = prompt_dice.get(r["task"], float("nan"))
            lines.append(f"| {r['task']} | {r['n']} | {r['mean_dice']:.3f} | "
                         + ("n/a" if on_prompt != on_prompt else f"{on_prompt:.3f}") + f" | {r['error']:.3f} | "
                         + " | ".join(f"{r[p]:.3f}" for p in PARTS) + f" | {counts} |")
    return "\n".join(lines)


def changes_markdown(pairs: list[tuple[str, Path, Path]]) -> str:
    header = ["corrections", "task", "pairs", *(part_name(p) for p in PARTS), "in words"]
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (len(PARTS) + 1) + "---|"]
    for name, before, after in pairs:
        for _, r in part_changes(before, after).iterrows():
            if r["task"] == "(all)":
                continue
            lines.append(f"| {name} | {r['task']} | {r['n']} | " + " | ".join(f"{r[f'change_{p}']:+.3f}" for p in PARTS)
                         + f" | {r['sentence'].replace('B removes', 'they remove').replace('B adds', 'they add').replace('adds', 'add')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of the run folders (kept, resumable)")
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--limit", type=int, help="cases per set (default: all)")
    parser.add_argument("--only", nargs="*", help="run names to make (default: all)")
    args = parser.parse_args(argv)
    store = args.out / "embeddings"
    wanted = set(args.only or [n for n, *_ in DEFAULT_RUNS + CORRECTION_RUNS])
    folders = {name: run(name, dataset_path(spec, args.shared_data, args.out), extra, args.out, store, args.limit)
               for name, spec, extra in DEFAULT_RUNS if name in wanted}
    pairs = []
    for name, base, spec, extra in CORRECTION_RUNS:
        if name in wanted and base in folders:
            pairs.append((name.split("_", 1)[1], folders[base],
                          run(name, dataset_path(spec, args.shared_data, args.out), extra, args.out, store, args.limit)))
    print("\n" + parts_markdown(folders))
    if pairs:
        print("\n" + changes_markdown(pairs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
