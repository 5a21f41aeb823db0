"""Segmenting a prompt as the user did, from a snapshot of a session (its backend, prepared image, kind,
cache id and lock): the prompt log segments the protocol's prompt beside the drawn one with it."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Hashable

import numpy as np

from ..core.prompt import Prompt
from ..propagation import segment_by_kind


@dataclass(frozen=True)
class SessionSegmenter:
    """What segmenting a prompt like the user did needs: a snapshot of a session's backend and image."""

    backend: Any
    volume: np.ndarray
    kind: str
    case_id: Hashable
    lock: Any = None

    @classmethod
    def of(cls, session: Any) -> "SessionSegmenter":
        """The session's current backend, prepared image, kind, cache id and lock."""
        return cls(session.backend, session.volume, session.kind, session.image_id, session.lock)

    def mask(self, prompt: Prompt, operation: str, options: dict[str, Any] | None = None) -> np.ndarray:
        """The whole-case bool mask of ``prompt``: ``slice`` segments its slice alone (zeros elsewhere),
        ``propagate`` propagates with ``options`` (``margin``, ``z_limits``, ``rules``) as the Segment
        widget does; the slices' embeddings come from the backend's cache (key ``(case_id, z)``)."""
        how = "slice" if operation == "slice" else "propagate"
        lock = self.lock if self.lock is not None else threading.RLock()
        with lock:
            result = segment_by_kind(self.backend, self.volume, self.kind, prompt, how=how, case_id=self.case_id,
                                     **(dict(options or {}) if how == "propagate" else {}))
        return np.asarray(result.mask, dtype=bool)


__all__ = ["SessionSegmenter"]
