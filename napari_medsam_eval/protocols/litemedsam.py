"""LiteMedSAM's 3D box prompt (the CVPR 2024 challenge input).

Source: github.com/bowang-lab/MedSAM, branch LiteMedSAM,
``CVPR24_LiteMedSAM_infer.py``: the npz ``boxes`` key holds one
``[x_min, y_min, z_min, x_max, y_max, z_max]`` per target; inference starts on
the slice ``int((z_max - z_min) / 2 + z_min)`` with the box's xy extent and
propagates up then down, re-boxing each slice from the previous mask (that
propagation lives in :mod:`napari_medsam_eval.propagation`, not here).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..core.prompt import Prompt
from .base import PromptProtocol, PromptSource, empty_prompt
from .geometry import expand_box, tight_box, tight_box_3d
from ..core.errors import InputError


@dataclass
class LiteMedSAM3DBoxProtocol(PromptProtocol):
    """The CVPR 2024 challenge 3D box, as LiteMedSAM's inference script reads it.

    Source: github.com/bowang-lab/MedSAM, branch LiteMedSAM,
    ``CVPR24_LiteMedSAM_infer.py`` (the npz ``boxes`` key,
    ``[x_min, y_min, z_min, x_max, y_max, z_max]``).

    Volumes: one :class:`Prompt` per target label, ascending, on the slice
    ``int((z_max - z_min) / 2 + z_min)`` (the script's middle slice; it is the
    same integer as ``z_min + (z_max - z_min) // 2``) with one box, the 3D box's
    xy extent ``(x_min, y_min, x_max, y_max)`` (*not* the tight box of that
    slice), and ``info["box_3d"] = [x_min, y_min, z_min, x_max, y_max, z_max]``
    (inclusive). The script asserts ``z_min < z_max``; a target on one slice
    still gets its prompt, flagged ``info["single_slice"] = True``. The middle
    slice may hold no target pixel (a gap in z); the script prompts it anyway
    and so do we (``info["key_slice_empty"]``).

    2D images: the tight box (``info["box_2d"]``), slice_index None.

    Options: ``margin`` (pixels added to the xy box on each side, clipped;
    default 0); ``seed`` recorded only.
    """

    name: ClassVar[str] = "litemedsam-3dbox"
    kinds: ClassVar[tuple[str, ...]] = ("volume", "image")
    #: the script's engine: OpenVINO's sums, ordered otherwise, can flip a voxel whose logit sits at 0
    model_defaults: ClassVar[dict] = {"litemedsam": {"engine": "torch"}}

    margin: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if int(self.margin) != self.margin or self.margin < 0:
            raise InputError(f"{self.name}: margin must be a non-negative integer, got {self.margin!r}")
        self.margin = int(self.margin)

    def prompt_for_mask(self, mask: np.ndarray, target_label: int) -> Prompt:
        mask = np.asarray(mask) != 0
        if mask.ndim == 2:
            box = tight_box(mask)
            if box is None:
                return empty_prompt(self.name, target_label)
            box = expand_box(box, self.margin, mask.shape)
            return Prompt(target_label, boxes=[box], protocol=self.name, info={"box_2d": list(box), "margin": self.margin})
        box3 = tight_box_3d(mask)
        if box3 is None:
            return empty_prompt(self.name, target_label)
        x_min, y_min, z_min, x_max, y_max, z_max = box3
        z_mid = int((z_max - z_min) / 2 + z_min)
        box = expand_box((x_min, y_min, x_max, y_max), self.margin, mask.shape[1:])
        x0, y0, x1, y1 = box
        info = {
            "box_3d": [x0, y0, z_min, x1, y1, z_max],
            "single_slice": z_min == z_max,
            "key_slice_empty": not bool(mask[z_mid].any()),
            "margin": self.margin,
        }
        return Prompt(target_label, slice_index=z_mid, boxes=[box], protocol=self.name, info=info)

    def _prompts(self, target: PromptSource) -> list[Prompt]:
        return [self.prompt_for_mask(target.mask(lab), lab) for lab in target.labels]
