"""Helpers shared by the LiteMedSAM speed benchmarks (data loading, statistics, the machine's state)."""
from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

warnings.simplefilter("ignore", FutureWarning)

SHARED_DATA = Path(os.environ.get("MEDSAM_EVAL_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
DEEPLESION = SHARED_DATA / "deeplesion_ct_npz"
HIPPOCAMPUS = SHARED_DATA / "hippocampus_mri"


def dice(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a) > 0, np.asarray(b) > 0
    total = a.sum() + b.sum()
    return 1.0 if total == 0 else float(2.0 * (a & b).sum() / total)


def timed(func: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = func()
    return time.perf_counter() - start, result


def machine_state() -> str:
    """Load average and the glibc allocator variables: both change these numbers a lot."""
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    malloc = {k: v for k, v in sorted(os.environ.items()) if k.startswith("MALLOC_")}
    return f"load average {load}; cpus {os.cpu_count()}; {malloc or 'no MALLOC_* set'}"


def deeplesion_cases(limit: int | None = None) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(case id, uint8 volume, label map) of the DeepLesion npz cases."""
    for path in sorted(DEEPLESION.glob("CT_Lesion_*.npz"))[:limit]:
        with np.load(path) as npz:
            yield path.stem, npz["imgs"], npz["gts"]


def hippocampus_cases(limit: int | None = 10) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(case id, uint8 volume, label map) of the hippocampus MRI cases, prepared as
    ``tests/test_propagation.py`` does (``prepare_intensity(..., "MR")``)."""
    import SimpleITK as sitk

    from napari_medsam_eval.core.intensity import prepare_intensity

    folder = HIPPOCAMPUS
    for name in sorted(p.name for p in (folder / "imagesTr").glob("*.nii.gz"))[:limit]:
        image = sitk.GetArrayFromImage(sitk.ReadImage(str(folder / "imagesTr" / name)))
        label = np.rint(sitk.GetArrayFromImage(sitk.ReadImage(str(folder / "labelsTr" / name)))).astype(np.int16)
        yield name, prepare_intensity(image, "MR"), label


def box3d(label_map: np.ndarray, target: int | None = None) -> list[int]:
    """The tight 3D box ``[x_min, y_min, z_min, x_max, y_max, z_max]`` of a label (all labels when None)."""
    z, y, x = np.nonzero(label_map > 0 if target is None else label_map == target)
    return [int(x.min()), int(y.min()), int(z.min()), int(x.max()), int(y.max()), int(z.max())]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")
