"""Iterative point prompts of Mazurowski et al. 2023 (their Algorithm 1).

Source: arXiv:2304.10517, Algorithm 1; github.com/mazurowski-lab/segment-anything-medical-evaluation
(commit 2775b73), ``prompt_gen_and_exec_v1.py`` l.340-348 and 401-417.

* first point: the interior point (see :mod:`.geometry`) of the *whole* target
  mask, all parts together (unlike mode 1, which uses the largest part);
  label 1.
* each next point: the interior point of the error region ``gt XOR
  prediction``; its label is 1 where the ground truth is foreground at that
  pixel, else 0.
* every step re-feeds *all* points so far to the model (no mask input); the
  prediction is the model's first candidate, logits > 0.
* one ``randint`` draw per point on a tie, from one RNG reset to ``seed``
  before the mask (``per-mask-seed-1`` in the reference fixture).

Deliberate difference: when the error region is empty (the prediction equals
the ground truth) the sequence **ends** here. Their code takes the distance
transform of an all-zero image, where every pixel ties at 0, and so adds a
random pixel anywhere in the image, labelled by the ground truth; that point
says nothing about an error and only adds noise. A run records fewer steps
instead, and a scorer carries the last prediction forward.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from ..core.prompt import Prompt
from .base import PromptProtocol, PromptSource, check_choice, empty_prompt
from .geometry import DT_BACKENDS, interior_point
from .mazurowski import SLICE_RULES, slice_plan
from ..core.errors import InputError

#: backend_fn(points (N, 2) float (x, y), labels (N,) int) -> binary prediction (H, W)
BackendFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
RNG = np.random.RandomState | np.random.Generator | None


def first_point(gt: np.ndarray, rng: RNG = None, dt_backend: str = "opencv-c") -> tuple[int, int, int, int] | None:
    """``(x, y, label, n_ties)`` of the first point: interior point of the whole mask; None if empty."""
    gt = np.asarray(gt) != 0
    found = interior_point(gt, rng, dt_backend)
    if found is None:
        return None
    x, y, n = found
    return x, y, 1, n


def next_point(
    gt: np.ndarray,
    prediction: np.ndarray,
    rng: RNG = None,
    dt_backend: str = "opencv-c",
) -> tuple[int, int, int, int] | None:
    """``(x, y, label, n_ties)`` of the next point, or None when the error region is empty.

    The point is the interior point of ``gt XOR prediction`` (a draw from
    ``rng`` when pixels tie); ``label`` is 1 if ``gt`` is foreground there.
    """
    gt = np.asarray(gt) != 0
    prediction = np.asarray(prediction) != 0
    if gt.shape != prediction.shape or gt.ndim != 2:
        raise InputError(f"gt {gt.shape} and prediction {prediction.shape} must be 2D arrays of one shape")
    found = interior_point(gt ^ prediction, rng, dt_backend)
    if found is None:
        return None
    x, y, n = found
    return x, y, int(gt[y, x]), n


@dataclass
class IterationStep:
    """One step: the prompt fed (all points so far) and the prediction it gave."""

    prompt: Prompt
    prediction: np.ndarray


@dataclass
class IterativeRun:
    """The steps of one iterative run; ``stopped`` says why it ended."""

    steps: list[IterationStep] = field(default_factory=list)
    stopped: str = "n_points reached"

    @property
    def prompts(self) -> list[Prompt]:
        return [s.prompt for s in self.steps]

    @property
    def predictions(self) -> list[np.ndarray]:
        return [s.prediction for s in self.steps]

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def __getitem__(self, i: int) -> IterationStep:
        return self.steps[i]


def iterate(
    backend_fn: BackendFn,
    gt: np.ndarray,
    n_steps: int,
    seed: int = 1,
    *,
    rng: RNG = None,
    dt_backend: str = "opencv-c",
    target_label: int = 1,
    slice_index: int | None = None,
    protocol: str = "iterative-points",
) -> IterativeRun:
    """Run Algorithm 1 for ``n_steps`` points against ``backend_fn``.

    ``backend_fn(points, labels)`` gets every point so far as a float ``(N, 2)``
    array of ``(x, y)`` and an int ``(N,)`` array of labels, and returns the
    binary prediction ``(H, W)``. It is called once per point, so the run
    has up to ``n_steps`` steps; step ``k`` holds the prompt with ``k + 1``
    points and its prediction. ``rng`` defaults to ``RandomState(seed)``, made
    here (their per-mask stream). An empty ``gt`` gives no step
    (``stopped="empty ground truth"``: score NaN); an empty error region ends
    the run early (``stopped="empty error region"``).
    """
    if n_steps < 1:
        raise InputError(f"n_steps must be >= 1, got {n_steps}")
    gt = np.asarray(gt) != 0
    if gt.ndim != 2:
        raise InputError(f"gt must be 2D, got shape {gt.shape}")
    if rng is None:
        rng = np.random.RandomState(seed)
    run = IterativeRun()
    found = first_point(gt, rng, dt_backend)
    if found is None:
        run.stopped = "empty ground truth"
        return run
    points: list[tuple[int, int]] = [found[:2]]
    labels: list[int] = [found[2]]
    ties: list[int] = [found[3]]
    while True:
        prompt = Prompt(
            target_label=target_label,
            slice_index=slice_index,
            points=list(points),
            point_labels=list(labels),
            protocol=protocol,
            info={"step": len(points) - 1, "tie_candidates": list(ties), "seed": seed, "dt_backend": dt_backend},
        )
        prediction = np.asarray(backend_fn(prompt.points_array(), prompt.labels_array()))
        if prediction.shape != gt.shape:
            raise InputError(f"backend_fn returned shape {prediction.shape}, expected {gt.shape}")
        run.steps.append(IterationStep(prompt, prediction != 0))
        if len(points) >= n_steps:
            return run
        found = next_point(gt, prediction, rng, dt_backend)
        if found is None:
            run.stopped = "empty error region"
            return run
        points.append(found[:2])
        labels.append(found[2])
        ties.append(found[3])


@dataclass
class IterativePointsProtocol(PromptProtocol):
    """Mazurowski et al.'s iterative points (Algorithm 1): error-region interior points.

    Source: arXiv:2304.10517, Alg. 1; github.com/mazurowski-lab/segment-anything-medical-evaluation
    (commit 2775b73, ``prompt_gen_and_exec_v1.py`` l.340-348, 401-417). Rules
    and the one deliberate difference (an empty error region ends the run) are
    in this module's docstring.

    :meth:`prompts` gives the *first* prompt of each run (one positive point,
    the interior point of the whole target), in the same order and on the
    same slices as :class:`~.mazurowski.MazurowskiProtocol` (2D: labels
    ascending; volumes/videos: ``slices`` "all" or "key"). The runner then
    calls :meth:`iterate` per mask with its model. Each mask's RNG is
    ``RandomState(seed)`` reset before it, so the first prompt from
    :meth:`prompts` equals the first step of :meth:`iterate`.

    Options:
        n_points: points per run (9, the range of the paper's Fig. 6; their
            ``--num-prompt`` defaults to 1). Every step is recorded, so one run
            scores 1..n_points points.
        seed: 1 (their ``np.random.seed(1)``).
        dt_backend: ``"opencv-c"`` (default) or ``"opencv-ipp"``.
        slices: ``"all"`` or ``"key"`` for volumes and videos.
    """

    name: ClassVar[str] = "iterative-points"

    seed: int = 1
    n_points: int = 9
    dt_backend: str = "opencv-c"
    slices: str = "all"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self.name, "dt_backend", self.dt_backend, DT_BACKENDS)
        check_choice(self.name, "slices", self.slices, SLICE_RULES)
        if int(self.n_points) != self.n_points or self.n_points < 1:
            raise InputError(f"{self.name}: n_points must be a positive integer, got {self.n_points!r}")
        self.n_points = int(self.n_points)

    def first_prompt(self, gt: np.ndarray, target_label: int = 1, slice_index: int | None = None) -> Prompt:
        found = first_point(gt, np.random.RandomState(self.seed), self.dt_backend)
        info: dict[str, Any] = {"step": 0, "seed": self.seed, "dt_backend": self.dt_backend}
        if found is None:
            return empty_prompt(self.name, target_label, slice_index, **info)
        x, y, label, n = found
        info["tie_candidates"] = [n]
        return Prompt(target_label, slice_index, points=[(x, y)], point_labels=[label], protocol=self.name, info=info)

    def next_point(self, gt: np.ndarray, prediction: np.ndarray, rng: RNG = None) -> tuple[int, int, int, int] | None:
        return next_point(gt, prediction, rng, self.dt_backend)

    def iterate(
        self,
        backend_fn: BackendFn,
        gt: np.ndarray,
        *,
        target_label: int = 1,
        slice_index: int | None = None,
        n_points: int | None = None,
    ) -> IterativeRun:
        return iterate(
            backend_fn,
            gt,
            self.n_points if n_points is None else n_points,
            self.seed,
            dt_backend=self.dt_backend,
            target_label=target_label,
            slice_index=slice_index,
            protocol=self.name,
        )

    def _prompts(self, target: PromptSource) -> list[Prompt]:
        if target.is_2d:
            return [self.first_prompt(target.mask(lab), lab) for lab in target.labels]
        out = []
        for index, labels in slice_plan(target, self.slices):
            for lab in labels:
                out.append(self.first_prompt(target.mask(lab)[index], lab, index))
        for lab in target.labels:
            if not target.mask(lab).any():
                out.append(self.first_prompt(np.zeros((1, 1), bool), lab))
        return out
