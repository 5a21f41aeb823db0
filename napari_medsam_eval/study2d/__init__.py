"""The 2D prompt-mode study of Mazurowski et al. 2023, as a runner (no Qt, no napari).

Source: M. A. Mazurowski et al., "Segment Anything Model for Medical Image
Analysis: an Experimental Study" (arXiv:2304.10517), code
github.com/mazurowski-lab/segment-anything-medical-evaluation (commit 2775b73),
``prompt_gen_and_exec_v2_allmode.py`` (modes) and ``prompt_gen_and_exec_v1.py``
(iterative points). What is reproduced:

* intensity: each image divided by its maximum, times 255, uint8, RGB
  (:func:`~.runner.mazurowski_image`);
* masks: their reading rule (:func:`~napari_medsam_eval.io.mazurowski_masks.mazurowski_label_map`)
  on the pixels OpenCV reads (:mod:`napari_medsam_eval.datasets.study2d`);
* prompts: :class:`~napari_medsam_eval.protocols.MazurowskiProtocol` (bit-exact
  with their code; seed 1 reset per mask by default);
* score: IoU of candidate 0 per (image, class, mode); oracle: best candidate
  by IoU; several boxes are segmented one by one and merged by union;
* table: per task (dataset x class) the mean over images with a non-empty
  mask (empty masks are not prompted: NaN, ignored), like their Fig. 2
  (:func:`.table.study_table`).

Where things live: samples in :mod:`napari_medsam_eval.datasets.study2d`, IoU
in :func:`napari_medsam_eval.evaluation.metrics.compute_iou` (``empty=NOT_SCORED``),
the table in :mod:`.table`, its Markdown, figures and files in
:mod:`napari_medsam_eval.report.study2d`; this package is the runner
(:mod:`.runner`). The names below are re-exported for the CLI and the widgets.

LiteMedSAM (the default model) returns one mask per prompt and no
candidates, so its oracle equals its score (``config["single_mask_model"]``).

>>> results = run_prompt_mode_study("kvasir_seg_2d", "litemedsam", limit=5)
>>> results.summary            # task, n_images, n_empty, mode 1..5, mode k (oracle)
>>> report.study2d.write_study(results, "out/")  # rows.csv, mode_table.csv/.md/.png, images.csv, study.json
"""
from __future__ import annotations

from ..datasets.study2d import StudySample, study_samples
from .runner import SELECT_RULES, StudyResults, mazurowski_image, run_prompt_mode_study, score_result

__all__ = [
    "SELECT_RULES",
    "StudyResults",
    "StudySample",
    "mazurowski_image",
    "run_prompt_mode_study",
    "score_result",
    "study_samples",
]
