"""Synthetic cases (no patient data): the CT phantom, the video phantom, the 2D phantom and the regions phantom.

One generator for both uses: ``scripts/make_sample_data.py`` writes them to
``sample_data/`` (the demo and the tests read those files), and the napari
sample data (:mod:`napari_medsam_eval._sample_data`) builds them in memory, so
File > Open Sample works from an installed wheel as well as from a checkout.
Deterministic for a given seed; the default seeds are the ones the files were
made with (CT ``0``, video ``1``, 2D ``2``, regions ``3``).

The regions phantom is a BraTS-like MR set in the nnU-Net v2 layout: three nested labels (1 edema around
2 a tumour core around 3 its enhancing part), whose ``dataset.json`` declares BraTS's regions
(:data:`REGIONS_LABELS`: whole tumour 1, 2, 3; tumour core 2, 3; enhancing tumour 3), so a run scores the
regions, not the labels (docs/targets.md).
"""
from __future__ import annotations

import numpy as np
from scipy import ndimage

from ..core.case import Case, Spacing

#: voxel spacing of the CT phantom, in (x, y, z) order as NIfTI and the MedSAM npz store it
CT_SPACING_XYZ = (0.8, 0.8, 2.5)
CT_ORIGIN_XYZ = (-38.4, -38.4, -50.0)
CT_SHAPE_ZYX = (40, 96, 96)
CT_LABEL_NAMES = {1: "liver", 2: "kidney", 3: "lesion"}
CT_SEED, VIDEO_SEED, IMAGE2D_SEED, REGIONS_SEED = 0, 1, 2, 3
#: the regions phantom's ``dataset.json`` labels: BraTS's regions as nnU-Net v2 writes them
REGIONS_LABELS = {"background": 0, "whole tumor": [1, 2, 3], "tumor core": [2, 3], "enhancing tumor": 3}
REGIONS_SHAPE_ZYX = (32, 64, 64)
REGIONS_SPACING_XYZ = (1.0, 1.0, 1.5)


def ellipsoid(shape: tuple[int, ...], centre: tuple[float, ...], radii: tuple[float, ...]) -> np.ndarray:
    """Boolean ellipsoid (any dimension) with centre and radii in voxels."""
    grids = np.ogrid[tuple(slice(0, s) for s in shape)]
    dist = sum(((g - c) / r) ** 2 for g, c, r in zip(grids, centre, radii))
    return dist <= 1.0


