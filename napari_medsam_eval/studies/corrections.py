"""The corrections protocol's simulated user at work: propagate the first prompt, then correct the worst
slice ``interactions`` times (:mod:`napari_medsam_eval.protocols.corrections` says which slice and which
correction), scoring the case after each step. It runs the model, so it sits above the segmentation rooms."""
from __future__ import annotations

from typing import Any, Hashable

import numpy as np

from ..core.errors import Cancelled
from ..models.base import SegmentationBackend
from ..core.progress import SliceProgress
from ..core.prompt import Prompt
from ..propagation.anchors import AnchoredSegmentation
from ..protocols.corrections import CorrectionsProtocol, Scorer, correction, correction_type, worst_slice


def run_corrections(backend: SegmentationBackend, image: np.ndarray, kind: str, truth: np.ndarray,
                    first: Prompt, protocol: CorrectionsProtocol, score: Scorer, *, rules: Any = None,
                    case_id: Hashable = None, progress: SliceProgress | None = None
                    ) -> tuple[np.ndarray, list[dict[str, float]], list[Prompt]]:
    """The simulated user on one target: the final mask, the scores after 0..K interactions
    and the anchors in slice order. ``progress`` sees the slices of every pass; its False
    stops the current pass after its slice and raises :class:`~napari_medsam_eval.core.errors.Cancelled`."""
    def passed(result: Any) -> None:
        if result.cancelled:
            raise Cancelled(result.mask, result.done, result.total)

    truth = np.asarray(truth, bool)
    session = AnchoredSegmentation(backend, image, kind, rules=rules, case_id=case_id)
    passed(session.propagate(first, progress))
    for anchor in protocol.extent_anchors(first, session.n_slices):  # a protocol that gives the z-extent
        passed(session.correct(anchor, progress))
    scores = [score(session.mask)]
    start = int(first.slice_index) if kind == "video" else 0
    rng = np.random.default_rng(protocol.seed)
    how = correction_type(protocol.correction, backend)
    for _ in range(protocol.interactions):
        if protocol.clicks_in_3d:  # the protocol places its own click (cvpr25-interactive)
            fix = protocol.next_correction(session.mask, truth, session.anchors, int(first.target_label))
            if fix is None:
                scores.append(scores[-1])
                continue
            passed(session.correct(fix, progress))
            scores.append(score(session.mask))
            continue
        # a box-corrected model has had the best box a user can draw on an anchored slice: look elsewhere
        k = worst_slice(session.mask, truth, start, skip=session.anchors if how == "box" else ())
        if k is None:
            scores.append(scores[-1])
            continue
        fix = correction(session.mask, truth, k, how, int(first.target_label), session.anchors.get(k),
                         rng, protocol.dt_backend)
        passed(session.correct(fix, progress))
        scores.append(score(session.mask))
    return session.mask, scores, session.anchor_list()


__all__ = ["run_corrections"]
