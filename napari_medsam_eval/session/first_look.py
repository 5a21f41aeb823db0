"""A quick first look: the session's model at a cheaper precision, used until the model itself has caught up.

Encoding ahead (:mod:`.encode_ahead`) with a first look set first embeds every slice with the
*first-look* backend (the same model at a cheaper precision, e.g. LiteMedSAM bf16 or int8), then every
slice with the session's own backend. :class:`FirstLook` keeps that backend and, per image and backend,
which slices encoding ahead has finished; :func:`choose_backend` decides which backend segments:

1. the session's backend when no first look is set, or once encoding ahead has finished every slice of
   the image with it (the reference is ready: it segments at decoder speed);
2. else the first look once encoding ahead has finished every slice of the image with *it* (the quick
   first look);
3. else the session's backend (nothing is gained by the first look yet).

Every result says what made it (:func:`~napari_medsam_eval.models.base.made_by`, with
``" (first look)"`` for the first look). No Qt, no napari; the session drops the first look when its
backend or its image changes (its anchors only with the backend: each image keeps its own).
"""
from __future__ import annotations

import threading
from typing import Any, Hashable

from ..models.base import SegmentationBackend, made_by

#: what a first look's ``made_by`` ends with
FIRST_LOOK = "(first look)"


def choose_backend(main: Any, first_look: Any, main_complete: bool, first_look_complete: bool) -> tuple[Any, bool]:
    """``(backend, is_first_look)``: the backend that segments now, by the rule of the module doc."""
    if first_look is None or main_complete or not first_look_complete:
        return main, False
    return first_look, True


class FirstLook:
    """The first-look backend of one session and the slices encoding ahead finished, per image and backend."""

    def __init__(self) -> None:
        self.backend: SegmentationBackend | None = None
        self._encoded: dict[tuple[Hashable, int], tuple[Any, set[int]]] = {}
        self._lock = threading.Lock()  # the encode-ahead worker marks while a segmenting worker asks

    def set(self, backend: SegmentationBackend | None) -> None:
        """Use ``backend`` as the first look (None: none); another backend forgets its finished slices."""
        if backend is not self.backend:
            with self._lock:
                self._encoded = {k: v for k, v in self._encoded.items() if v[0] is not self.backend}
            self.backend = backend

    def drop(self) -> None:
        """No first look, and nothing encoded ahead (the session's backend or image changed)."""
        self.backend = None
        with self._lock:
            self._encoded = {}

    def mark(self, image_id: Hashable, backend: Any, index: int) -> None:
        """Encoding ahead finished slice ``index`` of ``image_id`` with ``backend``."""
        with self._lock:
            self._encoded.setdefault((image_id, id(backend)), (backend, set()))[1].add(int(index))

    def encoded(self, image_id: Hashable, backend: Any) -> set[int]:
        """The slices of ``image_id`` that encoding ahead finished with ``backend``."""
        with self._lock:
            entry = self._encoded.get((image_id, id(backend)))
            return set() if entry is None or entry[0] is not backend else set(entry[1])

    def complete(self, image_id: Hashable, backend: Any, n_slices: int) -> bool:
        """Whether encoding ahead finished every slice of ``image_id`` (``n_slices`` of them) with ``backend``."""
        return backend is not None and len(self.encoded(image_id, backend)) >= n_slices

    def choose(self, main: Any, image_id: Hashable, n_slices: int) -> tuple[Any, str]:
        """The backend that segments ``image_id`` now (:func:`choose_backend`) and its :meth:`made_by` words."""
        backend, _first = choose_backend(main, self.backend, self.complete(image_id, main, n_slices),
                                         self.complete(image_id, self.backend, n_slices))
        return backend, self.made_by(backend)

    def made_by(self, backend: Any) -> str:
        """:func:`~napari_medsam_eval.models.base.made_by` words, ending ``(first look)`` for the first look."""
        first = backend is not None and backend is self.backend
        return made_by(backend) + (f" {FIRST_LOOK}" if first else "")

    def owners(self, main: Any) -> tuple[Any, Any]:
        """The backends whose anchors a session keeps: its own (``main``) and the first look (or None)."""
        return main, self.backend


__all__ = ["FIRST_LOOK", "FirstLook", "choose_backend"]
