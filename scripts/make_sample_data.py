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
* ``phantom_regions/``: three BraTS-like MR volumes with nested labels (1 edema, 2 core, 3 enhancing) in the
  nnU-Net v2 layout, whose ``dataset.json`` declares BraTS's regions (whole tumour, tumour core, enhancing
  tumour): a run scores the regions (docs/targets.md).

Run ``python scripts/make_sample_data.py`` to rebuild (``--only phantom_regions`` for one of them); the
output is deterministic for a given seed and each file is well under 1 MB.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import SimpleITK as sitk
from PIL import Image

import json

from napari_medsam_eval.datasets.phantoms import (CT_ORIGIN_XYZ, CT_SPACING_XYZ, IMAGE2D_SEED, REGIONS_LABELS,
                                                  REGIONS_SEED, REGIONS_SPACING_XYZ, VIDEO_SEED, make_phantom_2d,
                                                  make_phantom_ct, make_phantom_regions, make_phantom_video,
                                                  second_rater, window_uint8)
#: the phantoms, by folder name
PHANTOMS = ("phantom_ct", "phantom_video", "phantom_2d", "phantom_regions")

def to_sitk(array: np.ndarray) -> sitk.Image:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(CT_SPACING_XYZ)
    image.SetOrigin(CT_ORIGIN_XYZ)
    return image


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
        spacing=np.asarray(CT_SPACING_XYZ),
    )


def write_phantom_video(out: Path, rng: np.random.Generator) -> None:
    frames_dir = out / "phantom_video" / "Frame" / "clip01"
    masks_dir = out / "phantom_video" / "GT" / "clip01"
    frames_dir.mkdir(parents=True, exist_ok=True)
    masks_dir.mkdir(parents=True, exist_ok=True)
    frames, masks = make_phantom_video(rng)
    for t, (rgb, mask) in enumerate(zip(frames, masks)):
        Image.fromarray(rgb).save(frames_dir / f"{t + 1:04d}.jpg", quality=90)
        Image.fromarray((mask * 255).astype(np.uint8)).save(masks_dir / f"{t + 1:04d}.png")


def write_phantom_2d(out: Path, rng: np.random.Generator) -> None:
    (out / "phantom_2d" / "images").mkdir(parents=True, exist_ok=True)
    (out / "phantom_2d" / "masks").mkdir(parents=True, exist_ok=True)
    rgb, mask = make_phantom_2d(rng)
    Image.fromarray(rgb).save(out / "phantom_2d" / "images" / "skin_phantom.png")
    Image.fromarray((mask * 255).astype(np.uint8)).save(out / "phantom_2d" / "masks" / "skin_phantom.png")


def write_phantom_regions(out: Path, rng: np.random.Generator, cases: int = 3) -> None:
    root = out / "phantom_regions"
    for folder in ("imagesTr", "labelsTr"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for index in range(cases):
        mr, label = make_phantom_regions(rng, index)
        for array, path in ((mr, root / "imagesTr" / f"tumour_{index + 1:03d}_0000.nii.gz"),
                            (label, root / "labelsTr" / f"tumour_{index + 1:03d}.nii.gz")):
            image = sitk.GetImageFromArray(array)
            image.SetSpacing(REGIONS_SPACING_XYZ)
            sitk.WriteImage(image, str(path), useCompression=True)
    (root / "dataset.json").write_text(json.dumps({
        "name": "phantom_regions", "description": "synthetic BraTS-like tumours (napari-medsam-eval sample data)",
        "channel_names": {"0": "FLAIR"}, "labels": REGIONS_LABELS, "regions_class_order": [1, 2, 3],
        "numTraining": cases, "file_ending": ".nii.gz"}, indent=2) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "sample_data")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=PHANTOMS, help="make this phantom only")
    args = parser.parse_args(argv)
    writers = {"phantom_ct": (write_phantom_ct, 0), "phantom_video": (write_phantom_video, VIDEO_SEED),
               "phantom_2d": (write_phantom_2d, IMAGE2D_SEED), "phantom_regions": (write_phantom_regions, REGIONS_SEED)}
    for name, (write, seed) in writers.items():
        if args.only in (None, name):
            write(args.out, np.random.default_rng(args.seed + seed))
    for path in sorted(p for p in args.out.rglob("*") if p.is_file()):
        print(f"{path.relative_to(args.out)}  {path.stat().st_size / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
