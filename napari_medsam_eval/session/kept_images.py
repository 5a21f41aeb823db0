"""The images a session was on before: each keeps its anchors and cache id while another is used.

A GUI switches a session between images (the Segment widget's image choice). Nothing of the image
left may be lost: when it is chosen again its anchored segmentations (each object's anchors and
mask, :class:`.target_anchors.TargetAnchors`) and its ``image_id`` (the backend's slice-cache key)
come back, so a correction there goes on from its propagation. :class:`KeptImages` keeps them by
the name the image was set with (``set_image``'s ``image_id``); an image comes back only when it is
the same array (by identity) prepared the same way (kind, modality, window): another array under the
same name starts over. The prepared volume is kept only while the image has anchors (they hold it
anyway); without any it is prepared again, with the same ``image_id``. No Qt, no napari.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .target_anchors import TargetAnchors


@dataclass(eq=False)
class KeptImage:
    """One image a session left: the array it was given, how it was prepared, its cache id and anchors."""

    raw: Any = field(repr=False)
    key: tuple
    kind: str
    image_id: str
    targets: TargetAnchors = field(repr=False)
    #: the prepared image, kept while it has anchors (None: prepare it again)
    volume: np.ndarray | None = field(default=None, repr=False)

    def matches(self, raw: Any, key: tuple) -> bool:
        """Whether ``raw`` prepared as ``key`` is this image (the same array object, prepared alike)."""
        return self.raw is raw and self.key == key


class KeptImages:
    """The images a session left, by name; :meth:`take` gives one back when it is chosen again."""

    def __init__(self) -> None:
        self._by_name: dict[str, KeptImage] = {}

    def __contains__(self, name: object) -> bool:
        return str(name) in self._by_name

    def keep(self, name: str, image: KeptImage) -> None:
        """Keep ``image`` under ``name`` (its volume only when it has anchors)."""
        if not len(image.targets):
            image.volume = None
        self._by_name[str(name)] = image

    def take(self, name: str, raw: Any, key: tuple) -> KeptImage | None:
        """The image kept under ``name`` when ``raw`` prepared as ``key`` is it (it is no longer kept);
        None when there is none, or another array has that name now (the old one is forgotten)."""
        kept = self._by_name.pop(str(name), None)
        return kept if kept is not None and kept.matches(raw, key) else None

    def get(self, name: str) -> KeptImage | None:
        """The image kept under ``name``, still kept (None: none)."""
        return self._by_name.get(str(name))

    def forget(self, name: str | None = None) -> None:
        """Forget the image kept under ``name`` (None: all of them), e.g. its layer was closed."""
        if name is None:
            self._by_name = {}
        else:
            self._by_name.pop(str(name), None)

    def drop_anchors(self) -> None:
        """Every kept image's anchors go (another backend made nothing of them); their volumes with them."""
        for kept in self._by_name.values():
            kept.targets.drop()
            kept.volume = None


__all__ = ["KeptImage", "KeptImages"]
