"""Prompts as plain data: what a run asked the model, serialisable to JSON.

Coordinates are pixel indices of the 2D slice/frame, ``x`` = column and
``y`` = row, 0-based. Boxes are ``(x0, y0, x1, y1)`` and *inclusive*: ``x1``
and ``y1`` are the last foreground column/row, as the tight box of a mask
(``x.min(), y.min(), x.max(), y.max()``) gives them. This is the convention of
MedSAM, LiteMedSAM and Mazurowski et al.; backends pass it to the models
unchanged. Point labels: 1 positive (foreground), 0 negative (background).

A box with ``x0 > x1`` / ``y0 > y1`` or a non-finite coordinate is refused
when the prompt is made (:class:`PromptError`). Where a prompt meets its image,
:func:`check_prompt_in_image` refuses a box or point lying wholly outside the
image and clips a box lying partly outside it, with a :class:`PromptWarning`.
"""
from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from .errors import DataError
from .errors import InputError, InputTypeError
from .targets import Target, with_keys

Box = tuple[float, float, float, float]
Point = tuple[float, float]


class PromptError(DataError, ValueError):
    """A prompt that cannot be used (inverted or non-finite box, outside its image).

    Also a :class:`ValueError`, which callers that build prompts from drawn
    shapes catch.
    """


class PromptWarning(UserWarning):
    """A prompt was changed to fit its image (a box clipped to the image border)."""


def plain_number(value: float) -> str:
    """``30``, ``12.5``, ``nan``: a coordinate as people write it (no ``np.float64(...)``)."""
    value = float(value)
    return str(int(value)) if math.isfinite(value) and value == int(value) else f"{value:g}"


def describe_box(box: Sequence[float]) -> str:
    """``box (x0=30, y0=5, x1=10, y1=20)``."""
    return "box (" + ", ".join(f"{n}={plain_number(v)}" for n, v in zip(("x0", "y0", "x1", "y1"), box)) + ")"


def check_box(box: Sequence[float]) -> None:
    """Raise :class:`PromptError` for a box that is not 4 finite numbers with x0 <= x1, y0 <= y1."""
    if len(box) != 4:
        raise PromptError(f"a box is (x0, y0, x1, y1), got {len(box)} values: "
                          + ", ".join(plain_number(v) for v in box))
    x0, y0, x1, y1 = (float(v) for v in box)
    if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
        raise PromptError(f"{describe_box(box)}: coordinates must be finite numbers")
    if x0 > x1:
        raise PromptError(f"{describe_box(box)}: x0 > x1")
    if y0 > y1:
        raise PromptError(f"{describe_box(box)}: y0 > y1")


