"""Encoding a volume's slices ahead of the prompts, nearest to the slice on screen first.

On a CPU the image encoder is most of a slice's cost. While a user looks at a
volume and draws a prompt, a background job can embed its slices so that
segmenting and propagating later are the decoder alone.
:func:`iter_encode_ahead` does that for a :class:`~napari_medsam_eval.session.session.Session`
(a napari ``thread_worker`` generator: it yields ``(done, total)`` after every
slice and stops at the next slice once ``cancel`` is set). Each slice is
encoded under the session's model lock and its propagation cache key, so a
segmentation asked for meanwhile waits at most one slice and then finds every
slice already encoded in the backend's cache (and in the embedding store when
the backend uses one). Backends without a per-slice cache (SAM2/MedSAM2)
encode nothing (:meth:`SegmentationBackend.encode` answers False).

No Qt and no napari: the Segment widget runs it in a worker, a script can
iterate it.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Generator

if TYPE_CHECKING:
    from .session import Session


def nearest_first(n: int, current: int | None) -> list[int]:
    """Slice indices ``0..n-1`` by distance to ``current`` (ties: the next slice before the previous)."""
    if n <= 0:
        return []
    centre = min(max(0 if current is None else int(current), 0), n - 1)
    order = [centre]
    for step in range(1, n):
        order += [z for z in (centre + step, centre - step) if 0 <= z < n]
    return order


def iter_encode_ahead(session: "Session", current: int | None = None, *, cancel: threading.Event | None = None
                      ) -> Generator[tuple[int, int], None, int]:
    """Encode the session's image slice by slice, nearest to ``current`` first; yields ``(done, total)``.

    With a first look set (:meth:`Session.set_first_look`, :mod:`.first_look`) every slice is encoded
    with it first, then with the session's backend: ``total`` counts both passes. Each finished slice
    is marked in ``session.first_look`` (per image and backend), which decides what segments.
    Returns how many slices were encoded (fewer when cancelled, 0 for a model without a per-slice
    cache). Slices the backend already holds cost a cache look-up.
    """
    token = cancel if cancel is not None else threading.Event()
    if session.backend is None:
        raise RuntimeError("no model loaded: load one first")
    with session.lock:
        session.slice_image(0)  # prepares an image named by use_image
    passes = [b for b in (session.first_look.backend, session.backend) if b is not None]
    order = nearest_first(session.n_slices, current)
    total, done = len(order) * len(passes), 0
    for backend in passes:
        for z in order:
            if token.is_set():
                return done
            with session.lock:  # one model call at a time: a segmentation waits one slice at most
                image = session.slice_image(z)  # (a 2D image is its one slice)
                if not backend.encode(image, session.cache_key(z)):
                    return 0
                session.first_look.mark(session.image_id, backend, z)
            done += 1
            yield done, total
    return done


__all__ = ["iter_encode_ahead", "nearest_first"]
