"""Seconds per LiteMedSAM image-encoder pass for every engine variant, against eager torch.

    python benchmarks/encoder_variants.py [--rounds N] [--quick] [--only NAME ...]

Variants run interleaved (one pass of each per round, on rotating DeepLesion
slices) so a busy machine slows them alike; a short sleep before each timed
pass lets the previous runtime's spinning worker threads go idle. Beside the
median time: the ratio to eager torch fp32, the embedding's relative L2 error
and the DSC of the box-prompted mask against eager torch's mask (min over
the slices). Also prints user/system CPU seconds per pass (page faults show
up as system time; the MALLOC_* variables change it), the CPU (``_machine.cpu_line``),
the encoder's GFLOP per pass (torch's FlopCounterMode) and the GFLOP/s each
variant's median reached, with its share of the CPU's estimated fp32 peak.
"""
from __future__ import annotations

import argparse
import copy
import resource
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _litemedsam_common import DEEPLESION, dice, machine_state  # noqa: E402
from _machine import cpu_line, encoder_gflop, peak_gflops  # noqa: E402

from napari_medsam_eval.models.litemedsam import SliceEmbedding, build, preprocess_slice  # noqa: E402
from napari_medsam_eval.models.litemedsam_engines import build_encoder, to_batch  # noqa: E402

Variant = Callable[[np.ndarray], torch.Tensor]


def slices_with_boxes(n: int) -> list[tuple[np.ndarray, tuple[int, int, int, int]]]:
    """``n`` DeepLesion slices (the largest-lesion slice of each case, then more) and their GT boxes."""
    picked = []
    for path in sorted(DEEPLESION.glob("CT_Lesion_*.npz")):
        with np.load(path) as npz:
            imgs, gts = npz["imgs"], npz["gts"]
        for z in np.argsort(-(gts > 0).sum(axis=(1, 2)))[:2]:
            ys, xs = np.nonzero(gts[z])
            picked.append((imgs[z], (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))))
    return (picked[0::2] + picked[1::2])[:n]


def torch_variants(encoder: torch.nn.Module) -> dict[str, Variant]:
    def eager(padded, threads=None, autocast=False, module=encoder, channels_last=False):
        tensor = torch.tensor(padded).float().permute(2, 0, 1).unsqueeze(0)
        if channels_last:
            tensor = tensor.contiguous(memory_format=torch.channels_last)
        before = torch.get_num_threads()
        if threads:
            torch.set_num_threads(threads)
        try:
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                return module(tensor).float()
        finally:
            torch.set_num_threads(before)

    cl_encoder = copy.deepcopy(encoder).to(memory_format=torch.channels_last)
    variants: dict[str, Variant] = {
        "torch fp32": eager,
        "torch fp32 1 thread": lambda p: eager(p, threads=1),
        "torch channels-last": lambda p: eager(p, module=cl_encoder, channels_last=True),
        "torch bf16 autocast": lambda p: eager(p, autocast=True),
    }
    try:
        with torch.no_grad():
            traced = torch.jit.freeze(torch.jit.trace(encoder, torch.zeros(1, 3, 256, 256)).eval())
        variants["torch jit.trace+freeze"] = lambda p: eager(p, module=traced)
    except Exception as exc:  # noqa: BLE001 - an optional variant
        print(f"(torch.jit variant skipped: {type(exc).__name__}: {exc})")
    return variants


def batched(encoder: torch.nn.Module, size: int) -> Variant:
    """Per-image cost of a batch of ``size`` copies (what batching propagation slices would give)."""
    def run(padded: np.ndarray) -> torch.Tensor:
        batch = torch.from_numpy(np.repeat(to_batch(padded), size, axis=0))
        with torch.inference_mode():
            return encoder(batch)[:1].float()
    run.per_image = size  # type: ignore[attr-defined]
    return run


def exported_variants(encoder: torch.nn.Module, sha: str, threads: int) -> dict[str, Variant]:
    variants: dict[str, Variant] = {}
    for label, engine, precision in (("openvino f32", "openvino", "f32"), ("openvino bf16", "openvino", "bf16"),
                                     ("onnxruntime fp32", "onnxruntime", "f32")):
        try:
            variants[label] = build_encoder(engine, encoder, device=torch.device("cpu"), checkpoint_sha256=sha,
                                            num_threads=threads, precision=precision)
        except ImportError as exc:
            print(f"({label} skipped: {exc})")
    return variants


