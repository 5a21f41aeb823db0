"""A simulated user who corrects a propagated volume or video: the ``corrections`` protocol.

The first prompt is the ``medsam2`` box on the key slice (middle of the target; videos:
the first frame holding it), propagated. Then, up to ``interactions`` times (K, default 5):

1. **where**: the slice / frame with the largest error, false positives plus false
   negatives; ties go to the lowest index. Videos: only frames from the prompted one on (the
   ones the protocol segments). No error anywhere: the run is done (the curve is carried
   forward).
2. **what**, by the documented rule:
   * a model that takes points (SAM, MedSAM2/SAM2): one click at the interior point of the
     largest error region of that slice (8-connected; the pixel farthest from the region's
     border, :func:`~.geometry.interior_point`), positive in a missed region, negative in a
     false one (the RITM / SimpleClick convention, also the 2D iterative protocol's). It is
     added on top of that slice's anchor; a slice without one starts from the box of its
     current prediction (when it has one), so the click refines what the user sees.
   * a box-only model, or one trained on boxes only (LiteMedSAM, whose ``box_trained`` says
     so): the ground truth's tight box on that slice; where the
     ground truth is empty there, an *absent* anchor (the user erases the slice: the object
     ends here). Slices that already hold an anchor are not chosen again for such a model
     (a second box there would be the same box).
   * with the ``correction`` option the user's tool is chosen instead of by the model
     (``auto``, the default, is the rule above): ``box`` (the ground-truth box, as above),
     ``point`` (the click, as above) or a **brush**. ``paint``: the user paints
     that slice's ground truth, the whole slice (a clinician fixing a slice with the brush
     leaves it right; it is also what the targets were measured with); ``paint-region``:
     only the largest error region of that slice is painted right (the prediction keeps its
     other errors), a cheaper stroke. Either is a painted anchor
     (:mod:`napari_medsam_eval.core.anchor_prompts`): its slice is kept exactly as painted and
     the propagation from it starts from the painted mask (its box for LiteMedSAM, the mask
     for MedSAM2 / SAM2). Effort counts painted slices, one per interaction; a slice painted
     whole has no error left and is not chosen again.
3. the correction is an anchor (:mod:`napari_medsam_eval.propagation.anchors`): that slice is
   segmented again and propagated to the neighbouring anchors (the loop that runs the model:
   :func:`napari_medsam_eval.studies.corrections.run_corrections`).

After each interaction the DSC and NSD of the whole case are recorded (``dice_after``,
``nsd_after``); NoC@80/85/90 follow (:mod:`napari_medsam_eval.evaluation.interaction_effort`). The click's ties are
broken by a draw from one RNG seeded with ``seed`` per target.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Iterable

import numpy as np

from ..models.base import SegmentationBackend
from ..core.anchor_prompts import absent_prompt, painted_prompt
from ..core.prompt import Prompt
from .geometry import DT_BACKENDS, interior_point, tight_box
from .medsam2 import MedSAM2Protocol
from ..core.errors import InputError

#: the simulated user's tools: by the model (box-trained: box, else point), or one chosen
CORRECTION_TYPES = ("auto", "box", "point", "paint", "paint-region")
#: the tools that paint a slice (painted anchors)
PAINT_TYPES = ("paint", "paint-region")

#: a step's scores: {"dice": ..., "nsd": ...} of the whole case's prediction
Scorer = Callable[[np.ndarray], dict[str, float]]


@dataclass
class CorrectionsProtocol(MedSAM2Protocol):
    """The ``medsam2`` first prompt, then up to ``interactions`` simulated corrections.

    Source: the simulated-user protocols of interactive segmentation (RITM, Sofiiuk et al.
    2022; SimpleClick, Liu et al. 2023; SAM-Med3D's click counts), applied to propagated
    volumes and videos: largest-error slice, click at the interior point of its largest
    error region, or the slice's ground-truth box for a box-only model (module doc).

    Options as :class:`MedSAM2Protocol` (the first prompt), plus ``interactions`` (K, >= 0,
    default 5). ``largest_component`` defaults to False here: corrections may add parts.
    """

    name: ClassVar[str] = "corrections"
    kinds: ClassVar[tuple[str, ...]] = ("volume", "video")

    largest_component: bool = False
    interactions: int = 5
    dt_backend: str = "opencv-c"
    #: the simulated user's tool (:data:`CORRECTION_TYPES`, module doc)
    correction: str = "auto"
    #: True where the protocol places each click itself in 3D (:meth:`next_correction`), not on the worst slice
    clicks_in_3d: ClassVar[bool] = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.interactions, bool) or int(self.interactions) != self.interactions or self.interactions < 0:
            raise InputError(f"{self.name}: interactions must be a whole number >= 0, got {self.interactions!r}")
        self.interactions = int(self.interactions)
        if self.correction not in CORRECTION_TYPES:
            raise InputError(f"{self.name}: correction must be one of {CORRECTION_TYPES}, got {self.correction!r}")
        if self.dt_backend not in DT_BACKENDS:
            raise InputError(f"{self.name}: dt_backend must be one of {DT_BACKENDS}, got {self.dt_backend!r}")


    def extent_anchors(self, first: Prompt, n_slices: int) -> list[Prompt]:
        """Anchors given with the first prompt (none here; a protocol that gives the z-extent: absent anchors
        just outside it)."""
        return []

    def next_correction(self, prediction: np.ndarray, truth: np.ndarray, anchors: dict[int, Prompt],
                        target_label: int) -> Prompt | None:
        """The next correction of a protocol with :attr:`clicks_in_3d` (None: nothing left to correct)."""
        raise NotImplementedError(f"{self.name} corrects the worst slice (studies.corrections)")


def worst_slice(prediction: np.ndarray, truth: np.ndarray, start: int = 0, skip: Iterable[int] = ()) -> int | None:
    """The slice from ``start`` on with the most false positives plus false negatives (the
    lowest index on a tie), ``skip`` left out; None when there is no error there."""
    errors = (np.asarray(prediction, bool) != np.asarray(truth, bool)).reshape(len(truth), -1).sum(axis=1)
    errors[:start] = 0
    errors[list(skip)] = 0
    if not errors.any():
        return None
    return int(np.argmax(errors))


def corrects_with_boxes(backend: SegmentationBackend) -> bool:
    """Whether a simulated user corrects ``backend`` with boxes: it takes no points, or was
    trained on boxes only (LiteMedSAM, ``box_trained``)."""
    return "points" not in backend.accepts or bool(getattr(backend, "box_trained", False))


def correction_type(wanted: str, backend: SegmentationBackend) -> str:
    """The tool the simulated user corrects ``backend`` with: ``wanted``, or for ``auto`` box
    (:func:`corrects_with_boxes`) or point; a ValueError when the model cannot take it."""
    if wanted not in CORRECTION_TYPES:
        raise InputError(f"correction must be one of {CORRECTION_TYPES}, got {wanted!r}")
    if wanted == "auto":
        return "box" if corrects_with_boxes(backend) else "point"
    name = getattr(backend, "name", backend)
    needs = {"box": "box", "point": "points"}.get(wanted)
    if needs is not None and needs not in backend.accepts:
        raise InputError(f"corrections with {wanted}: {name} takes {', '.join(sorted(backend.accepts))}")
    if wanted in PAINT_TYPES and getattr(backend, "propagates_natively", False) and "mask" not in backend.accepts:
        raise InputError(f"corrections with {wanted}: {name} propagates with its memory but takes no mask prompt")
    return wanted


def correction(prediction: np.ndarray, truth: np.ndarray, k: int, with_boxes: bool | str, target_label: int,
               anchor: Prompt | None = None, rng: np.random.Generator | None = None,
               dt_backend: str = "opencv-c") -> Prompt:
    """The simulated user's correction on slice ``k`` (module doc, step 2). ``with_boxes``: the
    tool (a :data:`CORRECTION_TYPES` name other than auto), or True for box, False for point."""
    from ..core.postprocess import largest_component

    how = with_boxes if isinstance(with_boxes, str) else ("box" if with_boxes else "point")
    pred_k, gt_k = np.asarray(prediction[k], bool), np.asarray(truth[k], bool)
    if how in PAINT_TYPES:
        painted = gt_k.copy()
        if how == "paint-region":  # only the largest error region is painted right
            painted = pred_k.copy()
            region = largest_component(pred_k != gt_k)
            painted[region] = gt_k[region]
        return painted_prompt(target_label, k, painted, protocol=CorrectionsProtocol.name, correction=how)
    if how == "box":
        box = tight_box(gt_k)
        if box is None:
            return absent_prompt(target_label, k, protocol=CorrectionsProtocol.name)
        return Prompt(target_label, slice_index=k, boxes=[box], protocol=CorrectionsProtocol.name,
                      info={"correction": "box"})
    region = largest_component(pred_k != gt_k)  # 8-connected in 2D, the first in raster order on a tie
    x, y, _ties = interior_point(region, rng, dt_backend)  # type: ignore[misc] - the region is not empty
    label = int(gt_k[y, x])
    click = Prompt(target_label, slice_index=k, points=[(x, y)], point_labels=[label],
                   protocol=CorrectionsProtocol.name, info={"correction": "click"})
    if anchor is None and pred_k.any():
        click.boxes = [tight_box(pred_k)]  # the click refines what the user sees on that slice
    return click