@dataclass
class Prompt:
    """Prompts for one target label on one slice/frame.

    ``slice_index`` is the index along the case's first axis (z or t); None for
    a 2D image. ``boxes`` may hold several boxes (Mazurowski mode 4): each box
    is segmented on its own and the outputs are merged by union. ``mask`` is an
    optional low-resolution or full-size mask prompt (not serialised; its
    presence is recorded). ``protocol`` names what made the prompt
    ("medsam2", "manual", ...) and ``info`` holds its free details.

    ``target`` is the :class:`~napari_medsam_eval.core.targets.Target` prompted (its name, the labels it
    unites, lesion by lesion or not): a protocol's prompts carry theirs, and ``api.score_pair(mask,
    case=case, target=prompt.target)`` scores against it. ``target_label`` is then the target's key: the
    label value for a target of one label, for a region a number the run gives (no label of the case: score
    the target, never ``case.label == prompt.target_label``). A :class:`Target` given as ``target_label``
    is taken as the target (its key the label).

    Example::

        Prompt(target_label=2, slice_index=22, boxes=[(63, 50, 75, 69)])             # x0, y0, x1, y1
        Prompt(target_label=1, slice_index=0, points=[(40, 30)], point_labels=[1])  # a positive click
        Prompt(Target("liver", (1, 3)), slice_index=20, boxes=[(30, 28, 70, 66)])   # a region's prompt
    """

    target_label: int
    slice_index: int | None = None
    boxes: list[Box] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    point_labels: list[int] = field(default_factory=list)
    mask: np.ndarray | None = None
    protocol: str = "manual"
    info: dict[str, Any] = field(default_factory=dict)
    target: Target | None = None

    def __post_init__(self) -> None:
        if isinstance(self.target_label, Target):
            if self.target is not None and self.target != self.target_label:
                raise InputError(f"Prompt given two targets: {self.target_label!r} and {self.target!r}")
            self.target = self.target_label
            self.target_label = self.target.key or with_keys([self.target])[0].key
        if self.target is not None and not isinstance(self.target, Target):
            self.target = Target.of(self.target)
        boxes = listed(self.boxes, "boxes", "(x0, y0, x1, y1) boxes", "boxes=[(9, 31, 27, 44)]", one="box")
        points = listed(self.points, "points", "(x, y) points", "points=[(40, 30)]", one="point")
        labels = listed(self.point_labels, "point_labels", "labels, one per point (1 positive, 0 negative)",
                        "point_labels=[1]")
        self.boxes = [tuple(float(v) for v in b) for b in boxes]  # type: ignore[misc]
        self.points = [tuple(float(v) for v in p) for p in points]  # type: ignore[misc]
        self.point_labels = [int(v) for v in labels]
        for box in self.boxes:
            check_box(box)
        for x, y in self.points:
            if not (math.isfinite(x) and math.isfinite(y)):
                raise PromptError(f"point (x={plain_number(x)}, y={plain_number(y)}): coordinates must be finite")
        if len(self.points) != len(self.point_labels):
            raise InputError(f"{len(self.points)} points but {len(self.point_labels)} point labels")
        if any(v not in (0, 1) for v in self.point_labels):
            raise InputError(f"point labels must be 0 (negative) or 1 (positive), got {self.point_labels}")

    @property
    def is_empty(self) -> bool:
        return not self.boxes and not self.points and self.mask is None

    def points_array(self) -> np.ndarray:
        """Points as a float (N, 2) array of (x, y)."""
        return np.asarray(self.points, dtype=np.float64).reshape(-1, 2)

    def labels_array(self) -> np.ndarray:
        return np.asarray(self.point_labels, dtype=np.int64)

    def to_dict(self, *, target: bool = False) -> dict[str, Any]:
        """Plain JSON values: the mask's presence only (``has_mask``); the target's text under ``"target"``
        with ``target=True`` (a run's row holds its target in its own columns, not in its ``prompt``)."""
        data = asdict(dataclasses.replace(self, target=None, mask=None))
        data.pop("mask")
        data.pop("target")
        if target and self.target is not None:
            data["target"] = self.target.text()
        data["has_mask"] = self.mask is not None
        data["boxes"] = [list(b) for b in self.boxes]
        data["points"] = [list(p) for p in self.points]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Prompt":
        data = dict(data)
        data.pop("has_mask", None)
        if isinstance(data.get("target"), str):  # its text: the key is the prompt's target_label
            data["target"] = dataclasses.replace(Target.parse(data["target"]), key=int(data["target_label"]))
        return cls(**data)

    def __repr__(self) -> str:
        """The fields that are set; a target's prompt shows the target, not its key (``target_label``)."""
        shown = [f"target={self.target!r}" if self.target is not None else f"target_label={self.target_label!r}"]
        for name in ("slice_index", "boxes", "points", "point_labels", "protocol", "info"):
            value = getattr(self, name)
            if value or (name == "slice_index" and value is not None) or name == "protocol":
                shown.append(f"{name}={value!r}")
        if self.mask is not None:
            shown.append(f"mask={'x'.join(str(d) for d in np.shape(self.mask))}")
        return f"Prompt({', '.join(shown)})"

    @classmethod
    def from_json(cls, text: str) -> "Prompt":
        return cls.from_dict(json.loads(text))


def listed(value: Any, name: str, what: str, example: str, *, one: str | None = None) -> list[Any]:
    """``value`` as a list of items (each a sequence, ``one`` naming it, when ``one`` is given; else each a
    number); an :class:`InputTypeError` naming ``name`` and what it takes otherwise (``boxes=(9, 31, 27, 44)``:
    one box not in a list; ``point_labels=1``: one label not in a list)."""
    def is_number(item: Any) -> bool:
        return isinstance(item, (int, float, np.number, np.bool_))

    items = value.tolist() if isinstance(value, np.ndarray) else value
    if isinstance(items, (str, bytes, dict)) or is_number(items) or not hasattr(items, "__iter__"):
        raise InputTypeError(f"{name} takes a list of {what}, e.g. {example}; got {value!r}")
    items = list(items)
    nested = one is not None
    wrong = [item for item in items if is_number(item) == nested or isinstance(item, (str, bytes))]
    if wrong:
        hint = f" (one {one} not in a list?)" if nested and len(wrong) == len(items) else ""
        raise InputTypeError(f"{name} takes a list of {what}, e.g. {example}; got {value!r}{hint}")
    return items


