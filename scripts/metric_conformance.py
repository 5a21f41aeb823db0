"""The metric conformance table of docs/metrics.md: our DSC, IoU, NSD and HD95 beside other implementations'.

On a fixed set of hard cases (:func:`hard_cases`: anisotropic spacing, a single voxel, an empty prediction,
an empty ground truth, both empty, objects touching the image's border, a one-voxel-thin structure, a 2D
pair, and a real hippocampus label against itself moved by one voxel), each metric by:

* ``medsam-eval``: our scorer (``medsam-eval score``, the runs);
* ``surface-distance``: DeepMind's package (``compute_dice_coefficient``, ``compute_surface_dice_at_tolerance``,
  ``compute_robust_hausdorff``), which the CVPR 2024/2025 challenge scripts copy (``SurfaceDice.py``);
* ``MONAI``: ``monai.metrics`` (``DiceMetric``, ``MeanIoU``, ``compute_surface_dice``,
  ``compute_hausdorff_distance(percentile=95)``), when installed (the test extra has it);
* ``--metrics-convention monai`` and ``cvpr25``: ours, reproducing MONAI's and the challenge's rules.

    python scripts/metric_conformance.py [--shared-data ../shared/data]   # prints the Markdown table
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from napari_medsam_eval.evaluation.conventions import convention_scores  # noqa: E402

TOLERANCE_MM = 2.0
#: the implementations, in the table's order
IMPLEMENTATIONS = ("medsam-eval", "surface-distance", "MONAI", "convention monai", "convention cvpr25")


def _box(shape, low, high) -> np.ndarray:
    mask = np.zeros(shape, bool)
    mask[tuple(slice(a, b) for a, b in zip(low, high))] = True
    return mask


def hard_cases(shared: Path | None = None) -> dict[str, tuple[np.ndarray, np.ndarray, tuple[float, ...]]]:
    """name -> (prediction, ground truth, spacing in array order)."""
    gt = _box((12, 30, 30), (3, 8, 10), (9, 20, 22))
    moved = np.roll(gt, 2, axis=2)
    moved[4, 5:8, 5:8] = True
    one = _box((11, 11, 11), (5, 5, 5), (6, 6, 6))
    border = _box((10, 20, 20), (0, 0, 0), (6, 8, 20))
    thin = _box((10, 30, 30), (2, 15, 3), (8, 16, 27))
    flat = _box((40, 40), (10, 12), (30, 28))
    zz, yy, xx = np.mgrid[:16, :48, :48]
    sphere = ((zz - 8) * 3.0) ** 2 + ((yy - 24) * 0.7) ** 2 + ((xx - 24) * 0.7) ** 2 <= 12.0 ** 2
    ellipsoid = ((zz - 8) * 3.0 / 1.3) ** 2 + ((yy - 26) * 0.7) ** 2 + ((xx - 23) * 0.7 / 0.8) ** 2 <= 12.0 ** 2
    cases = {
        "anisotropic 3 x 0.7 x 0.7 mm: a sphere against an ellipsoid": (ellipsoid, sphere, (3.0, 0.7, 0.7)),
        "anisotropic 3 x 0.7 x 0.7 mm, shifted 2 voxels + an island": (moved, gt, (3.0, 0.7, 0.7)),
        "a single voxel, one voxel away": (np.roll(one, 1, axis=0), one, (1.0, 1.0, 1.0)),
        "empty prediction": (np.zeros_like(gt), gt, (1.0, 1.0, 1.0)),
        "empty ground truth": (gt, np.zeros_like(gt), (1.0, 1.0, 1.0)),
        "both empty": (np.zeros_like(gt), np.zeros_like(gt), (1.0, 1.0, 1.0)),
        "touching the image's border, shifted 1": (np.roll(border, 1, axis=1), border, (1.0, 1.0, 1.0)),
        "one voxel thin, shifted 1": (np.roll(thin, 1, axis=1), thin, (1.0, 1.0, 1.0)),
        "2D, 0.5 x 0.8 mm, shifted 3 rows": (np.roll(flat, 3, axis=0), flat, (0.5, 0.8)),
    }
    if shared is not None and (shared / "hippocampus_mri").is_dir():
        import SimpleITK as sitk

        from scipy.ndimage import binary_dilation

        image = sitk.ReadImage(str(shared / "hippocampus_mri" / "labelsTr" / "hippocampus_001.nii.gz"))
        label = sitk.GetArrayFromImage(image) == 1
        cases["real: hippocampus_001 anterior, dilated 1 and moved 2 voxels in x"] = (
            np.roll(binary_dilation(label), 2, axis=2), label, tuple(reversed(image.GetSpacing())))
    return cases


def surface_distance_scores(pred, gt, spacing) -> dict[str, float] | str:
    """surface-distance's values, or why it gave none (0.1 fails on an empty mask under numpy 2: np.Inf)."""
    import surface_distance as sd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            distances = sd.compute_surface_distances(gt, pred, spacing)
            dice = sd.compute_dice_coefficient(gt, pred)
        except AttributeError as error:
            return f"fails ({error.args[0].split('`')[1]} removed in numpy 2)"
        union = np.logical_or(pred, gt).sum()
        return {"dice": float(dice), "iou": float(np.logical_and(pred, gt).sum() / union) if union else float("nan"),
                "nsd": float(sd.compute_surface_dice_at_tolerance(distances, TOLERANCE_MM)),
                "hd95": float(sd.compute_robust_hausdorff(distances, 95))}


