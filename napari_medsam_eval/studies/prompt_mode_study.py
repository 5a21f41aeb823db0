"""The 2D prompt-mode study of Mazurowski et al. 2023, as a runner (no Qt, no napari).

Source: M. A. Mazurowski et al., "Segment Anything Model for Medical Image
Analysis: an Experimental Study" (arXiv:2304.10517), code
github.com/mazurowski-lab/segment-anything-medical-evaluation (commit 2775b73),
``prompt_gen_and_exec_v2_allmode.py`` (modes) and ``prompt_gen_and_exec_v1.py``
(iterative points). What is reproduced:

* intensity: each image divided by its maximum, times 255, uint8, RGB
  (:func:`mazurowski_image`);
* masks: their reading rule (:func:`~napari_medsam_eval.io.mazurowski_masks.mazurowski_label_map`)
  on the pixels OpenCV reads (:mod:`napari_medsam_eval.datasets.prompt_mode_samples`);
* prompts: :class:`~napari_medsam_eval.protocols.MazurowskiProtocol` (bit-exact
  with their code; seed 1 reset per mask by default);
* score: IoU of candidate 0 per (image, class, mode); oracle: best candidate
  by IoU; several boxes are segmented one by one and merged by union;
* table: per task (dataset x class) the mean over images with a non-empty
  mask (empty masks are not prompted: NaN, ignored), like their Fig. 2
  (:func:`~.prompt_mode_table.study_table`).

Where things live: samples in :mod:`napari_medsam_eval.datasets.prompt_mode_samples`, IoU
in :func:`napari_medsam_eval.evaluation.metrics.compute_iou` (``empty=NOT_SCORED``),
the table in :mod:`.prompt_mode_table`, its Markdown, figures and files in
:mod:`napari_medsam_eval.report.prompt_mode_study`; this module is the runner: every image encoded once, then modes 1-5 (and iterative points)
scored by IoU.

LiteMedSAM (the default model) returns one mask per prompt and no
candidates, so its oracle equals its score (``config["single_mask_model"]``).

>>> results = run_prompt_mode_study("kvasir_seg_2d", "litemedsam", limit=5)
>>> results.summary            # task, n_images, n_empty, mode 1..5, mode k (oracle)
>>> report.prompt_mode_study.write_study(results, "out/")  # rows.csv, mode_table.csv/.md/.png, images.csv, study.json
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Hashable, Sequence

import numpy as np
import pandas as pd

from ..datasets.prompt_mode_samples import StudyClass, StudySample, study_samples, study_task_name
from ..core.errors import DataError
from ..evaluation.metrics import NOT_SCORED, compute_iou
from ..models.base import SliceProgress, SegmentationBackend, SegmentResult
from ..core.prompt import Prompt
from ..protocols import MazurowskiProtocol, iterate
from ..protocols.mazurowski import MODES
from .prompt_mode_table import study_table
from ..core.errors import InputError

#: which candidate is the non-oracle prediction
SELECT_RULES = ("first", "score", "mask")

ROW_COLUMNS = ["dataset", "image", "class", "task", "label", "mode", "iou", "iou_oracle", "n_parts",
               "mask_pixels", "pred_pixels", "empty", "n_candidates", "model_score", "decode_seconds", "prompt"]
ITERATIVE_COLUMNS = ["dataset", "image", "class", "task", "label", "n_points", "iou", "iou_oracle",
                     "pred_pixels", "carried", "stopped", "prompt"]
IMAGE_COLUMNS = ["dataset", "image", "height", "width", "n_classes", "n_prompts", "encode_seconds",
                 "decode_seconds", "seconds", "source"]


def mazurowski_image(image: np.ndarray) -> np.ndarray:
    """Their intensity rule: RGB, each image divided by its maximum, times 255, as uint8.

    ``np.uint8(image / image.max() * 255)`` (truncation, that operation order),
    as ``prompt_gen_and_exec_v2_allmode.py`` l.178-184 after PIL's
    ``convert("RGB")``. Grey images are repeated on 3 channels, an alpha
    channel is dropped. Beyond their code (uint8 PNG/JPG only): non-finite
    values become 0, and data with negative values (CT, MRI slices) are first
    shifted by their minimum. An all-zero image stays zero.
    """
    a = np.asarray(image)
    if a.ndim == 3 and a.shape[-1] == 1:
        a = a[..., 0]
    elif a.ndim == 3 and a.shape[-1] == 4:
        a = a[..., :3]
    if a.ndim == 2:
        a = np.stack([a] * 3, axis=-1)
    if a.ndim != 3 or a.shape[-1] != 3:
        raise DataError(f"a study image must be (H, W) or (H, W, 3), got shape {np.asarray(image).shape}")
    a = a.astype(np.float64)
    a[~np.isfinite(a)] = 0.0
    low = a.min()
    if low < 0:
        a = a - low
    top = a.max()
    if top <= 0:
        return np.zeros(a.shape, np.uint8)
    return np.uint8(a / top * 255)


def score_result(result: SegmentResult, gt: np.ndarray, select: str = "first") -> tuple[float, float, np.ndarray, int]:
    """``(iou, oracle iou, chosen mask, n_candidates)`` of one backend answer.

    With candidates (SAM): ``select="first"`` scores candidate 0 (their code,
    l.331), ``"score"`` the candidate the model rates highest (the paper's
    words), ``"mask"`` the backend's own ``mask``; the oracle is the best
    candidate by IoU (never below the chosen one). A single-mask model
    (LiteMedSAM) has no candidates: both scores are those of its mask. IoU is
    :func:`~napari_medsam_eval.evaluation.metrics.compute_iou` with ``empty=NOT_SCORED``:
    NaN when prediction and ground truth are both empty.
    """
    cands = result.candidates
    if cands is None or len(cands) == 0:
        value = compute_iou(result.mask, gt, empty=NOT_SCORED)
        return value, value, np.asarray(result.mask) != 0, 1
    cands = np.asarray(cands) != 0
    ious = [compute_iou(c, gt, empty=NOT_SCORED) for c in cands]
    if select == "mask":
        chosen = np.asarray(result.mask) != 0
    elif select == "score" and result.candidate_scores is not None:
        chosen = cands[int(np.argmax(np.asarray(result.candidate_scores)))]
    else:
        chosen = cands[0]
    value = compute_iou(chosen, gt, empty=NOT_SCORED)
    return value, float(max([value, *ious])), chosen, len(cands)


@dataclass
class StudyResults:
    """What :func:`run_prompt_mode_study` returns.

    ``rows``: one row per (image, class, mode) (``ROW_COLUMNS``; ``iou`` NaN for
    an empty class mask, ``empty`` True). ``iterative``: one row per (image,
    class, number of points) when iterative points were run (else empty).
    ``images``: one row per image with its timings. ``summary``: the Fig. 2
    table (:func:`~napari_medsam_eval.studies.prompt_mode_table.study_table`). ``config``: the run's settings and the
    backend's :meth:`describe`; ``timings``: totals in seconds; ``skipped``:
    images left out and why.
    """

    rows: pd.DataFrame
    iterative: pd.DataFrame
    images: pd.DataFrame
    summary: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    skipped: list[dict] = field(default_factory=list)

    def mode_table(self, oracle: bool = False) -> pd.DataFrame:
        """Tasks x modes mean IoU (the oracle variant with ``oracle=True``), tasks as index."""
        cols = [f"mode {m}" + (" (oracle)" if oracle else "") for m in self.config.get("modes", MODES)]
        table = self.summary.set_index("task")
        return table[[c for c in cols if c in table.columns]]


def run_prompt_mode_study(
    dataset: Any,
    backend: SegmentationBackend | str = "litemedsam",
    modes: Sequence[int] = MODES,
    oracle: bool = True,
    iterative_points: int = 0,
    limit: int | None = None,
    progress: SliceProgress | None = None,
    *,
    seed: int = 1,
    seeding: str = "per-mask",
    dt_backend: str = "opencv-c",
    select: str = "first",
    volume_slices: str = "middle",
    **sample_options: Any,
) -> StudyResults:
    """Mazurowski et al. 2023's prompt-mode study (modes 1-5, optional iterative points) on 2D images.

    ``dataset``: a 2D folder (``images/`` + ``masks/``, plain or SAM-Med2D
    layout), a volume folder (MSD; its middle slices, or all labelled ones
    with ``volume_slices="all"``), a list of those, or :class:`StudySample`
    objects (see :mod:`napari_medsam_eval.datasets.prompt_mode_samples`); ``limit`` takes the first images per folder.
    ``backend``: a built backend or a name for
    :func:`~napari_medsam_eval.models.build_backend`.

    Per image: intensity rule (:func:`mazurowski_image`), one encoder pass
    (every prompt is sent with ``cache_key=("prompt-study", dataset, image)``),
    then per class and mode the Mazurowski prompt (bit-exact with their code;
    ``seed``/``seeding``/``dt_backend`` as :class:`MazurowskiProtocol`) and the
    IoU of the prediction (:func:`score_result`: candidate 0 by default, oracle
    = best candidate; a single-mask model's oracle equals its score). Several
    boxes (modes 2/4 with several parts) go in one Prompt, the backend segments
    each and merges by union. An empty class mask is not prompted: NaN.

    ``iterative_points=N`` also runs Algorithm 1 for N points per class (its
    next point from the chosen candidate), scoring each step 1..N; a run that
    stops early (prediction equals the ground truth) carries its last
    prediction forward (``carried``).

    ``progress(done, total)`` is called after each image; False cancels (the
    results then hold the images done, ``config["cancelled"] = True``).
    ``sample_options`` go to the 2D reader (``class_names``, ``binary``, ``instances``).
    """
    if select not in SELECT_RULES:
        raise InputError(f"select must be one of {SELECT_RULES}, got {select!r}")
    if int(iterative_points) != iterative_points or iterative_points < 0:
        raise InputError(f"iterative_points must be an integer >= 0, got {iterative_points!r}")
    if limit is not None and limit < 1:
        raise InputError(f"limit must be >= 1, got {limit!r}")
    if isinstance(backend, str):
        from ..models import build_backend

        backend = build_backend(backend)
    protocol = MazurowskiProtocol(seed=seed, modes=tuple(modes), seeding=seeding, dt_backend=dt_backend)
    skipped: list[dict] = []
    samples = study_samples(dataset, limit=limit, volume_slices=volume_slices, skipped=skipped, **sample_options)
    rows: list[dict] = []
    it_rows: list[dict] = []
    images: list[dict] = []
    seen_classes: dict[str, dict[str, int]] = {}
    cancelled = False
    start = time.perf_counter()
    for done, sample in enumerate(samples, start=1):
        t0 = time.perf_counter()
        try:
            raw, classes = sample.load()
            image = mazurowski_image(raw)
        except DataError as error:
            skipped.append({"dataset": sample.dataset, "image": sample.image_id, "reason": str(error)})
            classes = None
        if classes is not None:
            timing = {"encoder": 0.0, "decoder": 0.0, "n": 0}
            key: Hashable = ("prompt-study", sample.dataset, sample.image_id)
            for cls in classes:
                seen_classes.setdefault(sample.dataset, {}).setdefault(cls.name, cls.label)
                rows.extend(_score_modes(backend, protocol, image, cls, sample, key, select, timing))
                if iterative_points:
                    it_rows.extend(_score_iterative(backend, image, cls, sample, key, select, int(iterative_points),
                                                    seed, dt_backend, timing))
            images.append({"dataset": sample.dataset, "image": sample.image_id, "height": image.shape[0],
                           "width": image.shape[1], "n_classes": len(classes), "n_prompts": timing["n"],
                           "encode_seconds": timing["encoder"], "decode_seconds": timing["decoder"],
                           "seconds": time.perf_counter() - t0, "source": sample.source})
        if progress is not None and progress(done, len(samples)) is False:
            cancelled = True
            break
    _fill_absent_classes(rows, it_rows, images, seen_classes, protocol.modes, int(iterative_points))
    class_rank = {(d, c): n for d, names in seen_classes.items() for n, c in enumerate(names)}
    rows_df = _ordered(pd.DataFrame(rows, columns=ROW_COLUMNS), images, class_rank, "mode")
    it_df = _ordered(pd.DataFrame(it_rows, columns=ITERATIVE_COLUMNS), images, class_rank, "n_points")
    images_df = pd.DataFrame(images, columns=IMAGE_COLUMNS)
    total = time.perf_counter() - start
    config = {
        "study": "Mazurowski et al. 2023 prompt modes (arXiv:2304.10517)",
        "modes": list(protocol.modes), "oracle": bool(oracle), "iterative_points": int(iterative_points),
        "limit": limit, "seed": seed, "seeding": seeding, "dt_backend": dt_backend, "select": select,
        "volume_slices": volume_slices, "intensity": "image / image.max() * 255 as uint8, RGB",
        "datasets": sorted({s.dataset for s in samples}), "n_samples": len(samples), "cancelled": cancelled,
        "backend": backend.describe(),
        "single_mask_model": bool(len(rows_df) and rows_df["n_candidates"].fillna(1).max() <= 1),
    }
    timings = {
        "total_seconds": total,
        "encode_seconds": float(images_df["encode_seconds"].sum()),
        "decode_seconds": float(images_df["decode_seconds"].sum()),
        "n_images": int(len(images_df)),
        "n_prompts": int(images_df["n_prompts"].sum()),
        "seconds_per_image": total / len(images_df) if len(images_df) else float("nan"),
    }
    for attr in ("encoder_calls", "cache_hits"):
        if hasattr(backend, attr):
            timings[attr] = getattr(backend, attr)
    return StudyResults(rows_df, it_df, images_df, study_table(rows_df, it_df, oracle), config, timings, skipped)


def _segment(backend, image, prompt: Prompt, key, timing) -> SegmentResult:
    result = backend.segment(image, prompt, cache_key=key)
    timing["encoder"] += float(result.timings.get("encoder", 0.0))
    timing["decoder"] += float(result.timings.get("decoder", 0.0))
    timing["n"] += 1
    return result


def _base_row(sample: StudySample, cls: StudyClass) -> dict:
    return {"dataset": sample.dataset, "image": sample.image_id, "class": cls.name,
            "task": study_task_name(sample.dataset, cls.name), "label": cls.label}


def _score_modes(backend, protocol, image, cls: StudyClass, sample, key, select, timing) -> list[dict]:
    gt = np.asarray(cls.mask) != 0
    out = []
    for prompt in protocol.prompts_for_mask(gt, cls.label):
        row = {**_base_row(sample, cls), "mode": int(prompt.info["mode"]), "mask_pixels": int(gt.sum()),
               "n_parts": int(prompt.info.get("n_parts", 0)), "prompt": prompt.to_json()}
        if prompt.is_empty:
            row.update(iou=np.nan, iou_oracle=np.nan, pred_pixels=0, empty=True, n_candidates=0, model_score=np.nan,
                       decode_seconds=0.0)
        else:
            result = _segment(backend, image, prompt, key, timing)
            value, best, chosen, n = score_result(result, gt, select)
            row.update(iou=value, iou_oracle=best, pred_pixels=int(np.count_nonzero(chosen)), empty=False,
                       n_candidates=n, model_score=np.nan if result.score is None else float(result.score),
                       decode_seconds=float(result.timings.get("decoder", 0.0)))
        out.append(row)
    return out


def _score_iterative(backend, image, cls: StudyClass, sample, key, select, n_points, seed, dt_backend,
                     timing) -> list[dict]:
    gt = np.asarray(cls.mask) != 0
    scores: list[tuple[float, float, int]] = []

    def backend_fn(points: np.ndarray, labels: np.ndarray) -> np.ndarray:
        prompt = Prompt(cls.label, points=points.tolist(), point_labels=labels.tolist(), protocol="iterative-points")
        value, best, chosen, _ = score_result(_segment(backend, image, prompt, key, timing), gt, select)
        scores.append((value, best, int(np.count_nonzero(chosen))))
        return chosen

    base = _base_row(sample, cls)
    if not gt.any():
        return [{**base, "n_points": k, "iou": np.nan, "iou_oracle": np.nan, "pred_pixels": 0, "carried": False,
                 "stopped": "empty ground truth", "prompt": ""} for k in range(1, n_points + 1)]
    run = iterate(backend_fn, gt, n_points, seed, dt_backend=dt_backend, target_label=cls.label)
    out = []
    for k in range(1, n_points + 1):
        step = min(k, len(run)) - 1
        out.append({**base, "n_points": k, "iou": scores[step][0], "iou_oracle": scores[step][1],
                    "pred_pixels": scores[step][2],
                    "carried": k > len(run), "stopped": run.stopped, "prompt": run[step].prompt.to_json()})
    return out


def _ordered(table: pd.DataFrame, images: list[dict], class_rank: dict, last: str) -> pd.DataFrame:
    """Rows in image order (as run), then classes in order of first appearance, then ``last``."""
    if table.empty:
        return table
    rank = {(i["dataset"], i["image"]): n for n, i in enumerate(images)}
    keys = list(zip(table["dataset"], table["image"], table["class"]))
    table = table.assign(_image=[rank.get(k[:2], -1) for k in keys],
                         _class=[class_rank.get((k[0], k[2]), -1) for k in keys])
    table = table.sort_values(["_image", "_class", last], kind="stable")
    return table.drop(columns=["_image", "_class"]).reset_index(drop=True)


def _fill_absent_classes(rows, it_rows, images, seen: dict[str, dict[str, int]], modes, n_points) -> None:
    """NaN rows for a dataset's classes an image does not have (multi-class label maps)."""
    have = {(r["dataset"], r["image"], r["class"]) for r in rows}
    for info in images:
        for name, label in seen.get(info["dataset"], {}).items():
            if (info["dataset"], info["image"], name) in have:
                continue
            base = {"dataset": info["dataset"], "image": info["image"], "class": name,
                    "task": study_task_name(info["dataset"], name), "label": label}
            for mode in modes:
                rows.append({**base, "mode": mode, "iou": np.nan, "iou_oracle": np.nan, "n_parts": 0,
                             "mask_pixels": 0, "pred_pixels": 0, "empty": True, "n_candidates": 0,
                             "model_score": np.nan, "decode_seconds": 0.0, "prompt": ""})
            for k in range(1, n_points + 1):
                it_rows.append({**base, "n_points": k, "iou": np.nan, "iou_oracle": np.nan, "pred_pixels": 0,
                                "carried": False,
                                "stopped": "class absent", "prompt": ""})