def agreement(backend, variant: Variant, data, reference) -> tuple[float, float]:
    """Worst relative embedding error and worst mask DSC against eager torch over ``data``."""
    errors, dscs = [], []
    for (image, box), (ref_emb, ref_mask) in zip(data, reference):
        padded, new_size, size = preprocess_slice(image)
        emb = variant(padded)
        errors.append(float((emb - ref_emb).norm() / ref_emb.norm()))
        mask = decode(backend, SliceEmbedding(emb, new_size, size, ""), box)
        dscs.append(dice(mask, ref_mask))
    return max(errors), min(dscs)


def decode(backend, emb: SliceEmbedding, box) -> np.ndarray:
    from napari_medsam_eval.models.litemedsam import resize_box_to_256

    logits, _ = backend._decode(emb, resize_box_to_256(np.asarray(box, dtype=np.float64), emb.original_size))
    return backend._threshold(logits)


def measure(variants: dict[str, Variant], data, rounds: int) -> dict[str, dict[str, list[float]]]:
    stats = {name: {"wall": [], "user": [], "sys": []} for name in variants}
    for variant in variants.values():  # warm-up: first calls allocate and pick kernels
        variant(preprocess_slice(data[0][0])[0])
    for r in range(rounds):
        padded = preprocess_slice(data[r % len(data)][0])[0]
        for name, variant in variants.items():
            time.sleep(0.05)
            r0, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            variant(padded)
            wall = time.perf_counter() - start
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            per = getattr(variant, "per_image", 1)
            stats[name]["wall"].append(wall / per)
            stats[name]["user"].append((r1.ru_utime - r0.ru_utime) / per)
            stats[name]["sys"].append((r1.ru_stime - r0.ru_stime) / per)
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="timed passes per variant (default 12, quick 4)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and slices")
    parser.add_argument("--only", nargs="*", help="variant names to run (substring match); eager torch always runs")
    args = parser.parse_args()
    rounds = args.rounds or (4 if args.quick else 12)
    print(cpu_line())
    print(machine_state())
    backend = build(device="cpu", cache_size=0, engine="torch", embeddings=False)
    encoder, threads = backend.model.image_encoder, torch.get_num_threads()
    gflop = encoder_gflop(encoder)
    data = slices_with_boxes(4 if args.quick else 12)
    variants = torch_variants(encoder)
    variants["torch batch 4 (per image)"] = batched(encoder, 4)
    variants.update(exported_variants(encoder, backend.checkpoint_sha256, threads))
    if args.only:
        variants = {k: v for k, v in variants.items() if k == "torch fp32" or any(s in k for s in args.only)}
    reference = []
    for image, box in data:
        padded, new_size, size = preprocess_slice(image)
        emb = variants["torch fp32"](padded)
        reference.append((emb, decode(backend, SliceEmbedding(emb, new_size, size, ""), box)))
    stats = measure(variants, data, rounds)
    base = float(np.median(stats["torch fp32"]["wall"]))
    peak = peak_gflops()
    print(f"\n{threads} torch threads, {rounds} rounds, agreement over {len(data)} DeepLesion slices; {machine_state()}")
    print(cpu_line())
    print(f"encoder: {gflop:.1f} GFLOP per pass (FlopCounterMode, eager torch, 1 x 3 x 256 x 256); "
          f"GFLOP/s = that / the median; % = share of the estimated fp32 peak")
    print(f"{'variant':28s} {'median s':>9s} {'p90 s':>7s} {'speed-up':>8s} {'GFLOP/s':>8s} {'% peak':>6s} "
          f"{'user s':>7s} {'sys s':>6s} {'emb rel err':>11s} {'min mask DSC':>12s}")
    for name, variant in variants.items():
        wall = stats[name]["wall"]
        err, dsc = agreement(backend, variant, data, reference)
        rate = gflop / float(np.median(wall))
        share = f"{100 * rate / peak:5.0f}%" if peak else "   n/a"
        print(f"{name:28s} {np.median(wall):9.3f} {np.percentile(wall, 90):7.3f} {base / np.median(wall):7.2f}x "
              f"{rate:8.0f} {share:>6s} {np.median(stats[name]['user']):7.3f} {np.median(stats[name]['sys']):6.3f} {err:11.2e} {dsc:12.4f}")


if __name__ == "__main__":
    main()