def monai_library_scores(pred, gt, spacing) -> dict[str, float] | None:
    try:
        import torch
        from monai.metrics import DiceMetric, MeanIoU, compute_hausdorff_distance, compute_surface_dice
    except ImportError:
        return None
    p, g = (torch.from_numpy(m[None, None].astype(np.float32)) for m in (pred, gt))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"dice": float(DiceMetric(include_background=True)(p, g)[0, 0]),
                "iou": float(MeanIoU(include_background=True)(p, g)[0, 0]),
                "nsd": float(compute_surface_dice(p, g, [TOLERANCE_MM], include_background=True,
                                                  spacing=list(spacing))[0, 0]),
                "hd95": float(compute_hausdorff_distance(p, g, include_background=True, percentile=95,
                                                         spacing=list(spacing))[0, 0])}


def table(shared: Path | None = None) -> dict[str, dict[str, dict[str, float] | None]]:
    """case -> implementation -> metric values (None: the library is not installed)."""
    out = {}
    for name, (pred, gt, spacing) in hard_cases(shared).items():
        out[name] = {
            "medsam-eval": convention_scores(pred, gt, spacing, TOLERANCE_MM),
            "surface-distance": surface_distance_scores(pred, gt, spacing),
            "MONAI": monai_library_scores(pred, gt, spacing),
            "convention monai": convention_scores(pred, gt, spacing, TOLERANCE_MM, "monai"),
            "convention cvpr25": convention_scores(pred, gt, spacing, TOLERANCE_MM, "cvpr25"),
        }
    return out


def _cell(value: float) -> str:
    return "nan" if np.isnan(value) else ("inf" if np.isinf(value) else f"{value:.4f}")


def markdown(results: dict) -> str:
    lines = ["| case | implementation | DSC | IoU | NSD 2 mm | HD95 mm |", "|---|---|---:|---:|---:|---:|"]
    for case, by in results.items():
        for name in IMPLEMENTATIONS:
            values = by[name]
            if values is None or isinstance(values, str):
                cells = [values or "not installed"] + [""] * 3
            else:
                cells = [_cell(values[m]) for m in ("dice", "iou", "nsd", "hd95")]
            lines.append(f"| {case} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    print(markdown(table(args.shared_data)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
