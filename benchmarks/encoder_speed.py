"""Seconds per LiteMedSAM encoder pass on this machine; run it under different env vars.

    python benchmarks/encoder_speed.py [n_passes]
    MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=268435456 MALLOC_TOP_PAD_=268435456 \
        python benchmarks/encoder_speed.py

Prints wall seconds and the process's user/system CPU seconds per pass. On a
shared machine wall time is noisy; system time (page faults from glibc
returning and re-mapping the large activation buffers) is what the glibc
MALLOC_* variables remove, and it is little affected by other processes.
"""
from __future__ import annotations

import os
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

warnings.simplefilter("ignore", FutureWarning)
from napari_medsam_eval.models.litemedsam import build  # noqa: E402

n = int(sys.argv[1]) if len(sys.argv) > 1 else 12
backend = build(device="cpu", cache_size=0)
npz = Path(__file__).resolve().parents[2] / "shared/data/deeplesion_ct_npz/CT_Lesion_000001_02_01_008-023.npz"
data = np.load(npz)["imgs"]
backend.embed(data[0])  # warm-up
walls, users, syss = [], [], []
for i in range(n):
    r0, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    backend.embed(data[i % len(data)])
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    walls.append(time.perf_counter() - start)
    users.append(r1.ru_utime - r0.ru_utime)
    syss.append(r1.ru_stime - r0.ru_stime)
env = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
print(f"threads={torch.get_num_threads()} wall median={np.median(walls):.3f}s min={np.min(walls):.3f}s "
      f"user={np.median(users):.3f}s sys={np.median(syss):.3f}s env={env}")
