"""Make the synthetic cases in ``sample_data/`` (all made here, no real patient data).

* ``phantom_ct/``: a CT-like volume in Hounsfield units (int16 NIfTI, spacing
  0.8 x 0.8 x 2.5 mm) with three labelled organs of different size and
  contrast (1 liver: large, soft contrast; 2 kidney: medium, bright; 3 lesion:
  small, dark inside the liver), its label map, a second "rater" label that
  differs slightly (for ``medsam-eval score``), and the same case as a
  MedSAM/CVPR ``.npz`` (windowed uint8, spacing stored x, y, z).
* ``phantom_video/``: a 24-frame clip in the SUN-SEG layout
  (``Frame/clip01/*.jpg``, ``GT/clip01/*.png``) with a bright blob that moves
  and deforms.
* ``phantom_2d/``: one RGB image and its mask (2D image/mask folder layout).

Run ``python scripts/make_sample_data.py`` to rebuild; the output is
deterministic for a given seed and each file is well under 1 MB.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import SimpleITK as sitk
from PIL import Image
from scipy import ndimage

SPACING_XYZ = (0.8, 0.8, 2.5)
SHAPE_ZYX = (40, 96, 96)


def ellipsoid(shape: tuple[int, ...], centre: tuple[float, ...], radii: tuple[float, ...]) -> np.ndarray:
    """Boolean ellipsoid (any dimension) with centre and radii in voxels."""
    grids = np.ogrid[tuple(slice(0, s) for s in shape)]
    dist = sum(((g - c) / r) ** 2 for g, c, r in zip(grids, centre, radii))
    return dist <= 1.0


def make_phantom_ct(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """HU volume and label map (both Z, Y, X)."""
    z, y, x = SHAPE_ZYX
    body = ellipsoid(SHAPE_ZYX, (z / 2, y / 2, x / 2), (z * 0.8, y * 0.45, x * 0.47))
    liver = ellipsoid(SHAPE_ZYX, (z * 0.5, y * 0.45, x * 0.35), (z * 0.32, y * 0.22, x * 0.2))
    kidney = ellipsoid(SHAPE_ZYX, (z * 0.55, y * 0.62, x * 0.72), (z * 0.18, y * 0.1, x * 0.07))
    lesion = ellipsoid(SHAPE_ZYX, (z * 0.48, y * 0.42, x * 0.32), (z * 0.08, y * 0.06, x * 0.06))
    hu = np.full(SHAPE_ZYX, -1000.0)
    hu[body] = 20.0  # soft tissue
    hu[liver] = 60.0
    hu[kidney] = 160.0  # enhancing
    hu[lesion] = 10.0
    hu = ndimage.gaussian_filter(hu, sigma=(0.6, 1.0, 1.0))
    hu += rng.normal(0.0, 12.0, SHAPE_ZYX)
    label = np.zeros(SHAPE_ZYX, np.uint8)
    label[liver] = 1
    label[kidney] = 2
    label[lesion] = 3
    return np.round(hu).astype(np.int16), label


def second_rater(label: np.ndarray) -> np.ndarray:
    """A plausible second annotation: organ 1 dilated, organ 2 shifted one voxel."""
    out = np.zeros_like(label)
    out[ndimage.binary_dilation(label == 1, iterations=1)] = 1
    out[np.roll(label == 2, 1, axis=2)] = 2
    out[label == 3] = 3
    return out


def to_sitk(array: np.ndarray) -> sitk.Image:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(SPACING_XYZ)
    image.SetOrigin((-38.4, -38.4, -50.0))
    return image


def window_uint8(hu: np.ndarray, level: float = 40.0, width: float = 400.0) -> np.ndarray:
    lo, hi = level - width / 2, level + width / 2
    return np.round((np.clip(hu, lo, hi) - lo) / (hi - lo) * 255).astype(np.uint8)


def write_phantom_ct(out: Path, rng: np.random.Generator) -> None:
    folder = out / "phantom_ct"
    folder.mkdir(parents=True, exist_ok=True)
    hu, label = make_phantom_ct(rng)
    sitk.WriteImage(to_sitk(hu), str(folder / "image.nii.gz"), useCompression=True)
    sitk.WriteImage(to_sitk(label), str(folder / "label.nii.gz"), useCompression=True)
    sitk.WriteImage(to_sitk(second_rater(label)), str(folder / "label_rater2.nii.gz"), useCompression=True)
    np.savez_compressed(
        out / "CT_phantom_abdomen.npz",
        imgs=window_uint8(hu),
        gts=label,
        spacing=np.asarray(SPACING_XYZ),
    )


def write_phantom_video(out: Path, rng: np.random.Generator, n_frames: int = 24, size: int = 128) -> None:
    frames_dir = out / "phantom_video" / "Frame" / "clip01"
    masks_dir = out / "phantom_video" / "GT" / "clip01"
    frames_dir.mkdir(parents=True, exist_ok=True)
    masks_dir.mkdir(parents=True, exist_ok=True)
    base = ndimage.gaussian_filter(rng.normal(90, 25, (size, size)), 3)
    for t in range(n_frames):
        phase = 2 * np.pi * t / n_frames
        centre = (size * (0.45 + 0.12 * np.sin(phase)), size * (0.35 + 0.3 * t / n_frames))
        radii = (size * (0.14 + 0.03 * np.cos(2 * phase)), size * (0.11 + 0.03 * np.sin(phase)))
        mask = ellipsoid((size, size), centre, radii)
        grey = base + 90 * ndimage.gaussian_filter(mask.astype(float), 1.5) + rng.normal(0, 6, (size, size))
        rgb = np.stack([grey * 1.0, grey * 0.7, grey * 0.55], axis=-1)
        Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(frames_dir / f"{t + 1:04d}.jpg", quality=90)
        Image.fromarray((mask * 255).astype(np.uint8)).save(masks_dir / f"{t + 1:04d}.png")


def write_phantom_2d(out: Path, rng: np.random.Generator, size: int = 160) -> None:
    (out / "phantom_2d" / "images").mkdir(parents=True, exist_ok=True)
    (out / "phantom_2d" / "masks").mkdir(parents=True, exist_ok=True)
    mask = ellipsoid((size, size), (size * 0.5, size * 0.55), (size * 0.22, size * 0.3))
    mask |= ellipsoid((size, size), (size * 0.25, size * 0.2), (size * 0.06, size * 0.07))  # a second, small part
    grey = ndimage.gaussian_filter(rng.normal(150, 20, (size, size)), 2) - 70 * ndimage.gaussian_filter(mask * 1.0, 2)
    rgb = np.stack([grey, grey * 0.8, grey * 0.7], axis=-1)
    Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(out / "phantom_2d" / "images" / "skin_phantom.png")
    Image.fromarray((mask * 255).astype(np.uint8)).save(out / "phantom_2d" / "masks" / "skin_phantom.png")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "sample_data")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    write_phantom_ct(args.out, np.random.default_rng(args.seed))
    write_phantom_video(args.out, np.random.default_rng(args.seed + 1))
    write_phantom_2d(args.out, np.random.default_rng(args.seed + 2))
    for path in sorted(p for p in args.out.rglob("*") if p.is_file()):
        print(f"{path.relative_to(args.out)}  {path.stat().st_size / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
