"""The five non-iterative prompt modes of Mazurowski et al. 2023, reproduced exactly.

Source: M. A. Mazurowski et al., "Segment Anything Model for Medical Image
Analysis: an Experimental Study" (arXiv:2304.10517), code
github.com/mazurowski-lab/segment-anything-medical-evaluation at commit
2775b73f3165a8aaaf157f283fb5cc44276739ae, ``prompt_gen_and_exec_v2_allmode.py``
(paper modes 1-5 = code modes 0-4). Checked against prompts made by running
their code unchanged (``shared/reference/mazurowski_prompts.json``).

The rules, per binary mask (one class of one 2D image):

1. parts = ``skimage.measure.label(mask, connectivity=2)`` (8-neighbour),
   sorted by pixel count, largest first; equal sizes: higher label id first
   (their sort of ``(share, id)`` pairs, reversed). No minimum size.
2. interior point of a part = a pixel at the maximum of OpenCV's L2 5x5
   chamfer distance of the part padded by one zero pixel; all maxima in
   row-major order, one picked by ``np.random.randint(0, n)`` from the legacy
   global RNG (no draw when ``n == 1``).
3. draws, in order: the mode-1 point (largest part), then one draw per mode-2
   point (three largest parts, largest first). Box modes draw nothing. So the
   first mode-2 point may differ from the mode-1 point on a tie.
4. mode 1: the point of the largest part; mode 2: points of the 3 largest;
   mode 3: tight box of the largest; mode 4: tight boxes of the 3 largest;
   mode 5: tight box of the whole mask (tiny parts included). Boxes inclusive.
5. an empty mask is skipped: no prompts, no draw, the class scores NaN.

Their RNG is seeded once per process (``np.random.seed(1)``, l.19), so a point
depends on every tie met before it in ``os.listdir`` order. The default here,
``seeding="per-mask"``, resets ``RandomState(seed)`` before each mask and so
makes every mask's prompts independent of the order (the fixture's
``per-mask-seed-1``); ``seeding="shared"`` keeps one stream across calls as
their script does (the fixture's ``script-order`` when masks are fed in the
same order).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..io.mazurowski_masks import mazurowski_label_map  # noqa: F401 - their reading rule, named with the protocol
from ..core.prompt import Prompt
from .base import PromptProtocol, PromptSource, check_choice, empty_prompt, present_slices
from .geometry import DT_BACKENDS, connected_parts, interior_point, tight_box
from .medsam2 import KEY_SLICE_RULES, VIDEO_FRAME_RULES, key_frame_index, key_slice_index
from ..core.errors import InputError

MODES: tuple[int, ...] = (1, 2, 3, 4, 5)
SEEDINGS: tuple[str, ...] = ("per-mask", "shared")
SLICE_RULES: tuple[str, ...] = ("all", "key")


def slice_plan(target: PromptSource, slices: str = "all") -> list[tuple[int, list[int]]]:
    """Which 2D slices of a volume/video to study: ``[(index, [labels on it]), ...]``, slice order.

    ``"all"``: every slice/frame holding the label; ``"key"``: only the MedSAM2
    key slice (middle of the z-extent) or key frame (first holding the label).
    Labels absent from the whole case appear nowhere.
    """
    check_choice("slices", "slices", slices, SLICE_RULES)
    per_slice: dict[int, list[int]] = {}
    for lab in target.labels:
        mask = target.mask(lab)
        if slices == "all":
            indices = [int(i) for i in present_slices(mask)]
        elif target.kind == "video":
            key, _ = key_frame_index(mask, VIDEO_FRAME_RULES[0])
            indices = [] if key is None else [key]
        else:
            key, _ = key_slice_index(mask, KEY_SLICE_RULES[0])
            indices = [] if key is None else [key]
        for i in indices:
            per_slice.setdefault(i, []).append(lab)
    return sorted(per_slice.items())


@dataclass
class MazurowskiPromptSet:
    """The five modes' prompts for one binary mask, in the fixture's terms.

    Points are ``(x, y)`` (all positive), boxes inclusive ``(x0, y0, x1, y1)``;
    ``tie_candidates`` gives, per point, how many pixels tied at the maximum
    (a draw was made where it is > 1). ``part_sizes`` are the pixel counts of
    all parts, largest first. ``empty``: the mask had no foreground (all lists
    empty, no draw).
    """

    mode1_points: list[tuple[int, int]] = field(default_factory=list)
    mode2_points: list[tuple[int, int]] = field(default_factory=list)
    mode3_boxes: list[tuple[int, int, int, int]] = field(default_factory=list)
    mode4_boxes: list[tuple[int, int, int, int]] = field(default_factory=list)
    mode5_boxes: list[tuple[int, int, int, int]] = field(default_factory=list)
    tie_candidates: dict[str, list[int]] = field(default_factory=lambda: {"mode1": [], "mode2": []})
    part_sizes: list[int] = field(default_factory=list)
    empty: bool = False

    def points(self, mode: int) -> list[tuple[int, int]]:
        return {1: self.mode1_points, 2: self.mode2_points}.get(mode, [])

    def boxes(self, mode: int) -> list[tuple[int, int, int, int]]:
        return {3: self.mode3_boxes, 4: self.mode4_boxes, 5: self.mode5_boxes}.get(mode, [])

    def to_reference_dict(self) -> dict[str, Any]:
        """The layout of ``mazurowski_prompts.json`` (points ``[x, y, 1]``, None when empty)."""
        if self.empty:
            return {f"mode{m}_{'points' if m < 3 else 'boxes'}": None for m in MODES}
        out: dict[str, Any] = {
            "mode1_points": [[x, y, 1] for x, y in self.mode1_points],
            "mode2_points": [[x, y, 1] for x, y in self.mode2_points],
        }
        for m in (3, 4, 5):
            out[f"mode{m}_boxes"] = [list(b) for b in self.boxes(m)]
        return out


def mazurowski_prompt_set(
    mask: np.ndarray,
    rng: np.random.RandomState | None,
    dt_backend: str = "opencv-c",
    max_parts: int = 3,
    connectivity: int = 2,
) -> MazurowskiPromptSet:
    """Prompts of all five modes for one 2D binary mask, drawing from ``rng`` in their order.

    ``rng`` is advanced exactly as their code advances the global NumPy RNG;
    ``None`` takes the first tied pixel in row-major order (no randomness).
    """
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise InputError(f"mask must be 2D, got shape {mask.shape}")
    mask = mask != 0
    if not mask.any():
        return MazurowskiPromptSet(empty=True)
    labels, ids, sizes = connected_parts(mask, connectivity)
    first = interior_point(labels == ids[0], rng, dt_backend)
    assert first is not None
    out = MazurowskiPromptSet(part_sizes=sizes)
    out.mode1_points = [first[:2]]
    out.tie_candidates["mode1"] = [first[2]]
    for part_id in ids[:max_parts]:
        x, y, n = interior_point(labels == part_id, rng, dt_backend)  # type: ignore[misc]
        out.mode2_points.append((x, y))
        out.tie_candidates["mode2"].append(n)
    out.mode4_boxes = [tight_box(labels == part_id) for part_id in ids[:max_parts]]  # type: ignore[misc]
    out.mode3_boxes = out.mode4_boxes[:1]
    out.mode5_boxes = [tight_box(mask)]  # type: ignore[list-item]
    return out


@dataclass
class MazurowskiProtocol(PromptProtocol):
    """Mazurowski et al. 2023, modes 1-5: points and boxes from the parts of the ground truth.

    Source: arXiv:2304.10517; github.com/mazurowski-lab/segment-anything-medical-evaluation
    (commit 2775b73, ``prompt_gen_and_exec_v2_allmode.py`` l.19, 60-68, 237-298).
    The rules are in this module's docstring; the prompts equal those of their
    code bit for bit (tested on the 105 masks x 2 seedings of
    ``mazurowski_prompts.json`` and its synthetic cases).

    Output: for each mask, one :class:`Prompt` per mode in ``modes`` (in that
    order) with ``info["mode"]`` (paper numbering), ``info["code_mode"]``
    (``mode - 1``), ``info["n_parts"]``, ``info["tie_candidates"]`` (point
    modes), ``seed``, ``seeding`` and ``dt_backend``. Points are positive
    (label 1); mode 2/4 list the parts largest first; several boxes are
    segmented one by one and merged by union. An empty mask gives one empty
    prompt per mode (``info["empty"]``: score NaN, as their code skips it).

    2D images: masks are the target labels in ascending order. Volumes and
    videos are studied as 2D slices (as the paper did): ``slices="all"``
    (default) prompts every slice/frame holding the target, slice-major and
    label-minor (their loop: image, then class); ``slices="key"`` only the
    MedSAM2 key slice (middle of the z-extent) / key frame (first present).
    A target label absent from the whole case gives empty prompts with
    ``slice_index`` None.

    Options:
        modes: which modes to emit (default all five). The RNG draws are made
            for modes 1 and 2 whatever is emitted, so a mode's prompt never
            depends on which others were asked for.
        seed: 1, their ``np.random.seed(1)``.
        seeding: ``"per-mask"`` (default; ``RandomState(seed)`` reset before each
            mask) or ``"shared"`` (one ``RandomState(seed)`` for the protocol
            object's lifetime, advanced across calls as their script's global
            RNG; :meth:`reset` starts it again).
        dt_backend: ``"opencv-c"`` (default; OpenCV's portable C chamfer,
            reproducible anywhere) or ``"opencv-ipp"`` (Intel IPP, the
            wheels' default and probably what the authors ran; its last bits
            are CPU-dependent and can change which pixels tie).
        max_parts: parts used by modes 2 and 4 (3).
        connectivity: ``skimage.measure.label`` connectivity (2 = 8-neighbour).
        slices: ``"all"`` or ``"key"`` for volumes and videos (see above).
    """

    name: ClassVar[str] = "mazurowski"

    seed: int = 1
    modes: tuple[int, ...] = MODES
    seeding: str = "per-mask"
    dt_backend: str = "opencv-c"
    max_parts: int = 3
    connectivity: int = 2
    slices: str = "all"
    _rng: np.random.RandomState = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.modes = tuple(int(m) for m in self.modes)
        if not self.modes or any(m not in MODES for m in self.modes) or len(set(self.modes)) != len(self.modes):
            raise InputError(f"{self.name}: modes must be distinct values from {list(MODES)}, got {self.modes!r}")
        check_choice(self.name, "seeding", self.seeding, SEEDINGS)
        check_choice(self.name, "dt_backend", self.dt_backend, DT_BACKENDS)
        check_choice(self.name, "slices", self.slices, SLICE_RULES)
        check_choice(self.name, "connectivity", self.connectivity, (1, 2))
        if int(self.max_parts) != self.max_parts or self.max_parts < 1:
            raise InputError(f"{self.name}: max_parts must be a positive integer, got {self.max_parts!r}")
        self.reset()

    def reset(self) -> None:
        """Restart the shared RNG stream (``seeding="shared"``) at ``seed``."""
        self._rng = np.random.RandomState(self.seed)

    def _mask_rng(self) -> np.random.RandomState:
        return np.random.RandomState(self.seed) if self.seeding == "per-mask" else self._rng

    def prompt_set(self, mask: np.ndarray) -> MazurowskiPromptSet:
        """All five modes for one 2D binary mask, with this protocol's RNG rule."""
        mask = np.asarray(mask) != 0
        if not mask.any():  # no draw, and a per-mask RNG is not even made
            return MazurowskiPromptSet(empty=True)
        return mazurowski_prompt_set(mask, self._mask_rng(), self.dt_backend, int(self.max_parts), self.connectivity)

    def prompts_for_mask(self, mask: np.ndarray, target_label: int, slice_index: int | None = None) -> list[Prompt]:
        """One prompt per mode in ``modes`` for one 2D binary mask."""
        pset = self.prompt_set(mask)
        base = {"seed": self.seed, "seeding": self.seeding, "dt_backend": self.dt_backend}
        out = []
        for mode in self.modes:
            info: dict[str, Any] = {"mode": mode, "code_mode": mode - 1, **base}
            if pset.empty:
                out.append(empty_prompt(self.name, target_label, slice_index, **info))
                continue
            info["n_parts"] = len(pset.part_sizes)
            points = pset.points(mode)
            if points:
                info["tie_candidates"] = list(pset.tie_candidates[f"mode{mode}"])
            out.append(
                Prompt(
                    target_label=target_label,
                    slice_index=slice_index,
                    boxes=pset.boxes(mode),
                    points=points,
                    point_labels=[1] * len(points),
                    protocol=self.name,
                    info=info,
                )
            )
        return out

    def _prompts(self, target: PromptSource) -> list[Prompt]:
        if target.is_2d:
            out: list[Prompt] = []
            for lab in target.labels:
                out.extend(self.prompts_for_mask(target.mask(lab), lab))
            return out
        absent = [lab for lab in target.labels if not target.mask(lab).any()]
        out = []
        for index, labels in slice_plan(target, self.slices):
            for lab in labels:
                out.extend(self.prompts_for_mask(target.mask(lab)[index], lab, index))
        for lab in absent:
            out.extend(self.prompts_for_mask(np.zeros((1, 1), bool), lab))
        return out
