"""Prompts as plain data: what a run asked the model, serialisable to JSON.

Coordinates are pixel indices of the 2D slice/frame, ``x`` = column and
``y`` = row, 0-based. Boxes are ``(x0, y0, x1, y1)`` and *inclusive*: ``x1``
and ``y1`` are the last foreground column/row, as the tight box of a mask
(``x.min(), y.min(), x.max(), y.max()``) gives them. This is the convention of
MedSAM, LiteMedSAM and Mazurowski et al.; backends pass it to the models
unchanged. Point labels: 1 positive (foreground), 0 negative (background).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

Box = tuple[float, float, float, float]
Point = tuple[float, float]


@dataclass
class Prompt:
    """Prompts for one target label on one slice/frame.

    ``slice_index`` is the index along the case's first axis (z or t); None for
    a 2D image. ``boxes`` may hold several boxes (Mazurowski mode 4): each box
    is segmented on its own and the outputs are merged by union. ``mask`` is an
    optional low-resolution or full-size mask prompt (not serialised; its
    presence is recorded). ``protocol`` names what made the prompt
    ("medsam2", "manual", ...) and ``info`` holds its free details.
    """

    target_label: int
    slice_index: int | None = None
    boxes: list[Box] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    point_labels: list[int] = field(default_factory=list)
    mask: np.ndarray | None = None
    protocol: str = "manual"
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.boxes = [tuple(float(v) for v in b) for b in self.boxes]  # type: ignore[misc]
        self.points = [tuple(float(v) for v in p) for p in self.points]  # type: ignore[misc]
        self.point_labels = [int(v) for v in self.point_labels]
        for box in self.boxes:
            if len(box) != 4 or box[2] < box[0] or box[3] < box[1]:
                raise ValueError(f"box must be (x0, y0, x1, y1) with x0 <= x1 and y0 <= y1, got {box}")
        if len(self.points) != len(self.point_labels):
            raise ValueError(f"{len(self.points)} points but {len(self.point_labels)} point labels")
        if any(v not in (0, 1) for v in self.point_labels):
            raise ValueError(f"point labels must be 0 (negative) or 1 (positive), got {self.point_labels}")

    @property
    def is_empty(self) -> bool:
        return not self.boxes and not self.points and self.mask is None

    def points_array(self) -> np.ndarray:
        """Points as a float (N, 2) array of (x, y)."""
        return np.asarray(self.points, dtype=np.float64).reshape(-1, 2)

    def labels_array(self) -> np.ndarray:
        return np.asarray(self.point_labels, dtype=np.int64)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("mask")
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
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> "Prompt":
        return cls.from_dict(json.loads(text))


def prompts_to_json(prompts: list[Prompt]) -> str:
    """A list of prompts as one JSON string (what a result row records)."""
    return json.dumps([p.to_dict() for p in prompts], sort_keys=True)


def prompts_from_json(text: str) -> list[Prompt]:
    return [Prompt.from_dict(d) for d in json.loads(text)]