def make_phantom_ct(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """HU volume (int16) and label map (uint8: 1 liver, 2 kidney, 3 lesion), both (Z, Y, X)."""
    z, y, x = CT_SHAPE_ZYX
    body = ellipsoid(CT_SHAPE_ZYX, (z / 2, y / 2, x / 2), (z * 0.8, y * 0.45, x * 0.47))
    liver = ellipsoid(CT_SHAPE_ZYX, (z * 0.5, y * 0.45, x * 0.35), (z * 0.32, y * 0.22, x * 0.2))
    kidney = ellipsoid(CT_SHAPE_ZYX, (z * 0.55, y * 0.62, x * 0.72), (z * 0.18, y * 0.1, x * 0.07))
    lesion = ellipsoid(CT_SHAPE_ZYX, (z * 0.48, y * 0.42, x * 0.32), (z * 0.08, y * 0.06, x * 0.06))
    hu = np.full(CT_SHAPE_ZYX, -1000.0)
    hu[body] = 20.0  # soft tissue
    hu[liver] = 60.0
    hu[kidney] = 160.0  # enhancing
    hu[lesion] = 10.0
    hu = ndimage.gaussian_filter(hu, sigma=(0.6, 1.0, 1.0))
    hu += rng.normal(0.0, 12.0, CT_SHAPE_ZYX)
    label = np.zeros(CT_SHAPE_ZYX, np.uint8)
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


def window_uint8(hu: np.ndarray, level: float = 40.0, width: float = 400.0) -> np.ndarray:
    """A CT window mapped to 0..255 (the windowed uint8 of the MedSAM npz)."""
    lo, hi = level - width / 2, level + width / 2
    return np.round((np.clip(hu, lo, hi) - lo) / (hi - lo) * 255).astype(np.uint8)


def make_phantom_video(rng: np.random.Generator, n_frames: int = 24, size: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """RGB frames ``(T, H, W, 3)`` uint8 and bool masks ``(T, H, W)`` of a bright blob that moves and deforms."""
    base = ndimage.gaussian_filter(rng.normal(90, 25, (size, size)), 3)
    frames, masks = [], []
    for t in range(n_frames):
        phase = 2 * np.pi * t / n_frames
        centre = (size * (0.45 + 0.12 * np.sin(phase)), size * (0.35 + 0.3 * t / n_frames))
        radii = (size * (0.14 + 0.03 * np.cos(2 * phase)), size * (0.11 + 0.03 * np.sin(phase)))
        mask = ellipsoid((size, size), centre, radii)
        grey = base + 90 * ndimage.gaussian_filter(mask.astype(float), 1.5) + rng.normal(0, 6, (size, size))
        rgb = np.stack([grey * 1.0, grey * 0.7, grey * 0.55], axis=-1)
        frames.append(np.clip(rgb, 0, 255).astype(np.uint8))
        masks.append(mask)
    return np.stack(frames), np.stack(masks)


def make_phantom_2d(rng: np.random.Generator, size: int = 160) -> tuple[np.ndarray, np.ndarray]:
    """An RGB image ``(H, W, 3)`` uint8 and its bool mask (a large and a small part)."""
    mask = ellipsoid((size, size), (size * 0.5, size * 0.55), (size * 0.22, size * 0.3))
    mask |= ellipsoid((size, size), (size * 0.25, size * 0.2), (size * 0.06, size * 0.07))  # a second, small part
    grey = ndimage.gaussian_filter(rng.normal(150, 20, (size, size)), 2) - 70 * ndimage.gaussian_filter(mask * 1.0, 2)
    rgb = np.stack([grey, grey * 0.8, grey * 0.7], axis=-1)
    return np.clip(rgb, 0, 255).astype(np.uint8), mask


def make_phantom_regions(rng: np.random.Generator, index: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One BraTS-like MR volume (int16) and its nested labels (uint8: 1 edema, 2 core, 3 enhancing), ``(Z, Y, X)``;
    ``index`` moves and sizes the tumour (each case of the set its own)."""
    z, y, x = REGIONS_SHAPE_ZYX
    shift, scale = (index % 3 - 1) * 4, 1.0 + 0.12 * (index % 2)
    centre = (z * 0.5, y * 0.5 + shift, x * 0.5 - shift)
    brain = ellipsoid(REGIONS_SHAPE_ZYX, (z / 2, y / 2, x / 2), (z * 0.45, y * 0.45, x * 0.42))
    label = np.zeros(REGIONS_SHAPE_ZYX, np.uint8)
    label[ellipsoid(REGIONS_SHAPE_ZYX, centre, (9 * scale, 16 * scale, 15 * scale)) & brain] = 1
    label[ellipsoid(REGIONS_SHAPE_ZYX, centre, (6 * scale, 9 * scale, 9 * scale))] = 2
    label[ellipsoid(REGIONS_SHAPE_ZYX, centre, (4 * scale, 6 * scale, 6 * scale))
          & ~ellipsoid(REGIONS_SHAPE_ZYX, centre, (2.5 * scale, 3.5 * scale, 3.5 * scale))] = 3  # an enhancing rim
    mr = np.where(brain, 300.0, 0.0)
    mr[label == 1], mr[label == 2], mr[label == 3] = 520.0, 380.0, 700.0
    mr = ndimage.gaussian_filter(mr, sigma=(0.6, 1.0, 1.0)) + rng.normal(0.0, 20.0, REGIONS_SHAPE_ZYX)
    return np.round(np.clip(mr, 0, None)).astype(np.int16), label


def phantom_ct_case(seed: int = CT_SEED) -> Case:
    """The CT phantom as the MedSAM npz holds it: windowed uint8 ``(Z, Y, X)`` with its labels."""
    hu, label = make_phantom_ct(np.random.default_rng(seed))
    return Case(image=window_uint8(hu), label=label, spacing=Spacing.from_xyz(CT_SPACING_XYZ), kind="volume",
                case_id="CT_phantom_abdomen", modality="CT", metadata={"label_names": dict(CT_LABEL_NAMES)})


def phantom_video_case(seed: int = VIDEO_SEED) -> Case:
    """The video phantom: 24 RGB frames and masks (label 1)."""
    frames, masks = make_phantom_video(np.random.default_rng(seed))
    return Case(image=frames, label=masks.astype(np.uint8), spacing=Spacing.from_array_order((1.0, 1.0, 1.0), "tyx"),
                kind="video", case_id="clip01")
