"""The tables of docs/targets.md: regions of the BraTS-like phantom, and DeepLesion lesion by lesion.

Runs the default model and protocol (LiteMedSAM on CPU, ``medsam2``) twice, each into a run folder under
``--out``:

* ``sample_data/phantom_regions`` with the regions its ``dataset.json`` declares (whole tumour 1, 2, 3;
  tumour core 2, 3; enhancing tumour 3), predictions saved; each row is scored again by hand, from its
  saved file and the ground truth with ``medsam-eval score --targets``, and both DSCs are printed;
* DeepLesion (``../shared/data/deeplesion_ct_npz``) with ``--targets "lesion=1:lesions"``: every lesion
  (``lesions.csv``) and the task's counts.

    python scripts/targets_tables.py --out runs/targets [--shared-data ../shared/data]

About two minutes on two cores (DeepLesion's 78 slices take most of it).
"""
from __future__ import annotations

import argparse
import io
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from napari_medsam_eval.benchmark.lesion_table import lesion_table  # noqa: E402
from napari_medsam_eval.benchmark.store import load_table  # noqa: E402
from napari_medsam_eval.cli import main as cli  # noqa: E402
from napari_medsam_eval.report.lesion_section import lesion_summary  # noqa: E402


def run(dataset: Path, out: Path, *options: str) -> None:
    args = ["run", str(dataset), "--model", "litemedsam", "--out", str(out), "--quiet", "--no-report", *options]
    if out.exists():
        args.append("--resume")
    if cli(args) != 0:
        raise SystemExit(f"the run into {out} failed")


def by_hand(run_dir: Path, dataset: Path, row) -> float:
    """The row's DSC from its saved file, scored with ``medsam-eval score --targets`` as its target."""
    label = dataset / "labelsTr" / f"{row['case_id']}.nii.gz"
    target = f"{row['label_name']}={row['target_labels']}"
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        cli(["score", str(run_dir / row["prediction_path"]), str(label), "--targets", target, "--json"])
    return float(json.loads(buffer.getvalue())["labels"][0]["dice"])


def regions_table(out: Path) -> str:
    dataset = REPO / "sample_data" / "phantom_regions"
    run(dataset, out / "regions", "--save-predictions")
    table = load_table(out / "regions")
    lines = ["| case | whole tumour (1, 2, 3) | tumour core (2, 3) | enhancing tumour (3) |", "|---|---:|---:|---:|"]
    for case_id, rows in table.groupby("case_id", sort=True):
        cells = []
        for task in ("whole_tumor", "tumor_core", "enhancing_tumor"):
            row = rows[rows["label_name"] == task].iloc[0]
            cells.append(f"{row['dice']:.3f} ({by_hand(out / 'regions', dataset, row):.3f})")
        lines.append(f"| {case_id} | " + " | ".join(cells) + " |")
    medians = table.groupby("label_name")["dice"].median()
    lines.append("| median | " + " | ".join(f"{medians[t]:.3f}" for t in ("whole_tumor", "tumor_core",
                                                                          "enhancing_tumor")) + " |")
    return "\n".join(lines)


def lesions_tables(out: Path, shared: Path) -> str:
    run(shared / "deeplesion_ct_npz", out / "deeplesion", "--targets", "lesion=1:lesions")
    table = load_table(out / "deeplesion")
    lesions = lesion_table(table)
    summary = lesion_summary(lesions).iloc[0]
    lines = ["| set | true lesions | found | missed | false positives | detection F1 | mean lesion DSC |",
             "|---|---:|---:|---:|---:|---:|---:|",
             f"| deeplesion_ct_npz, 6 cases, LiteMedSAM | {summary['true lesions']} | {summary['found']} | "
             f"{summary['missed']} | {summary['false positives']} | {summary['detection F1']:.3f} | "
             f"{summary['mean lesion DSC']:.3f} |", "",
             "| case | lesion | mL | size | status | lesion DSC | lesion IoU | slices |",
             "|---|---:|---:|---|---|---:|---:|---|"]
    true = lesions[lesions["source"] == "true"]
    for _, lesion in true.iterrows():
        lines.append(f"| {lesion['case_id']} | {lesion['number']} | {lesion['volume_ml']:.1f} | {lesion['size']} | "
                     f"{lesion['status']} | {lesion['dice']:.3f} | {lesion['iou']:.3f} | "
                     f"{lesion['first_slice']}-{lesion['last_slice']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of the two run folders (kept)")
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args(argv)
    print("Regions of sample_data/phantom_regions, DSC of each row (scored again by hand from its saved file):\n")
    print(regions_table(args.out))
    print("\nDeepLesion, lesion by lesion:\n")
    print(lesions_tables(args.out, args.shared_data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
