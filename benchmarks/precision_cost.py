"""What a cheaper precision costs, per dataset: LiteMedSAM's encoder at fp32, bf16 and int8.

    python benchmarks/precision_cost.py [--quick] [--out DIR] [--precisions fp32 bf16 int8] [--sets deeplesion ...]

For each precision: the image encoder's seconds per pass (median over real slices, after a
warm-up) and the rate it reaches (GFLOP/s: the fp32 encoder's FLOP count per pass divided by the
time; bf16 and int8 operations counted as such, one per multiply-add half) and how far its embedding
lies from fp32's on those slices (median relative L2), then ``medsam-eval
run`` (protocol medsam2, default rules) over each shared set: DeepLesion (6 CT volumes),
hippocampus (80 MRI volumes; --quick: the first 10), CVC-ClinicDB (10 colonoscopy clips;
--quick: 5) and the bundled phantoms (CT volume, video, 2D image). Per dataset it prints the
run's wall time, the median DSC, and against fp32 per case (case, target): the median and the
largest |DSC difference| and the share of cases within 0.01. INT8 is calibrated on the default
calibration set (``napari_medsam_eval.models.litemedsam_precision``: SAM-Med2D CT, Kvasir-SEG,
BraTS FLAIR slices), none of which is evaluated here; the first int8 build quantizes (about a
minute or two) and is cached.

The run folders stay in --out (default: a temporary folder), so ``medsam-eval compare
OUT/fp32/<set> OUT/int8/<set>`` shows a set case by case. Ratios within one run are fair; the
absolute times depend on the load of the machine (printed).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _litemedsam_common import SHARED_DATA, machine_state  # noqa: E402
from _machine import cpu_line, encoder_gflop  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PRECISIONS = ("fp32", "bf16", "int8")
SETS = ("deeplesion", "hippocampus", "colonoscopy", "phantom_ct", "phantom_video", "phantom_2d")


def datasets(quick: bool, out: Path) -> list[tuple[str, Path, int | None]]:
    """(name, folder, limit) of the sets measured; the CT phantom npz gets a folder of its own (a link)."""
    phantom_ct = out / "_phantom_ct"
    phantom_ct.mkdir(parents=True, exist_ok=True)
    link = phantom_ct / "CT_phantom_abdomen.npz"
    if not link.exists():
        link.symlink_to(REPO / "sample_data" / "CT_phantom_abdomen.npz")
    return [
        ("deeplesion", SHARED_DATA / "deeplesion_ct_npz", None),
        ("hippocampus", SHARED_DATA / "hippocampus_mri", 10 if quick else None),
        ("colonoscopy", SHARED_DATA / "cvc_clinicdb_video", 5 if quick else None),
        ("phantom_ct", phantom_ct, None),
        ("phantom_video", REPO / "sample_data" / "phantom_video", None),
        ("phantom_2d", REPO / "sample_data" / "phantom_2d", None),
    ]


def options(precision: str) -> dict:
    return {} if precision == "fp32" else {"precision": precision}


def runs_here(precision: str) -> bool:
    """False (and why, printed) for a precision this CPU does not compute (bf16 without bf16 arithmetic)."""
    from napari_medsam_eval.core.errors import ModelOptionError
    from napari_medsam_eval.models.litemedsam_precision import check_precision_here

    try:
        check_precision_here(precision, "openvino", bf16_device=False)
    except ModelOptionError as error:
        print(f"encoder {precision:<5} not run: {error}")
        return False
    return True


def encoder_speeds(precisions: list[str], slices: list[np.ndarray], repeats: int) -> tuple[dict, dict, dict]:
    """Median seconds per encoder pass of each precision over ``slices`` (each preprocessed), after two
    warm-up passes; the precisions take turns pass by pass, so a change of the machine's load hits all alike.
    Also each precision's embedding distance from fp32's on the distinct slices (median relative L2)."""
    from napari_medsam_eval.models import build_backend
    from napari_medsam_eval.models.litemedsam import preprocess_slice

    engines, facts = {}, {}
    for precision in precisions:
        backend = build_backend("litemedsam", engine="openvino", cache_size=0, **options(precision))
        engines[precision], facts[precision] = backend.encoder_engine, backend.describe()
    inputs = [preprocess_slice(s)[0] for s in slices]
    distinct = inputs[:len({s.tobytes() for s in slices})]
    ref = [engines["fp32"](padded).numpy() for padded in distinct]
    errors = {p: float(np.median([np.linalg.norm(e(x).numpy() - r) / np.linalg.norm(r) for x, r in zip(distinct, ref)]))
              for p, e in engines.items()}
    for engine in engines.values():
        for padded in inputs[:2]:
            engine(padded)
    times: dict[str, list[float]] = {p: [] for p in precisions}
    for i in range(repeats):
        for precision, engine in engines.items():
            start = time.perf_counter()
            engine(inputs[i % len(inputs)])
            times[precision].append(time.perf_counter() - start)
    return {p: float(np.median(t)) for p, t in times.items()}, facts, errors


def real_slices(count: int) -> list[np.ndarray]:
    """Middle slices of the DeepLesion volumes (uint8 CT, as the runs see them)."""
    out = []
    for path in sorted((SHARED_DATA / "deeplesion_ct_npz").glob("*.npz")):
        with np.load(path) as npz:
            volume = npz["imgs"]
        out.append(volume[len(volume) // 2])
    return (out * count)[:count]


def run_set(precision: str, folder: Path, limit: int | None, out: Path) -> tuple[float, object]:
    from napari_medsam_eval.benchmark import run_benchmark

    start = time.perf_counter()
    table = run_benchmark(folder, out, "litemedsam", "medsam2", model_options=options(precision), limit=limit)
    return time.perf_counter() - start, table


def cost_line(name: str, precision: str, wall: float, table, base) -> str:
    ok = table[table["status"] == "ok"].set_index(["case_id", "target_label"])["dice"]
    text = f"{name:<14} {precision:<5} {wall:8.1f} s  n={len(ok):<3} median DSC {ok.median():.4f}"
    if base is None:
        return text
    ref = base[base["status"] == "ok"].set_index(["case_id", "target_label"])["dice"]
    paired = (ok - ref).dropna().abs()
    if not len(paired):
        return text + "  (no paired cases)"
    return (text + f"  |dDSC| median {paired.median():.4f} max {paired.max():.4f}"
                   f"  within 0.01: {100 * (paired <= 0.01).mean():.0f}% ({int((paired <= 0.01).sum())}/{len(paired)})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="hippocampus first 10, colonoscopy first 5")
    parser.add_argument("--out", type=Path, help="run folders (default: a temporary folder)")
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    parser.add_argument("--repeats", type=int, default=12, help="timed encoder passes per precision")
    parser.add_argument("--encoder-only", action="store_true", help="time the encoders only, no runs")
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS), help="the sets run (default: all)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MEDSAM_EVAL_SHARED_DATA", str(SHARED_DATA))
    out = args.out or Path(tempfile.mkdtemp(prefix="precision-cost-"))
    print(cpu_line())
    print(machine_state())
    precisions = ["fp32", *[p for p in args.precisions if p != "fp32" and runs_here(p)]]  # fp32 first: the baseline
    gflop = encoder_gflop()
    slices = real_slices(6)
    speed, facts, errors = encoder_speeds(precisions, slices, args.repeats)
    for precision, seconds in speed.items():
        calibration = facts[precision].get("calibration")
        extra = f"  calibration {calibration['id']} ({calibration['files']} files)" if calibration else ""
        extra += f"  [{facts[precision].get('quantization') or facts[precision].get('inference_precision')}]"
        print(f"encoder {precision:<5} {seconds:.3f} s/pass  {gflop / seconds:6.1f} GFLOP/s  "
              f"x{speed['fp32'] / seconds:.2f} vs fp32 (median of {args.repeats}, taking turns)  embedding vs fp32 "
              f"{errors[precision]:.4f} (median relative L2, {len(slices)} slices){extra}", flush=True)
    if args.encoder_only:
        print(machine_state())
        return 0
    print(f"\nruns (protocol medsam2) into {out}; |dDSC| per (case, target) against fp32")
    for name, folder, limit in [d for d in datasets(args.quick, out) if d[0] in args.sets]:
        base = None
        for precision in precisions:
            target = out / precision / name
            if target.exists():
                import shutil

                shutil.rmtree(target)
            wall, table = run_set(precision, folder, limit, target)
            print(cost_line(name, precision, wall, table, base), flush=True)
            base = table if precision == "fp32" else base
    print(machine_state())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
