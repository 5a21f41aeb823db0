"""A session's objects: each one's ground-truth prompt and its anchors, image by image. No Qt, no napari.

An *object* of an interactive session is numbered by a label value (``Prompt.target_label``): the
Segment widget's object, written under that value into the image's prediction layer. It is the
ground truth's label of that value, or a region of several labels (the liver with the tumour inside it,
``labels=(1, 3)``: :func:`object_target`), whose mask its prompts are made from
(:meth:`SessionObjects.prompts_from_ground_truth`). Each object keeps its own anchored segmentation
(:class:`~.target_anchors.TargetAnchors`: its anchors and its whole mask), and each image its objects
(:mod:`.kept_images`): correcting or undoing one object never touches another, nested or not.

:class:`SessionObjects` is the part of :class:`~.session.Session` that answers for the objects; the
session (its image, backend, lock and events) is the rest.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from ..core.case import infer_kind, present_label_values
from ..core.prompt import Prompt
from ..core.targets import Target
from ..propagation.anchors import AnchorSnapshot
from .target_anchors import TargetAnchors
from ..core.errors import InputError


def object_target(value: int, labels: Sequence[int] | None = None, name: str | None = None) -> Target:
    """Object ``value`` as a :class:`~napari_medsam_eval.core.targets.Target` keyed by it: the ground
    truth's ``labels`` it unites (default: its own value)."""
    values = tuple(int(v) for v in labels) if labels else (int(value),)
    return Target(name or f"object_{int(value)}", values, key=int(value))


