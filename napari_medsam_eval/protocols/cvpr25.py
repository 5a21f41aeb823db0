"""The CVPR 2025 interactive 3D protocol (``cvpr25-interactive``): a 3D box, then 5 clicks at the largest error.

Source: the challenge "Foundation Models for Interactive 3D Biomedical Image Segmentation" (CVPR 2025),
``CVPR25_iter_eval.py`` and ``get_boxes.py`` of github.com/JunMa11/CVPR-MedSegFMCompetition at 748e862.

* **The box** (``get_boxes.py``): per target, ``z_min``/``z_max`` (its extent), ``z_mid`` = the middle of
  the slices that hold it (``z_indices[len // 2]`` of the unique slice indices: not the middle of the
  extent when the target has gaps), and the tight 2D box on ``z_mid`` widened by a random shift of 0-5
  pixels at 256 (``randint(0, 6)`` scaled by ``side / 256``, truncated) on each side, clipped. The script
  draws the shifts from one ``np.random.seed(2025)`` over a pool of files; here each case draws from a
  fresh ``RandomState(box_seed)``, its targets in order (a fixed rule: the challenge's order of files was
  not). The model gets the 2D box on ``z_mid``, propagated both ways, kept to ``z_min..z_max`` (absent
  anchors just outside: the 3D box tells the model where the object ends).
* **One label map per case**: the challenge scores the one map a model hands back, and places each click
  on it, so a case's classes run together (:mod:`napari_medsam_eval.studies.cvpr25`): each class's own
  segmentation, the step's map painted in label order, a later class over an earlier one where their masks
  overlap (the challenge baseline's rule), every class's click placed on that map before the model runs.
* **Each click** (``CVPR25_iter_eval.py``): the error ``pred != gt`` of the target (its voxels in the map),
  its 3D connected components (26-connectivity), the largest (the first in raster order on a tie); the
  Euclidean distance transform of that component on its bounding box padded by ``max(int(0.25 * side), 1)``
  on each side (a crop over 60 million voxels is 2x max-pooled first, as the script does); the click is a
  voxel of largest distance, drawn by ``RandomState(42).choice`` among them; foreground where the truth
  holds the target, background where it does not. Here a click is a correction of its slice (a positive or
  negative point, on the box of the slice's current prediction where that slice has no anchor yet) followed
  by propagation to the neighbouring anchors, as the ``corrections`` protocol applies a click.
* **Scores** (:mod:`napari_medsam_eval.evaluation.cvpr25`): on the map after each of the 6 steps, each class's
  DSC and their mean, NSD at 2 mm where that mean DSC is above 0.2 (all 0 otherwise), and their AUC over
  the 5 click steps (the script's ``cumulative_trapezoid`` over ``dscs[-5:]``: the box step is not in it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..core.anchor_prompts import absent_prompt
from ..core.prompt import Prompt
from ..core.errors import InputError
from .base import empty_prompt
from .corrections import CorrectionsProtocol
from .geometry import tight_box

#: clicks after the box, and the voxels above which the script max-pools the EDT crop 2x
CLICKS = 5
LARGE_ROI_VOXELS = 60_000_000
#: the seed of the script's choice among the voxels of largest distance
CLICK_SEED = 42


def challenge_box(mask: np.ndarray, rng: np.random.RandomState) -> dict[str, int]:
    """``get_boxes.py``'s ``mask3D_to_bbox`` for one target mask ``(Z, Y, X)``: the box dictionary."""
    z_indices = np.unique(np.nonzero(mask)[0])
    z_mid = int(z_indices[len(z_indices) // 2])
    y, x = np.nonzero(mask[z_mid])
    height, width = mask.shape[1:]
    shift = int(rng.randint(0, 6, 1)[0])
    shift_x, shift_y = int(shift * width / 256), int(shift * height / 256)
    return {"z_min": int(z_indices[0]), "z_max": int(z_indices[-1]), "z_mid": z_mid,
            "z_mid_x_min": max(0, int(x.min()) - shift_x), "z_mid_y_min": max(0, int(y.min()) - shift_y),
            "z_mid_x_max": min(width - 1, int(x.max()) + shift_x), "z_mid_y_max": min(height - 1, int(y.max()) + shift_y)}


def _padded_edt(component: np.ndarray) -> np.ndarray:
    """``compute_edt`` of the script: the EDT of ``component`` on its padded bounding box, full size."""
    from scipy.ndimage import distance_transform_edt

    coords = np.argwhere(component)
    low, high = coords.min(axis=0), coords.max(axis=0) + 1
    crop = high - low
    pad = np.maximum((crop * 0.25).astype(int), 1)
    box = np.zeros(crop + 2 * pad, dtype=np.uint8)
    box[tuple(slice(p, p + c) for p, c in zip(pad, crop))] = component[tuple(slice(a, b) for a, b in zip(low, high))]
    large = box.size > LARGE_ROI_VOXELS
    if large:
        from skimage.measure import block_reduce

        box = block_reduce(box, block_size=(2, 2, 2), func=np.max)
    edt = distance_transform_edt(box)
    if large:
        edt = edt.repeat(2, axis=0).repeat(2, axis=1).repeat(2, axis=2)
    full = np.zeros(component.shape, dtype=edt.dtype)
    full[tuple(slice(a, b) for a, b in zip(low, high))] = edt[tuple(slice(p, p + c) for p, c in zip(pad, crop))]
    return full


def challenge_click(prediction: np.ndarray, truth: np.ndarray) -> tuple[tuple[int, int, int], bool] | None:
    """The script's next click on one target: ``((z, y, x), foreground)``; None when the prediction is exact."""
    from scipy.ndimage import label

    error = np.asarray(prediction, bool) != np.asarray(truth, bool)
    if not error.any():
        return None
    components, _count = label(error, structure=np.ones((3, 3, 3), dtype=bool))
    sizes = np.bincount(components.ravel())
    sizes[0] = 0
    largest = components == int(np.argmax(sizes))
    edt = _padded_edt(largest) * largest
    if not edt.any():
        edt = largest.astype(float)
    best = np.argwhere(edt == edt.max())
    centre = tuple(int(v) for v in best[np.random.RandomState(CLICK_SEED).choice(len(best))])
    return centre, bool(np.asarray(truth, bool)[centre])  # type: ignore[return-value]


@dataclass
class CVPR25Protocol(CorrectionsProtocol):
    """The CVPR 2025 interactive protocol (module doc): the challenge's 3D box, then 5 clicks, each where the
    error is largest in 3D.

    Source: ``CVPR25_iter_eval.py`` and ``get_boxes.py`` of github.com/JunMa11/CVPR-MedSegFMCompetition
    (748e862); equality: ``tests/data/cvpr25_reference/PROVENANCE.md``. Options: ``box_seed`` (the box shifts' seed, 2025 as ``get_boxes.py``),
    ``interactions`` (the clicks, 5)."""

    name: ClassVar[str] = "cvpr25-interactive"
    kinds: ClassVar[tuple[str, ...]] = ("volume",)

    clicks_in_3d: ClassVar[bool] = True

    box_seed: int = 2025
    correction: str = "point"
    #: the NSD's spacing: the npz's as stored, as the challenge's script (``as-stored``), or ``array``
    nsd_spacing: str = "as-stored"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.correction != "point":
            raise InputError(f"{self.name}: its corrections are the challenge's clicks (correction=point)")
        if self.nsd_spacing not in ("as-stored", "array"):
            raise InputError(f"{self.name}: nsd_spacing must be as-stored or array, got {self.nsd_spacing!r}")
        if isinstance(self.box_seed, bool) or int(self.box_seed) != self.box_seed or self.box_seed < 0:
            raise InputError(f"{self.name}: box_seed must be a whole number >= 0, got {self.box_seed!r}")

    def prompts(self, source: Any, kind: str | None = None, target_labels: Any = None,
                targets: Any = None) -> list[Prompt]:
        """The challenge's boxes: those an npz stores (``boxes``, one per class in label order: the case's
        ``metadata["cvpr25_boxes"]``) for the targets that are one of its labels, else made (module doc)."""
        metadata = getattr(source, "metadata", None) or {}
        label_map = getattr(source, "label", None)
        stored = metadata.get("cvpr25_boxes")
        self._stored = {}
        if stored and label_map is not None:
            present = [int(v) for v in np.unique(label_map) if v != 0]
            self._stored = dict(zip(present, stored))
        try:
            return super().prompts(source, kind, target_labels, targets)
        finally:
            self._stored = {}

    def _prompts(self, target: Any) -> list[Prompt]:
        rng = np.random.RandomState(int(self.box_seed))  # one per case, its targets in order (module doc)
        return [self._box_prompt(target.mask(lab), lab, rng, lab not in target.masks) for lab in target.labels]

    def _box_prompt(self, mask: np.ndarray, target_label: int, rng: np.random.RandomState,
                    own_label: bool = True) -> Prompt:
        mask = np.asarray(mask) != 0
        if not mask.any():
            return empty_prompt(self.name, target_label)
        stored = getattr(self, "_stored", {}).get(int(target_label)) if own_label else None
        box = dict(stored) if stored is not None else challenge_box(mask, rng)
        plane = (box["z_mid_x_min"], box["z_mid_y_min"], box["z_mid_x_max"], box["z_mid_y_max"])
        return Prompt(target_label=target_label, slice_index=box["z_mid"], boxes=[plane], protocol=self.name,
                      info={"cvpr25_box": box, "z_range": [box["z_min"], box["z_max"]], "margin": 0})

    def extent_anchors(self, first: Prompt, n_slices: int) -> list[Prompt]:
        """Absent anchors just outside the box's z-range (the model is told where the object ends)."""
        z_min, z_max = first.info["cvpr25_box"]["z_min"], first.info["cvpr25_box"]["z_max"]
        return [absent_prompt(int(first.target_label), z, protocol=self.name)
                for z in (z_min - 1, z_max + 1) if 0 <= z < n_slices]

    def next_correction(self, prediction: np.ndarray, truth: np.ndarray, anchors: dict[int, Prompt],
                        target_label: int) -> Prompt | None:
        """The challenge's click as a correction of its slice (module doc); None when nothing is wrong."""
        click = challenge_click(prediction, truth)
        if click is None:
            return None
        (z, y, x), foreground = click
        prompt = Prompt(target_label, slice_index=z, points=[(float(x), float(y))], point_labels=[int(foreground)],
                        protocol=self.name, info={"correction": "click", "click_zyx": [z, y, x]})
        if z not in anchors:
            box = tight_box(np.asarray(prediction[z], bool))
            if box is not None:
                prompt.boxes = [box]  # the click refines what the model gave on that slice
        return prompt


__all__ = ["CLICKS", "CVPR25Protocol", "challenge_box", "challenge_click"]
