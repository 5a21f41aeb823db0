"""Per-image seconds of the LiteMedSAM image encoder, one slice at a time vs batched.

    python benchmarks/encoder_batch.py [rounds]
Rounds are interleaved so a noisy machine affects every variant alike.
"""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

warnings.simplefilter("ignore", FutureWarning)
from napari_medsam_eval.models.litemedsam import build, preprocess_slice  # noqa: E402

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
npz = Path(__file__).resolve().parents[2] / "shared/data/deeplesion_ct_npz/CT_Lesion_000001_02_01_008-023.npz"
imgs = np.load(npz)["imgs"]
backend = build(device="cpu", cache_size=0)
encoder = backend.model.image_encoder
xs = [torch.tensor(preprocess_slice(imgs[i])[0]).float().permute(2, 0, 1) for i in range(8)]
results: dict[int, list[float]] = {1: [], 2: [], 4: [], 8: []}
with torch.inference_mode():
    encoder(xs[0][None])
    for _ in range(rounds):
        for bs in results:
            start = time.perf_counter()
            for i in range(0, 8, bs):
                encoder(torch.stack(xs[i : i + bs]).contiguous() if bs > 1 else xs[i][None])
            results[bs].append((time.perf_counter() - start) / 8)
for bs, t in results.items():
    print(f"batch {bs}: median {np.median(t):.3f} s/image (min {np.min(t):.3f})", flush=True)
