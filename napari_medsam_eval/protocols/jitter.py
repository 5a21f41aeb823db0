"""Box jitter: the MedSAM2 box shifted and scaled at random, for robustness sweeps.

Not a reproduction of any paper's code: a controlled, seeded perturbation of
the reference box (:class:`~.medsam2.MedSAM2Protocol`) to measure how much a
model's score depends on a precise box. The prompted slice does not change.

For a box of inclusive size ``w = x1 - x0 + 1``, ``h = y1 - y0 + 1`` and
centre ``c = ((x0 + x1) / 2, (y0 + y1) / 2)``, four numbers ``u`` in
``[-1, 1]`` are drawn (``distribution="uniform"``: ``rng.uniform(-1, 1, 4)``;
``"fixed"``: their signs, so every box moves by exactly the given fraction)
and the new box is

    centre  c + (u0 * shift_frac * w, u1 * shift_frac * h)
    size    (w * (1 + u2 * scale_frac), h * (1 + u3 * scale_frac))

rounded half up and clipped to the image. Always four draws per box, so one
seed gives the same direction at every magnitude of a sweep: only
``shift_frac``/``scale_frac`` change the result, the draws do not.
With both fractions 0 the box is the MedSAM2 box exactly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..core.prompt import Prompt
from .base import PromptProtocol, PromptSource, check_choice, stable_key
from .geometry import BoxInt, clip_box
from .medsam2 import KEY_SLICE_RULES, VIDEO_FRAME_RULES, MedSAM2Protocol
from ..core.errors import InputError

DISTRIBUTIONS: tuple[str, ...] = ("uniform", "fixed")


def jitter_box(
    box: BoxInt,
    shape_hw: tuple[int, int],
    rng: np.random.Generator,
    shift_frac: float,
    scale_frac: float,
    distribution: str = "uniform",
) -> tuple[BoxInt, list[float]]:
    """Shift and scale one inclusive box (module docstring); returns ``(box, u)``."""
    check_choice("box-jitter", "distribution", distribution, DISTRIBUTIONS)
    u = rng.uniform(-1.0, 1.0, size=4)
    if distribution == "fixed":
        u = np.where(u < 0, -1.0, 1.0)
    x0, y0, x1, y1 = box
    w, h = x1 - x0 + 1, y1 - y0 + 1
    cx = (x0 + x1) / 2 + u[0] * shift_frac * w
    cy = (y0 + y1) / 2 + u[1] * shift_frac * h
    half_w = w * (1 + u[2] * scale_frac) / 2
    half_h = h * (1 + u[3] * scale_frac) / 2
    new = clip_box((cx - half_w + 0.5, cy - half_h + 0.5, cx + half_w - 0.5, cy + half_h - 0.5), shape_hw)
    return new, [float(v) for v in u]


@dataclass
class BoxJitterProtocol(PromptProtocol):
    """The MedSAM2 box, shifted and scaled by random fractions of its size.

    Source: the MedSAM2 box (:class:`~.medsam2.MedSAM2Protocol`; Ma et al. 2025,
    arXiv:2504.03600) perturbed as in this module's docstring.

    One :class:`Prompt` per target label, ascending, on the MedSAM2 key
    slice/frame; ``info`` holds ``base_box`` (the unperturbed box) and ``u``
    (the four draws), beside the MedSAM2 info.

    RNG: ``np.random.default_rng([seed, crc32(case_id), target_label])`` per
    target, so the draws depend only on the seed, the case and the label:
    not on the order of cases, and not the same offsets for every case (a
    bare label map has case id ``""``).

    Options:
        shift_frac: largest centre shift, as a fraction of the box's width /
            height (0.1).
        scale_frac: largest relative change of width / height, in [0, 1) (0.1).
        distribution: ``"uniform"`` (default) or ``"fixed"`` (always the full
            fraction, random sign).
        seed: 0.
        key_slice, video_frame, margin: those of the MedSAM2 box.
    """

    name: ClassVar[str] = "box-jitter"

    shift_frac: float = 0.1
    scale_frac: float = 0.1
    distribution: str = "uniform"
    key_slice: str = "middle"
    video_frame: str = "first-present"
    margin: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self.name, "distribution", self.distribution, DISTRIBUTIONS)
        check_choice(self.name, "key_slice", self.key_slice, KEY_SLICE_RULES)
        check_choice(self.name, "video_frame", self.video_frame, VIDEO_FRAME_RULES)
        self.shift_frac = float(self.shift_frac)
        self.scale_frac = float(self.scale_frac)
        if not (np.isfinite(self.shift_frac) and self.shift_frac >= 0):
            raise InputError(f"{self.name}: shift_frac must be >= 0, got {self.shift_frac!r}")
        if not (0 <= self.scale_frac < 1):
            raise InputError(f"{self.name}: scale_frac must be in [0, 1), got {self.scale_frac!r}")
        self._base = MedSAM2Protocol(key_slice=self.key_slice, video_frame=self.video_frame, margin=self.margin)

    def rng_for(self, case_id: str, target_label: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, stable_key(case_id), int(target_label)])

    def _prompts(self, target: PromptSource) -> list[Prompt]:
        out = []
        for lab in target.labels:
            base = self._base.prompt_for_mask(target.mask(lab), target.kind, lab)
            base.protocol = self.name
            if not base.boxes:
                out.append(base)
                continue
            shape_hw = target.label_map.shape[-2:]
            box, u = jitter_box(
                base.boxes[0],  # type: ignore[arg-type]
                shape_hw,
                self.rng_for(target.case_id, lab),
                self.shift_frac,
                self.scale_frac,
                self.distribution,
            )
            base.info.update(
                base_box=[int(v) for v in base.boxes[0]],
                u=u,
                seed=self.seed,
                shift_frac=self.shift_frac,
                scale_frac=self.scale_frac,
                distribution=self.distribution,
            )
            base.boxes = [tuple(float(v) for v in box)]  # type: ignore[list-item]
            out.append(base)
        return out
