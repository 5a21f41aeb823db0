"""Seconds per LiteMedSAM encoder pass on this machine (run under different env vars).

    python benchmarks/encoder_speed.py [n_passes]
    MALLOC_MMAP_THRESHOLD_=33554432 python benchmarks/encoder_speed.py
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch

from napari_medsam_eval.models.litemedsam import build

n = int(sys.argv[1]) if len(sys.argv) > 1 else 12
backend = build(device="cpu", cache_size=0)
data = np.load(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "deeplesion_ct_npz",
                            "CT_Lesion_000001_02_01_008-023.npz"))["imgs"]
backend.embed(data[0])  # warm-up
times = []
for i in range(n):
    start = time.perf_counter()
    backend.embed(data[i % len(data)])
    times.append(time.perf_counter() - start)
env = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
print(f"threads={torch.get_num_threads()} env={env} median={np.median(times):.3f}s mean={np.mean(times):.3f}s "
      f"min={np.min(times):.3f}s")
