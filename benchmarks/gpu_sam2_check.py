"""Time MedSAM2 (512 config) bidirectional propagation on the DeepLesion npz volumes.

Builds MedSAM2 with seeded random weights (or ``--checkpoint``) on CUDA when present,
else CPU, and runs the MedSAM2 3D protocol (box on the middle slice of the lesion,
forward + reverse, union) on each ``CT_Lesion_*.npz``. Prints one line per volume and
a JSON summary (frames/s). Random weights make the masks meaningless; only speed and
that the machinery runs on the device are checked.

    python benchmarks/gpu_sam2_check.py                     # auto device, all volumes
    python benchmarks/gpu_sam2_check.py --device cpu --limit 1
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_line  # noqa: E402

DEFAULT_DATA = Path(os.environ.get("MEDSAM_EVAL_SHARED_DATA", REPO.parent / "shared" / "data")) / "deeplesion_ct_npz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of CT_Lesion_*.npz (default: %(default)s)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available)")
    parser.add_argument("--checkpoint", default=None, help="MedSAM2 checkpoint; random weights when omitted")
    parser.add_argument("--dtype", default=None, help="CUDA autocast dtype (default bfloat16; float32 = off)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many volumes")
    args = parser.parse_args(argv)

    import torch

    from napari_medsam_eval.models.sam2_backend import build_medsam2
    from napari_medsam_eval.core.prompt import Prompt

    print(cpu_line(), flush=True)
    files = sorted(args.data.glob("*.npz"))[: args.limit]
    if not files:
        print(f"no npz files in {args.data}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    backend = build_medsam2(
        checkpoint=args.checkpoint, random_init=args.checkpoint is None, device=args.device, dtype=args.dtype
    )
    build_s = time.perf_counter() - started
    facts = backend.describe()
    print(f"built {facts['name']} on {facts['device']} in {build_s:.1f}s "
          f"(autocast {facts['autocast_dtype']}, hole filling: {facts['hole_filling']})", flush=True)
    if backend.device.type == "cuda":
        print("gpu:", torch.cuda.get_device_name(backend.device), flush=True)

    def case(path: Path) -> tuple[np.ndarray, Prompt]:
        data = np.load(path)
        imgs, gts = data["imgs"], data["gts"]
        z = np.flatnonzero(gts.any(axis=(1, 2)))
        key = int(z.min() + (z.max() - z.min()) // 2)
        ys, xs = np.nonzero(gts[key])
        box = (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))
        return imgs, Prompt(1, slice_index=key, boxes=[box], protocol="medsam2")

    def sync() -> None:
        if backend.device.type == "cuda":
            torch.cuda.synchronize(backend.device)

    # warm-up (CUDA context, kernels) on the first volume, not timed
    imgs, prompt = case(files[0])
    warm = time.perf_counter()
    backend.propagate(imgs[: min(4, len(imgs))], Prompt(1, slice_index=1, boxes=prompt.boxes))
    sync()
    print(f"warm-up {time.perf_counter() - warm:.2f}s", flush=True)
    if backend.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(backend.device)

    rows = []
    for path in files:
        imgs, prompt = case(path)
        sync()
        start = time.perf_counter()
        seg = backend.propagate(imgs, prompt, reverse=True)
        sync()
        seconds = time.perf_counter() - start
        run = backend.last_run
        frames = len(run["forward_frames"]) + len(run["reverse_frames"])
        rows.append({"file": path.name, "slices": int(imgs.shape[0]), "frames_run": frames, "seconds": seconds,
                     "frames_per_s": frames / seconds, "foreground_voxels": int(seg.sum())})
        print(f"{path.name}: {imgs.shape[0]} slices, {frames} frames in {seconds:.2f}s "
              f"= {frames / seconds:.1f} frames/s ({seconds / frames:.3f} s/frame)", flush=True)

    total_frames = sum(r["frames_run"] for r in rows)
    total_s = sum(r["seconds"] for r in rows)
    summary = {
        "cpu": cpu_line(),
        "device": facts["device"],
        "gpu": torch.cuda.get_device_name(backend.device) if backend.device.type == "cuda" else None,
        "autocast_dtype": facts["autocast_dtype"],
        "hole_filling": facts["hole_filling"],
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "build_s": build_s,
        "volumes": len(rows),
        "frames": total_frames,
        "seconds": total_s,
        "frames_per_s": total_frames / total_s,
        "s_per_frame": total_s / total_frames,
        "peak_gpu_mib": (torch.cuda.max_memory_allocated(backend.device) / 2**20
                         if backend.device.type == "cuda" else None),
        "rows": rows,
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
