"""Prompt sensitivity: is it the model or my prompt?

One prompt is given N times, each time perturbed at random (seeded), and each
copy is propagated as the original would be. Where the N masks agree, the
result does not depend on the prompt's exact placement; where they disagree,
it does. What comes out (:class:`SensitivityResult`):

- the agreement map: per voxel, the fraction of the N runs that segmented it
  (1 where every run did, 0 where none did);
- with ground truth, each run's DSC: their minimum / median / maximum (the
  spread) and the run that is worst.

Perturbations (:class:`Perturbation`): every box is shifted and scaled by the
``box-jitter`` protocol's rule (:func:`~napari_medsam_eval.protocols.jitter.jitter_box`,
its defaults: centre up to 10% of the box's width / height, size up to 10%);
every point moves by up to ``point_shift_px`` pixels in x and y, clipped to
the image. The prompt's slice, labels and target do not change. The draws come
from ``np.random.default_rng([seed, crc32(key), target_label])``, so one seed
gives the same N prompts for one case in any order of cases and any process.

Embeddings are computed once: the runs go through the same backend and the same
``case_id`` (its embedding cache), so N runs of a volume cost one encoding of
each slice and N decoder passes per slice.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Generator, Hashable, Sequence

import numpy as np

from ..evaluation.metrics import compute_dice
from ..protocols.base import check_runs
from ..models.base import SegmentationBackend
from ..core.progress import SliceProgress, until_cancelled
from ..core.prompt import Prompt
from ..propagation import PropagationResult, segment_by_kind
from ..protocols.base import stable_key
from ..protocols.jitter import jitter_box
from ..core.errors import InputError

#: perturbed runs when nobody says how many
DEFAULT_RUNS = 10
#: a run's mask from a prompt; ``progress(done, total) -> False`` stops it (a cancelled result)
Segmenter = Callable[[Prompt], PropagationResult]


@dataclass(frozen=True)
class Perturbation:
    """How far a prompt is moved (see the module doc); the defaults are the ``box-jitter`` protocol's."""

    shift_frac: float = 0.1
    scale_frac: float = 0.1
    point_shift_px: float = 5.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.shift_frac) and self.shift_frac >= 0):
            raise InputError(f"sensitivity: shift_frac must be >= 0, got {self.shift_frac!r}")
        if not (0 <= self.scale_frac < 1):
            raise InputError(f"sensitivity: scale_frac must be in [0, 1), got {self.scale_frac!r}")
        if not (np.isfinite(self.point_shift_px) and self.point_shift_px >= 0):
            raise InputError(f"sensitivity: point_shift_px must be >= 0, got {self.point_shift_px!r}")


def perturb_prompt(prompt: Prompt, shape_hw: tuple[int, int], rng: np.random.Generator,
                   perturbation: Perturbation = Perturbation()) -> Prompt:
    """One perturbed copy of ``prompt`` (boxes jittered, points moved), ``info["perturbed_from"]`` its boxes."""
    boxes = [jitter_box(tuple(int(round(v)) for v in box), shape_hw, rng, perturbation.shift_frac,
                        perturbation.scale_frac)[0] for box in prompt.boxes]
    height, width = int(shape_hw[0]), int(shape_hw[1])
    points = []
    for x, y in prompt.points:
        dx, dy = rng.uniform(-1.0, 1.0, size=2) * perturbation.point_shift_px
        points.append((float(np.clip(round(x + dx), 0, width - 1)), float(np.clip(round(y + dy), 0, height - 1))))
    info = {**prompt.info, "perturbed_from": [list(b) for b in prompt.boxes] or [list(p) for p in prompt.points]}
    return dataclasses.replace(prompt, boxes=[tuple(float(v) for v in b) for b in boxes], points=points, info=info)


def perturbed_prompts(prompt: Prompt, shape_hw: tuple[int, int], runs: int = DEFAULT_RUNS,
                      perturbation: Perturbation = Perturbation(), key: str = "") -> list[Prompt]:
    """``runs`` perturbed copies of ``prompt``, seeded by ``perturbation.seed``, ``key`` (a case id) and the target."""
    runs = check_runs(runs)
    if prompt.is_empty:
        raise InputError("sensitivity: the prompt is empty (no box, no point): nothing to perturb")
    rng = np.random.default_rng([perturbation.seed, stable_key(key), int(prompt.target_label)])
    return [perturb_prompt(prompt, shape_hw, rng, perturbation) for _ in range(runs)]


