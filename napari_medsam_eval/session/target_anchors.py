"""Each object's corrections in a session: one anchored segmentation per target label.

A complete propagation of a volume or video starts an
:class:`~napari_medsam_eval.propagation.anchors.AnchoredSegmentation` whose only anchor is its
prompt; a correction adds a prompt on a wrong slice to it. :class:`TargetAnchors` keeps one per
target label (several objects on one image) and answers only for the backend and image it was
made with: after a model change there is nothing to correct, and the next correction propagates.
Each image has its own (a session keeps those of the images it left, :mod:`.kept_images`).
No Qt, no napari.
"""
from __future__ import annotations

import threading
from typing import Any, Hashable

import numpy as np

from ..core.errors import Cancelled
from ..core.progress import SliceProgress
from ..core.prompt import Prompt
from ..propagation import PropagationResult
from ..propagation.anchors import AnchoredSegmentation, AnchorSnapshot
from ..propagation.rules import PropagationRules


class TargetAnchors:
    """The anchored segmentations of one session, by target label, and the latest target's label."""

    def __init__(self) -> None:
        self._by_target: dict[int, AnchoredSegmentation] = {}
        self.latest: int | None = None
        #: each target's ground truth (a bool mask of the image), where a prompt was made from it: a
        #: correction then says what it did to the DSC (:class:`~..propagation.anchors.CorrectionResult`)
        self.truths: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        """How many targets have an anchored segmentation."""
        return len(self._by_target)

    def start(self, backend: Any, volume: np.ndarray, kind: str, case_id: Hashable, prompt: Prompt,
              result: PropagationResult, rules: PropagationRules) -> None:
        """A new anchored segmentation of ``result``: ``prompt`` its only anchor, ``result.mask`` its mask.

        Seeded with the result rather than running ``AnchoredSegmentation.propagate``, so that a
        propagation is exactly what it was (that one skips the prompt's largest-component step);
        ``rules`` are the ones the run resolved, so corrections propagate with the same margin.
        """
        target = int(prompt.target_label)
        self._by_target[target] = AnchoredSegmentation(
            backend, volume, kind, rules=rules, case_id=case_id, anchors={int(prompt.slice_index): prompt},
            mask=np.asarray(result.mask, dtype=bool).copy(), last=result)
        self.latest = target

    def current(self, backend: Any, case_id: Hashable, target_label: int | None = None) -> AnchoredSegmentation | None:
        """``target_label``'s (default: the latest target's) anchored segmentation when it belongs to
        ``backend`` (or one of a tuple of backends: a session's own and its first look) and the image ``case_id``."""
        target = self.latest if target_label is None else int(target_label)
        anchored = self._by_target.get(target) if target is not None else None
        if anchored is None or not _owned(anchored.backend, backend) or anchored.case_id != case_id:
            return None
        return anchored

    def restore(self, backend: Any, case_id: Hashable, target_label: int, snapshot: AnchorSnapshot | None,
                lock: threading.RLock) -> None:
        """Put ``target_label``'s anchors back as ``snapshot`` holds them; None, or a snapshot of another
        image or backend, drops them."""
        owner = None if snapshot is None else snapshot.owner
        if owner is None or not _owned(owner.backend, backend) or owner.case_id != case_id:
            self.drop(target_label)
            return
        with lock:
            owner.restore(snapshot)
            self._by_target[int(target_label)] = owner
            self.latest = int(target_label)

    def drop(self, target_label: int | None = None) -> None:
        """Forget ``target_label``'s anchored segmentation (None: every target's)."""
        if target_label is None:
            self._by_target = {}
        else:
            self._by_target.pop(int(target_label), None)

    def correct(self, anchored: AnchoredSegmentation, prompt: Prompt, progress: SliceProgress | None,
                truth: np.ndarray | None = None) -> PropagationResult:
        """``anchored.correct(prompt)``; its anchors as they were when the run is cancelled or fails.
        ``truth`` (default: the target's in :attr:`truths`) makes the result say what it did to the DSC.

        ``AnchoredSegmentation.correct`` keeps its mask on a cancelled run but has already
        stored the new anchor, and a model with memory raises :class:`Cancelled` from it.
        """
        anchors, last = dict(anchored.anchors), anchored.last
        try:
            if truth is None:
                truth = self.truths.get(int(prompt.target_label))
            result = anchored.correct(prompt, progress, truth)
        except Cancelled as stop:
            result = PropagationResult(anchored.mask.copy(), prompt, cancelled=True, done=stop.done, total=stop.total)
        except BaseException:
            anchored.anchors, anchored.last = anchors, last
            raise
        if result.cancelled:
            anchored.anchors, anchored.last = anchors, last
        self.latest = int(prompt.target_label)
        return result


def _owned(backend: Any, owners: Any) -> bool:
    """Whether ``backend`` is ``owners`` or one of them (a tuple), by identity."""
    return any(backend is owner for owner in (owners if isinstance(owners, tuple) else (owners,)) if owner is not None)
