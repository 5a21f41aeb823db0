"""LiteMedSAM on hippocampus_mri: official 3D-box script vs our middle-slice propagation.

    python benchmarks/hippocampus_litemedsam.py [n_cases] [margins...]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from napari_medsam_eval.core.intensity import prepare_intensity
from napari_medsam_eval.models.litemedsam import build
from napari_medsam_eval.protocols.medsam2 import MedSAM2Protocol  # noqa: E402
from napari_medsam_eval.propagation import propagate_official_litemedsam, propagate_volume

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_line  # noqa: E402

ROOT = Path(__file__).resolve().parents[2] / "shared" / "data" / "hippocampus_mri"


def dsc(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a > 0, b > 0
    s = a.sum() + b.sum()
    return float("nan") if s == 0 else 2.0 * (a & b).sum() / s


def main() -> None:
    n_cases = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    margins = [int(m) for m in sys.argv[2:]] or [3]
    print(cpu_line(), flush=True)
    backend = build(device="cpu", cache_size=128, embeddings=False)
    rows = {("official", 1): [], ("official", 2): []}
    rows.update({(f"ours_m{m}", lab): [] for m in margins for lab in (1, 2)})
    start = time.time()
    for path in sorted((ROOT / "imagesTr").glob("*.nii.gz"))[:n_cases]:
        image = sitk.GetArrayFromImage(sitk.ReadImage(str(path)))
        label = sitk.GetArrayFromImage(sitk.ReadImage(str(ROOT / "labelsTr" / path.name))).astype(np.int16)
        vol = prepare_intensity(image, "MR")  # raw uint8 files are prepared too
        case = path.name.split(".")[0]
        for lab in (1, 2):
            z, y, x = np.where(label == lab)
            seg = propagate_official_litemedsam(backend, vol, [[x.min(), y.min(), z.min(), x.max(), y.max(), z.max()]],
                                                case_id=case)
            rows[("official", lab)].append(dsc(seg, label == lab))
            prompt = MedSAM2Protocol().prompt_for_mask(label == lab, "volume", lab)
            for m in margins:
                ours = propagate_volume(backend, vol, prompt, margin=m, case_id=case)
                rows[(f"ours_m{m}", lab)].append(dsc(ours, label == lab))
        print(case, {f"{k[0]}/{k[1]}": round(v[-1], 3) for k, v in rows.items()},
              f"encodes={backend.encoder_calls} t={time.time() - start:.0f}s", flush=True)
    for k, v in rows.items():
        print(f"{k[0]} label {k[1]}: median {np.median(v):.3f} mean {np.mean(v):.3f} n={len(v)}")


if __name__ == "__main__":
    main()
