"""MedSAM2's box prompt: one tight box per target on a key slice/frame.

Sources (see ``docs/protocols.md`` of the shared reference):

* MedSAM2, Ma et al. 2025 (arXiv:2504.03600, github.com/bowang-lab/MedSAM2):
  3D: "bounding box on the middle slice", the tight box of the ground truth on
  the slice ``z_min + (z_max - z_min) // 2`` of the object's z-extent (the
  npz evaluation script), then propagation both ways. Video
  (``medsam2_infer_video.py``): the prompt is given on the first frame and
  propagation runs forward.

What MedSAM2's scripts do around the model travels in each prompt's ``info``
(:mod:`napari_medsam_eval.core.postprocess`): ``medsam2`` keeps the
largest 3D connected component of a volume (``medsam2_infer_3D_CT.py``);
``medsam2-recist`` seeds both passes of a model with memory with the mask the
box gives on the key slice and keeps every component
(``medsam2_infer_CT_lesion_npz_recist.py``). ``video_prompt="mask"`` gives the
ground-truth mask of the key frame instead of its box (``medsam2_infer_video.py``
seeds frame 0 with it; models that take mask prompts only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..core.prompt import Prompt
from ..core.postprocess import LARGEST_COMPONENT, SEED, SEEDS
from .base import PromptProtocol, PromptSource, check_choice, empty_prompt, present_slices
from .geometry import expand_box, tight_box
from ..core.errors import InputError

KEY_SLICE_RULES = ("middle", "largest")
VIDEO_FRAME_RULES = ("first-present", "first")
#: what a video's key frame is prompted with: its ground-truth box, or its ground-truth mask
VIDEO_PROMPTS = ("box", "mask")


def key_slice_index(mask: np.ndarray, rule: str = "middle") -> tuple[int | None, dict]:
    """Key slice of a 3D target mask ``(Z, Y, X)`` and how it was found.

    ``"middle"``: ``z_min + (z_max - z_min) // 2`` of the slices holding the
    target (MedSAM2). When the target has a gap in z and that slice is empty,
    the nearest slice holding the target is used instead (the lower one on a
    tie) and ``info["key_slice_fallback"]`` is True: the reference script would
    have no box there. ``"largest"``: the slice with the most target pixels
    (the first one on a tie). Returns ``(None, info)`` for an empty mask.
    """
    check_choice("medsam2", "key_slice", rule, KEY_SLICE_RULES)
    zs = present_slices(mask)
    if zs.size == 0:
        return None, {}
    z_min, z_max = int(zs[0]), int(zs[-1])
    info: dict = {"z_range": [z_min, z_max], "key_slice_rule": rule}
    if rule == "middle":
        key = z_min + (z_max - z_min) // 2
        if key not in zs:
            nearest = int(zs[np.argmin(np.abs(zs - key))])  # argmin: first = lower on a tie
            info["key_slice_fallback"] = True
            info["key_slice_middle"] = key
            key = nearest
    else:
        areas = mask.reshape(mask.shape[0], -1).sum(axis=1)
        key = int(np.argmax(areas))
    return int(key), info


def key_frame_index(mask: np.ndarray, rule: str = "first-present") -> tuple[int | None, dict]:
    """Key frame of a video target mask ``(T, Y, X)``.

    ``"first-present"``: the first frame where the target appears.
    ``"first"``: frame 0 of the clip whatever it holds (as
    ``medsam2_infer_video.py`` prompts the first frame); when the target is
    absent there the caller gets frame 0 with no box. None for an empty mask.
    """
    check_choice("medsam2", "video_frame", rule, VIDEO_FRAME_RULES)
    ts = present_slices(mask)
    if ts.size == 0:
        return None, {}
    info: dict = {"t_range": [int(ts[0]), int(ts[-1])], "video_frame_rule": rule}
    return (int(ts[0]) if rule == "first-present" else 0), info


@dataclass
class MedSAM2Protocol(PromptProtocol):
    """MedSAM2's box prompt: the tight ground-truth box on one key slice/frame.

    Source: Ma et al. 2025, MedSAM2 (arXiv:2504.03600; github.com/bowang-lab/MedSAM2,
    ``medsam2_infer_3D_CT.py``, ``medsam2_infer_video.py``).

    One :class:`Prompt` per target label, ascending, with one inclusive box and
    ``slice_index`` set (None for a 2D image).

    Options:
        key_slice: volumes; ``"middle"`` (default, ``z_min + (z_max - z_min) // 2``
            of the target's z-extent, nearest present slice if that one is empty)
            or ``"largest"`` (the slice with the largest target area).
        video_frame: videos; ``"first-present"`` (default: the first frame where
            the target appears) or ``"first"`` (frame 0 of the clip; if the
            target is absent there the prompt is *empty*, ``slice_index`` 0 and
            ``info["empty_key_frame"]`` True, so the model gets no prompt for it).
        margin: pixels added on each side of the box, clipped to the image
            (default 0: the tight box).
        largest_component: volumes; keep only the largest 3D connected
            component (26-connected) of the propagated mask (default True,
            ``medsam2_infer_3D_CT.py``'s ``getLargestCC``).
        native_seed: volumes and videos, models with memory (SAM2/MedSAM2);
            ``"box"`` (default: both passes start from the box) or ``"mask"``
            (both start from the mask the box gives on the key slice, added
            with ``add_new_mask``: the RECIST / npz script). A per-slice model
            propagates from that mask either way.
        video_prompt: videos; ``"box"`` (default) or ``"mask"`` (the key frame's
            ground-truth mask as a mask prompt, as ``medsam2_infer_video.py``).
        seed: recorded only; the protocol draws nothing.

    ``info`` holds ``z_range``/``t_range`` and the rule used. A target label
    absent from the whole case gives an empty prompt (``info["empty"]``).
    """

    name: ClassVar[str] = "medsam2"

    key_slice: str = "middle"
    video_frame: str = "first-present"
    margin: int = 0
    largest_component: bool = True
    native_seed: str = "box"
    video_prompt: str = "box"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self.name, "key_slice", self.key_slice, KEY_SLICE_RULES)
        check_choice(self.name, "video_frame", self.video_frame, VIDEO_FRAME_RULES)
        check_choice(self.name, "native_seed", self.native_seed, SEEDS)
        check_choice(self.name, "video_prompt", self.video_prompt, VIDEO_PROMPTS)
        if not isinstance(self.largest_component, bool):
            raise InputError(f"{self.name}: largest_component must be true or false, got {self.largest_component!r}")
        if int(self.margin) != self.margin or self.margin < 0:
            raise InputError(f"{self.name}: margin must be a non-negative integer, got {self.margin!r}")
        self.margin = int(self.margin)

    def key_index(self, mask: np.ndarray, kind: str) -> tuple[int | None, dict]:
        """Key slice (volume) or frame (video) of a 3D target mask, with its info."""
        if kind == "video":
            return key_frame_index(mask, self.video_frame)
        return key_slice_index(mask, self.key_slice)

    def prompt_for_mask(self, mask: np.ndarray, kind: str, target_label: int) -> Prompt:
        """The prompt for one binary target mask of the given kind."""
        mask = np.asarray(mask) != 0
        if kind == "image":
            box = tight_box(mask)
            if box is None:
                return empty_prompt(self.name, target_label)
            return Prompt(
                target_label=target_label,
                boxes=[expand_box(box, self.margin, mask.shape)],
                protocol=self.name,
                info={"margin": self.margin},
            )
        key, info = self.key_index(mask, kind)
        if key is None:
            return empty_prompt(self.name, target_label)
        box = tight_box(mask[key])
        info["margin"] = self.margin
        if box is None:  # only video_frame="first" with the target absent on frame 0
            return empty_prompt(self.name, target_label, slice_index=key, empty_key_frame=True, **info)
        info[SEED] = self.native_seed
        if kind == "volume":
            info[LARGEST_COMPONENT] = self.largest_component
        if kind == "video" and self.video_prompt == "mask":
            info["video_prompt"] = "mask"
            return Prompt(target_label=target_label, slice_index=key, mask=mask[key].copy(), protocol=self.name,
                          info=info)
        return Prompt(
            target_label=target_label,
            slice_index=key,
            boxes=[expand_box(box, self.margin, mask.shape[1:])],
            protocol=self.name,
            info=info,
        )

    def _prompts(self, target: PromptSource) -> list[Prompt]:
        return [self.prompt_for_mask(target.mask(lab), target.kind, lab) for lab in target.labels]


@dataclass
class MedSAM2RecistProtocol(MedSAM2Protocol):
    """MedSAM2's RECIST / npz script: the ``medsam2`` box, both passes of a model with
    memory seeded with the mask that box gives on the key slice, every component kept.

    Source: ``medsam2_infer_CT_lesion_npz_recist.py --propagate_with_box``
    (github.com/bowang-lab/MedSAM2 at 332f30d). Its own box comes from a RECIST line
    (``get_diameter_bbox``); here the ``medsam2`` box is given, as when it was compared
    (``tests/data/medsam2_reference/PROVENANCE.md``). Options as :class:`MedSAM2Protocol`.
    """

    name: ClassVar[str] = "medsam2-recist"

    largest_component: bool = False
    native_seed: str = "mask"