def expect_prompt(value: Any, call: str) -> Prompt:
    """``value`` when it is one :class:`Prompt`; an :class:`InputTypeError` saying what ``call`` takes
    otherwise (a list of prompts: call it once for each)."""
    if isinstance(value, Prompt):
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Prompt) for v in value):
        raise InputTypeError(f"{call} takes one Prompt, got a {type(value).__name__} of {len(value)} prompts: "
                             f"call it once for each prompt (results = [... for prompt in prompts])")
    raise InputTypeError(f"{call} takes one Prompt, got {type(value).__name__} {value!r:.80}")


def check_prompt_in_image(prompt: Prompt, shape_hw: Sequence[int], n_slices: int | None = None, *,
                          clip: bool = True) -> Prompt:
    """``prompt`` checked against an image of ``shape_hw`` (rows, cols) pixels.

    Coordinates are pixel indices, so the image spans ``0..W-1`` x ``0..H-1``.
    A box lying wholly outside the image, a point outside it, or a
    ``slice_index`` outside ``0..n_slices-1`` raises :class:`PromptError`; a box
    lying partly outside is clipped to the image with a :class:`PromptWarning`
    and a copy of the prompt is returned (``info["clipped_boxes"]`` records the
    original boxes). The prompt is returned unchanged when it fits, or with
    ``clip=False`` (a protocol's boxes, which the models take as they are).
    """
    height, width = int(shape_hw[0]), int(shape_hw[1])
    size = f"the {width} x {height} image (x 0..{width - 1}, y 0..{height - 1})"
    if n_slices is not None and prompt.slice_index is not None and not 0 <= int(prompt.slice_index) < n_slices:
        raise PromptError(f"prompt slice {prompt.slice_index} is outside the stack of {n_slices} slices "
                          f"(0..{n_slices - 1})")
    for x, y in prompt.points:
        if not (0 <= x <= width - 1 and 0 <= y <= height - 1):
            raise PromptError(f"point (x={plain_number(x)}, y={plain_number(y)}) lies outside {size}")
    clipped: list[Box] = []
    for box in prompt.boxes:
        check_box(box)
        x0, y0, x1, y1 = box
        if x1 < 0 or y1 < 0 or x0 > width - 1 or y0 > height - 1:
            raise PromptError(f"{describe_box(box)} lies wholly outside {size}")
        clipped.append((max(x0, 0.0), max(y0, 0.0), min(x1, width - 1.0), min(y1, height - 1.0)))
    changed = [(old, new) for old, new in zip(prompt.boxes, clipped) if tuple(old) != new]
    if not changed or not clip:
        return prompt
    for old, new in changed:
        warnings.warn(f"{describe_box(old)} lies partly outside {size}; clipped to "
                      f"{describe_box(new)[4:]}", PromptWarning, stacklevel=2)
    info = {**prompt.info, "clipped_boxes": [list(old) for old, _ in changed]}
    return dataclasses.replace(prompt, boxes=clipped, info=info)


#: between two prompts of a row's ``prompt`` list (``json.dumps``' own)
PROMPTS_SEPARATOR = ", "


def prompt_json(prompt: Prompt) -> str:
    """One prompt as the JSON a result row's list holds (an item of :func:`prompts_to_json`)."""
    return json.dumps(prompt.to_dict(), sort_keys=True)


def prompts_to_json(prompts: list[Prompt]) -> str:
    """A list of prompts as one JSON string (what a result row records)."""
    return "[" + PROMPTS_SEPARATOR.join(prompt_json(p) for p in prompts) + "]"


def prompts_from_json(text: str) -> list[Prompt]:
    return [Prompt.from_dict(d) for d in json.loads(text)]
