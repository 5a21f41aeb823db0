"""Every segmentation attempt of an interactive session, for undo and "what changed".

An *attempt* is one press of Segment slice, Propagate or Correct slice that
changed an object's mask: which object (target label) of which image, the
prompt, the model, the object's whole mask after it, when and how long it
took. :class:`AttemptHistory` keeps them in order; :meth:`AttemptHistory.undo`
drops the last attempt (of an image: each image has its own undo) and returns the
object's mask before it (the previous attempt's mask of the same object and image,
or an empty one), so a GUI can put that mask back. Masks are kept bit-packed (a 512x512x100 volume: 3.3 MB).

No Qt and no napari: the Segment widget records and undoes through this
module, and a script can do the same.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from ..core.errors import InputError

#: how many attempts a history keeps (the oldest are dropped first)
MAX_ATTEMPTS = 100
#: values of :func:`mask_changes`: pixels the later attempt added / removed
ADDED, REMOVED = 1, 2


@dataclass(eq=False)
class Attempt:
    """One segmentation attempt: the object's whole mask after it, and how it was made.

    Attempts compare by identity (``eq=False``): two attempts with the same box and mask are still
    two attempts, and a generated ``__eq__`` would compare the packed masks by array truth.
    """

    image: str
    target_label: int
    action: str
    model: str | None
    prompt: dict[str, Any]
    shape: tuple[int, ...]
    packed: np.ndarray = field(repr=False)
    seconds: float = 0.0
    when: float = field(default_factory=time.time)

    @classmethod
    def of(cls, image: str, target_label: int, mask: np.ndarray, *, action: str, model: str | None = None,
           prompt: dict[str, Any] | None = None, seconds: float = 0.0) -> "Attempt":
        mask = np.asarray(mask, dtype=bool)
        return cls(image=str(image), target_label=int(target_label), action=action, model=model,
                   prompt=dict(prompt or {}), shape=mask.shape, packed=np.packbits(mask, axis=None),
                   seconds=float(seconds))

    @property
    def mask(self) -> np.ndarray:
        """The object's whole mask after this attempt (bool, a new array)."""
        size = int(np.prod(self.shape))
        return np.unpackbits(self.packed, count=size).astype(bool).reshape(self.shape)

    def describe(self) -> str:
        """One line: action, object, model, size, time."""
        voxels = int(np.unpackbits(self.packed).sum())
        return (f"{self.action} label {self.target_label} with {self.model or 'a model'}: "
                f"{voxels} pixels in {self.seconds:.1f} s")


class AttemptHistory:
    """The attempts of a session in order; undo goes back one attempt of any object (of one image)."""

    def __init__(self, limit: int = MAX_ATTEMPTS) -> None:
        self.limit = int(limit)
        self.attempts: list[Attempt] = []

    def __len__(self) -> int:
        return len(self.attempts)

    def record(self, attempt: Attempt) -> Attempt:
        """Keep ``attempt`` (the oldest attempt goes when the history is full)."""
        self.attempts.append(attempt)
        del self.attempts[:-self.limit]
        return attempt

    def last(self, image: str | None = None, target_label: int | None = None, before: int | None = None
             ) -> Attempt | None:
        """The latest attempt (of ``image`` / ``target_label`` when given), among the first ``before``."""
        for attempt in reversed(self.attempts[:before]):
            if image is not None and attempt.image != image:
                continue
            if target_label is not None and attempt.target_label != int(target_label):
                continue
            return attempt
        return None

    def previous_mask(self, attempt: Attempt) -> np.ndarray:
        """The object's mask before ``attempt``: its previous attempt's, else empty."""
        index = next(i for i, kept in enumerate(self.attempts) if kept is attempt)
        earlier = self.last(attempt.image, attempt.target_label, before=index)
        return earlier.mask if earlier is not None else np.zeros(attempt.shape, dtype=bool)

    def undo(self, image: str | None = None) -> tuple[Attempt, np.ndarray] | None:
        """Drop the last attempt (of ``image`` when given: the other images' stay); returns it and the
        object's mask before it (None: nothing to undo)."""
        attempt = self.last(image)
        if attempt is None:
            return None
        before = self.previous_mask(attempt)
        self.attempts = [kept for kept in self.attempts if kept is not attempt]
        return attempt, before

    def changes(self, image: str, target_label: int) -> np.ndarray | None:
        """What the object's last attempt changed (:func:`mask_changes`); None without an attempt."""
        attempt = self.last(image, target_label)
        if attempt is None:
            return None
        return mask_changes(self.previous_mask(attempt), attempt.mask)


def mask_changes(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """``ADDED`` where ``after`` has a pixel ``before`` had not, ``REMOVED`` for the reverse, else 0."""
    before, after = np.asarray(before, dtype=bool), np.asarray(after, dtype=bool)
    if before.shape != after.shape:
        raise InputError(f"masks of different shapes: {before.shape} vs {after.shape}")
    changes = np.zeros(after.shape, dtype=np.uint8)
    changes[after & ~before] = ADDED
    changes[before & ~after] = REMOVED
    return changes


__all__ = ["ADDED", "Attempt", "AttemptHistory", "MAX_ATTEMPTS", "REMOVED", "mask_changes"]