class SessionObjects:
    """The objects of a :class:`~.session.Session`: prompts from the ground truth, anchors, kept images."""

    def prompts_from_ground_truth(
        self,
        label_map: np.ndarray,
        target_label: int,
        protocol: str = "medsam2",
        *,
        slice_index: int | None = None,
        kind: str | None = None,
        labels: Sequence[int] | None = None,
        **options: Any,
    ) -> list[Prompt]:
        """Prompts for object ``target_label`` made by the named protocol from ``label_map``: from the
        ground truth's ``labels`` (a region of several labels: the liver with its tumour, ``(1, 3)``;
        default: the object's own label value), each prompt carrying ``target_label``.

        With ``slice_index`` the protocol is applied to that slice alone (as a
        2D image) and the prompts are tied to it; otherwise to the whole
        label map (its key slice/frame). ``mazurowski`` and ``iterative-points``
        on a volume or video default to ``slices="key"`` (one slice, not every one). ``kind`` defaults to the
        session image's kind (the label map is then checked against it).
        """
        from ..protocols import build_protocol

        label_map = np.asarray(label_map)
        if kind is None and (self.volume is not None or self._pending is not None):
            self._need_image()
            kind = self.kind
            spatial = self.volume.shape[:2] if kind == "image" else self.volume.shape[:3]
            if label_map.shape != tuple(spatial):
                raise InputError(f"ground truth shape {label_map.shape} does not match the image's {tuple(spatial)}")
        elif kind is None:
            kind = infer_kind(label_map.shape)
        if protocol in ("mazurowski", "iterative-points") and kind != "image" and slice_index is None:
            options.setdefault("slices", "key")
        proto = build_protocol(protocol, **options)
        target = object_target(target_label, labels)
        if slice_index is not None and kind != "image":
            index = int(slice_index)
            if not 0 <= index < label_map.shape[0]:
                raise InputError(f"slice index {index} is outside the ground truth (0..{label_map.shape[0] - 1})")
            prompts = proto.prompts(label_map[index], kind="image", targets=[target])
            prompts = [dataclasses.replace(p, slice_index=index) for p in prompts]
        else:
            prompts = proto.prompts(label_map, kind=kind, targets=[target])
        self._remember_truth(label_map, target_label, target)
        return prompts

    def _remember_truth(self, label_map: np.ndarray, target_label: int, target: Target) -> None:
        """Keep object ``target_label``'s ground truth for this image (a correction then says what it did to
        the DSC, :meth:`~.session.Session.correct`); a label map not of the image's shape is not kept."""
        volume = getattr(self, "volume", None)
        if volume is None or self._pending is not None or self.kind not in ("volume", "video"):
            return
        if label_map.shape == tuple(volume.shape[:3]):
            self._targets.truths[int(target_label)] = target.mask(label_map)

    def prompt_from_ground_truth(self, label_map: np.ndarray, target_label: int, protocol: str = "medsam2",
                                 *, slice_index: int | None = None, kind: str | None = None,
                                 labels: Sequence[int] | None = None, **options: Any) -> Prompt:
        """The first non-empty prompt of :meth:`prompts_from_ground_truth`; ValueError when there is none.

        The prompt is remembered as :attr:`gt_prompt` and :attr:`prompt_changed` emitted.
        """
        prompts = self.prompts_from_ground_truth(label_map, target_label, protocol, slice_index=slice_index,
                                                 kind=kind, labels=labels, **options)
        for prompt in prompts:
            if not prompt.is_empty and not prompt.info.get("empty"):
                self.gt_prompt = prompt
                self.prompt_changed.emit(prompt)
                return prompt
        where = f" on slice {slice_index}" if slice_index is not None else ""
        region = label_map if slice_index is None or kind == "image" else label_map[int(slice_index)]
        present = ", ".join(str(v) for v in present_label_values(region)) or "none"
        target = object_target(target_label, labels)
        what = (f"label {target_label} is" if target.labels == (int(target_label),)
                else f"labels {target.labels_text().replace(',', ', ')} of object {target_label} are")
        raise InputError(f"{what} absent from the ground truth{where} (labels present: {present}): "
                         "nothing to prompt")

    def resolve_prompt(self, prompt: Prompt) -> Prompt:
        """:attr:`gt_prompt` itself (with its protocol and details) when ``prompt`` asks the same
        thing (:func:`same_geometry`, e.g. read back from the layers that show it), else ``prompt``."""
        if self.gt_prompt is not None and same_geometry(prompt, self.gt_prompt):
            return self.gt_prompt
        return prompt

    def anchors(self, target_label: int | None = None, image: str | None = None) -> list[Prompt]:
        """The prompts of ``target_label``'s (default: the latest target's) anchored segmentation in
        slice order (empty when there is none); each target keeps its own, each image too: ``image``
        names one set before (its ``image_id``; default: this one).

        Safe to call while a worker corrects (a GUI refreshing its list): a copy is read."""
        targets, image_id = self._targets_of(image)
        anchored = targets.current(self.first_look.owners(self.backend), image_id, target_label)
        anchors = {} if anchored is None else dict(anchored.anchors)
        return [anchors[k] for k in sorted(anchors)]

    def anchor_snapshot(self, target_label: int, image: str | None = None) -> AnchorSnapshot | None:
        """``target_label``'s anchors and mask as they are now (None without any), for :meth:`restore_anchors`."""
        targets, image_id = self._targets_of(image)
        anchored = targets.current(self.first_look.owners(self.backend), image_id, target_label)
        return None if anchored is None else anchored.snapshot()

    def restore_anchors(self, target_label: int, snapshot: AnchorSnapshot | None, image: str | None = None) -> None:
        """Put ``target_label``'s anchors (of ``image``, as in :meth:`anchors`) back as :meth:`anchor_snapshot`
        took them (an undo of a correction removes that correction's anchor only); None, or a snapshot of
        another image or backend, drops them."""
        targets, image_id = self._targets_of(image)
        targets.restore(self.first_look.owners(self.backend), image_id, target_label, snapshot, self._lock)

    def drop_anchors(self, target_label: int | None = None, image: str | None = None) -> None:
        """Forget ``target_label``'s anchored segmentation (None: every target's) of ``image`` (as in
        :meth:`anchors`); the next correction of that target propagates."""
        self._targets_of(image)[0].drop(target_label)

    def forget_image(self, image: str) -> None:
        """Forget what is kept of ``image``, an image set before (its anchors; a GUI closed its layer)."""
        if str(image) != self._base_id:
            self._kept.forget(image)

    def _targets_of(self, image: str | None) -> tuple[TargetAnchors, str | None]:
        """The anchors and ``image_id`` of ``image``: this one (None or its name), one set before, or none."""
        if image is None or str(image) == self._base_id:
            return self._targets, self.image_id
        kept = self._kept.get(image)
        return (TargetAnchors(), None) if kept is None else (kept.targets, kept.image_id)


def same_geometry(a: Prompt, b: Prompt) -> bool:
    """Whether two prompts ask the same thing (slice, target, boxes, points and their labels)."""
    return (a.slice_index == b.slice_index and a.target_label == b.target_label
            and [tuple(x) for x in a.boxes] == [tuple(x) for x in b.boxes]
            and [tuple(x) for x in a.points] == [tuple(x) for x in b.points]
            and list(a.point_labels) == list(b.point_labels))


__all__ = ["SessionObjects", "object_target", "same_geometry"]
