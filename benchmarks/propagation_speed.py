"""3D propagation throughput of LiteMedSAM on CPU: ours against the official script's loop.

    python benchmarks/propagation_speed.py [--quick] [--reps N] [--hippocampus-cases K] [--engine NAME]

Per case, two runs of the official 3D protocol (tight 3D box per target; DeepLesion:
one box of all lesion voxels; hippocampus: labels 1 and 2, one box each):

* **reference**: the loop of ``CVPR24_LiteMedSAM_infer.py`` written out below -
  eager PyTorch, ``torch.no_grad``, the image encoder run afresh for every slice
  of every box, batch 1;
* **ours**: :func:`napari_medsam_eval.propagation.propagate_official_litemedsam`
  with the default backend (``engine="auto"``), its embedding cache emptied before
  each case (so a second box reuses the slices the first encoded, but nothing
  carries over from another run).

slices/s counts (box, slice) steps, the same for both. The two runs of a case
alternate in order across repetitions and cases; per-case times are medians
over repetitions. CPU-s is the ratio of process CPU seconds (user + system),
which a busy machine distorts less than wall time. Agreement is the DSC between the two label maps (all labels).
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _litemedsam_common import box3d, deeplesion_cases, dice, hippocampus_cases, machine_state  # noqa: E402
from _machine import cpu_line  # noqa: E402

from napari_medsam_eval.models.litemedsam import (  # noqa: E402
    build, get_bbox256, pad_image, resize_box_to_256, resize_longest_side,
)
from napari_medsam_eval.propagation import propagate_official_litemedsam  # noqa: E402


# ---------------------------------------------------------------------------
# the reference: CVPR24_LiteMedSAM_infer.py's 3D loop, eager torch
# ---------------------------------------------------------------------------

@torch.no_grad()
def medsam_inference(model, img_embed, box_256, new_size, original_size) -> np.ndarray:
    box_torch = torch.as_tensor(box_256[None, None, ...], dtype=torch.float, device=img_embed.device)
    sparse, dense = model.prompt_encoder(points=None, boxes=box_torch, masks=None)
    low_res_logits, _ = model.mask_decoder(image_embeddings=img_embed, image_pe=model.prompt_encoder.get_dense_pe(),
                                           sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense,
                                           multimask_output=False)
    low_res = low_res_logits[..., : new_size[0], : new_size[1]]
    low_res = F.interpolate(low_res, size=original_size, mode="bilinear", align_corners=False)
    return (torch.sigmoid(low_res).squeeze().cpu().numpy() > 0.5).astype(np.uint8)


def _reference_slice(model, img_3d, temp, z, previous, mid_box, idx) -> None:
    img_2d = img_3d[z]
    img_3c = np.repeat(img_2d[:, :, None], 3, axis=-1) if img_2d.ndim == 2 else img_2d
    H, W = img_3c.shape[:2]
    img_256 = resize_longest_side(img_3c, 256)
    new_H, new_W = img_256.shape[:2]
    img_256 = (img_256 - img_256.min()) / np.clip(img_256.max() - img_256.min(), a_min=1e-8, a_max=None)
    tensor = torch.tensor(pad_image(img_256, 256)).float().permute(2, 0, 1).unsqueeze(0)
    with torch.no_grad():
        embedding = model.image_encoder(tensor)
    box_256 = resize_box_to_256(mid_box, original_size=(H, W))
    if previous is not None:
        pre_seg256 = resize_longest_side(temp[previous])
        if np.max(pre_seg256) > 0:
            box_256 = get_bbox256(pad_image(pre_seg256))
    seg = medsam_inference(model, embedding, box_256, (new_H, new_W), (H, W))
    temp[z, seg > 0] = idx


def reference_3d(model, img_3d: np.ndarray, boxes_3d: np.ndarray) -> np.ndarray:
    """``segs`` of the official script for ``boxes_3d`` (no early stop, no caching)."""
    segs = np.zeros(img_3d.shape[:3], dtype=np.uint8)
    for idx, (x_min, y_min, z_min, x_max, y_max, z_max) in enumerate(boxes_3d, start=1):
        temp = np.zeros(img_3d.shape[:3], dtype=np.uint8)
        mid_box = np.array([x_min, y_min, x_max, y_max])
        z_middle = int((z_max - z_min) / 2 + z_min)
        for z in range(z_middle, min(z_max + 1, img_3d.shape[0])):
            _reference_slice(model, img_3d, temp, z, None if z == z_middle else z - 1, mid_box, idx)
        for z in range(z_middle - 1, max(-1, z_min - 1), -1):
            _reference_slice(model, img_3d, temp, z, z + 1, mid_box, idx)
        segs[temp > 0] = idx
    return segs


def steps(boxes_3d: np.ndarray, n: int) -> int:
    """(box, slice) steps of the official protocol."""
    return int(sum(min(b[5], n - 1) - max(b[2], 0) + 1 for b in boxes_3d))


# ---------------------------------------------------------------------------
# the comparison
# ---------------------------------------------------------------------------

def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_case(reference_model, backend, case_id, volume, boxes, reps: int, first: int) -> dict[str, float]:
    """Median wall and CPU seconds of both runs; the order alternates with ``first + rep``."""
    walls: dict[str, list[float]] = {"reference": [], "ours": []}
    cpus: dict[str, list[float]] = {"reference": [], "ours": []}
    masks = {}
    for rep in range(reps):
        order = ("reference", "ours") if (first + rep) % 2 == 0 else ("ours", "reference")
        for which in order:
            backend.clear_cache()
            cpu, start = _cpu_seconds(), time.perf_counter()
            if which == "reference":
                masks[which] = reference_3d(reference_model, volume, boxes)
            else:
                masks[which] = propagate_official_litemedsam(backend, volume, boxes, case_id=(case_id, rep))
            walls[which].append(time.perf_counter() - start)
            cpus[which].append(_cpu_seconds() - cpu)
    row = {"steps": steps(boxes, volume.shape[0]), "dsc": dice(masks["reference"], masks["ours"]),
           "exact": bool(np.array_equal(masks["reference"], masks["ours"]))}
    for which in walls:
        row[which] = float(np.median(walls[which]))
        row[which + "_cpu"] = float(np.median(cpus[which]))
    return row


def summarise(name: str, rows: list[dict[str, float]], reps: int) -> str:
    n_steps = sum(r["steps"] for r in rows)
    ref_rate = n_steps / sum(r["reference"] for r in rows)
    our_rate = n_steps / sum(r["ours"] for r in rows)
    dscs = [r["dsc"] for r in rows]
    cpu_ratio = sum(r["reference_cpu"] for r in rows) / sum(r["ours_cpu"] for r in rows)
    return (f"{name:22s} {len(rows):5d} {n_steps:6d} {reps:4d} {ref_rate:9.3f} {our_rate:9.3f} "
            f"{our_rate / ref_rate:6.2f}x {cpu_ratio:6.2f}x {min(dscs):8.4f} {np.median(dscs):8.4f} "
            f"{sum(r['exact'] for r in rows):3d}/{len(rows)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 DeepLesion and 3 hippocampus cases, 1 repetition")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per case (default 2)")
    parser.add_argument("--hippocampus-cases", type=int, default=None, help="first K cases (default 10)")
    parser.add_argument("--hippocampus-reps", type=int, default=None, help="repetitions per hippocampus case "
                        "(default: --reps)")
    parser.add_argument("--engine", default="auto", help="engine of 'ours' (default auto)")
    parser.add_argument("--datasets", nargs="+", default=["deeplesion_ct_npz", "hippocampus_mri"],
                        choices=["deeplesion_ct_npz", "hippocampus_mri"], help="datasets to run (default both)")
    args = parser.parse_args()
    reps = args.reps or (1 if args.quick else 2)
    hippo_reps = args.hippocampus_reps or reps
    print(cpu_line())
    print(machine_state(), flush=True)
    reference_model = build(device="cpu", cache_size=0, engine="torch", embeddings=False).model
    backend = build(device="cpu", cache_size=256, engine=args.engine, embeddings=False)  # no persistent store
    print(f"ours: engine {backend.describe()['engine']}, torch threads {torch.get_num_threads()}", flush=True)
    loaders = {
        "deeplesion_ct_npz": lambda: [(cid, v, np.array([box3d(g)]))
                                      for cid, v, g in deeplesion_cases(2 if args.quick else None)],
        "hippocampus_mri": lambda: [(cid, v, np.array([box3d(g, 1), box3d(g, 2)]))
                                    for cid, v, g in hippocampus_cases(args.hippocampus_cases or (3 if args.quick else 10))],
    }
    datasets = {name: loaders[name]() for name in args.datasets}
    lines = []
    for name, cases in datasets.items():
        n_reps = hippo_reps if name == "hippocampus_mri" else reps
        rows = []
        for i, (case_id, volume, boxes) in enumerate(cases):
            row = run_case(reference_model, backend, case_id, volume, boxes, n_reps, first=i)
            rows.append(row)
            print(f"  {name} {case_id}: {row['steps']} steps, reference {row['reference']:.1f} s, "
                  f"ours {row['ours']:.1f} s, ratio {row['reference'] / row['ours']:.2f} (CPU-s {row['reference_cpu'] / row['ours_cpu']:.2f}), DSC {row['dsc']:.4f}",
                  flush=True)
        lines.append(summarise(name, rows, n_reps))
    print(f"\n{cpu_line()}\n{machine_state()}")
    print(f"{'dataset':22s} {'cases':>5s} {'steps':>6s} {'reps':>4s} {'ref sl/s':>9s} {'ours sl/s':>9s} "
          f"{'ratio':>7s} {'CPU-s':>7s} {'min DSC':>8s} {'med DSC':>8s} exact")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