@dataclass
class SensitivityResult:
    """What N perturbed runs of one prompt gave (module doc)."""

    prompts: list[Prompt]
    #: per voxel, the fraction of the runs that segmented it (float32 in [0, 1]); the runs done so far
    agreement: np.ndarray
    #: each run's DSC against the ground truth (None without ground truth)
    dice: list[float] | None = None
    #: the worst run's mask (None without ground truth)
    worst_mask: np.ndarray | None = None
    #: runs finished (fewer than ``len(prompts)`` when cancelled)
    done: int = 0
    cancelled: bool = False
    #: which model and precision made the runs (:func:`~napari_medsam_eval.models.base.made_by`), when known
    made_by: str = ""

    @property
    def worst(self) -> int | None:
        """Index of the run with the lowest DSC (None without ground truth or runs)."""
        return None if not self.dice else int(np.argmin(self.dice))

    def spread(self) -> dict[str, float]:
        """``{"runs", "dice_min", "dice_median", "dice_max", "dice_spread"}`` (NaN without ground truth)."""
        values = np.asarray(self.dice if self.dice else [np.nan], dtype=float)
        low, mid, high = (float(v) for v in (np.min(values), np.median(values), np.max(values)))
        return {"runs": self.done, "dice_min": low, "dice_median": mid, "dice_max": high, "dice_spread": high - low}

    def histogram(self, bins: int = 10) -> tuple[np.ndarray, np.ndarray]:
        """Counts of the runs' DSC in ``bins`` equal bins over [0, 1], and the bin edges."""
        return np.histogram(np.asarray(self.dice or [], dtype=float), bins=bins, range=(0.0, 1.0))


def iter_sensitivity(segment: Segmenter, prompts: Sequence[Prompt], ground_truth: np.ndarray | None = None,
                     cancel: threading.Event | None = None) -> Generator[tuple[int, int], None, SensitivityResult]:
    """Run ``segment`` on each prompt, yielding ``(runs done, runs)``; returns the :class:`SensitivityResult`.

    ``ground_truth``: the target's bool mask, for each run's DSC. Setting
    ``cancel`` stops after the current run (the result holds the runs done).
    """
    prompts = list(prompts)
    gt = None if ground_truth is None else np.asarray(ground_truth, dtype=bool)
    counts: np.ndarray | None = None
    dice: list[float] = []
    worst_mask = None
    done = 0
    yield 0, len(prompts)
    for prompt in prompts:
        if cancel is not None and cancel.is_set():
            break
        result = segment(prompt)
        if result.cancelled:
            break
        mask = np.asarray(result.mask, dtype=bool)
        counts = mask.astype(np.uint16) if counts is None else counts + mask
        if gt is not None:
            dice.append(float(compute_dice(mask, gt)))
            if dice[-1] == min(dice):
                worst_mask = mask
        done += 1
        yield done, len(prompts)
    agreement = (np.zeros(gt.shape if gt is not None else (0,), np.float32) if counts is None
                 else (counts / np.float32(max(done, 1))).astype(np.float32))
    return SensitivityResult(prompts, agreement, dice if gt is not None else None, worst_mask, done,
                             cancelled=done < len(prompts))


def sensitivity(segment: Segmenter, prompts: Sequence[Prompt], ground_truth: np.ndarray | None = None,
                cancel: threading.Event | None = None) -> SensitivityResult:
    """:func:`iter_sensitivity` run to its end."""
    steps = iter_sensitivity(segment, prompts, ground_truth, cancel)
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value


def volume_segmenter(backend: SegmentationBackend, image: np.ndarray, kind: str, *, case_id: Hashable,
                     lock: ContextManager | None = None, progress: SliceProgress | None = None,
                     cancel: threading.Event | None = None, **options: Any) -> Segmenter:
    """A :data:`Segmenter` that propagates each prompt through ``image`` as a benchmark or the
    Segment widget does (:func:`~napari_medsam_eval.propagation.segment_by_kind` with the same
    ``case_id``, so the backend's embedding cache serves every run). ``lock`` is held per run;
    ``progress`` answering False or ``cancel`` set stops inside a run. ``options``: ``margin``,
    ``rules``, ... as ``segment_by_kind`` takes them."""

    go_on = until_cancelled(progress, cancel)

    def segment(prompt: Prompt) -> PropagationResult:
        with lock if lock is not None else contextlib.nullcontext():
            return segment_by_kind(backend, image, kind, prompt, case_id=case_id, progress=go_on, **options)
    return segment


__all__ = [
    "DEFAULT_RUNS",
    "Perturbation",
    "SensitivityResult",
    "check_runs",
    "iter_sensitivity",
    "perturb_prompt",
    "perturbed_prompts",
    "sensitivity",
    "volume_segmenter",
]
