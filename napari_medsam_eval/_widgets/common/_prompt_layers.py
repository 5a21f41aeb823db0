"""Prompt layers <-> :class:`~napari_medsam_eval.core.prompt.Prompt`, without Qt.

A box prompt is a rectangle in a Shapes layer, point prompts are a Points
layer whose ``features['label']`` is 1 (positive, white) or 0 (negative,
black); key ``T`` toggles a point's label (the points' polarity:
:mod:`._prompt_points`, re-exported here). Both are made with their image's
transform (see :mod:`._layers` for the coordinates).

A drawn shape becomes the inclusive pixel box of the pixels whose *centres*
lie inside its bounding rectangle (``x0 = ceil(min x)``, ``x1 = floor(max x)``),
clipped to the image; a :class:`~napari_medsam_eval.core.prompt.Prompt` box is shown
as the rectangle around its pixels (``x0 - 0.5 .. x1 + 0.5``), so the two are
inverse for integer boxes.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Iterable

import numpy as np
from napari.layers import Image, Points, Shapes

from napari_medsam_eval.core.palette import BOX_PROMPT
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval._widgets.common._layers import current_index, from_image_coords, layer_kind, spatial_shape, to_image_coords, transform_kwargs
from napari_medsam_eval._widgets.common._prompt_points import (NEXT_LABEL_KEY, POINT_BORDER_COLORS, POINT_COLORS, TOGGLE_KEY, adopt_point_layer,
                             keep_point_polarity, next_point_label, point_labels, set_next_point_label,
                             toggle_point_label)
from napari_medsam_eval.core.errors import InputError

BOX_COLOR = BOX_PROMPT


def add_prompt_layers(viewer: Any, image: Image) -> tuple[Shapes, Points]:
    """New box and point layers for ``image`` in the viewer; the box layer active, drawing rectangles."""
    boxes = viewer.add_layer(make_box_layer(image))
    points = viewer.add_layer(make_point_layer(image))
    viewer.layers.selection.active = boxes
    boxes.mode = "add_rectangle"
    return boxes, points


def make_box_layer(image: Image, name: str | None = None) -> Shapes:
    """An empty Shapes layer for box prompts over ``image`` (same transform)."""
    layer = Shapes(
        ndim=image.ndim, name=name or f"{image.name} boxes", edge_color=BOX_COLOR, face_color="transparent",
        edge_width=0.5, metadata={"role": "prompt_boxes", "image": image.name}, **transform_kwargs(image),
    )
    layer.current_edge_color = BOX_COLOR
    layer.current_face_color = "transparent"
    return layer


def make_point_layer(image: Image, name: str | None = None) -> Points:
    """An empty Points layer for point prompts over ``image``: ``features['label']``
    1 (positive, white) or 0 (negative, black), each ringed in the other; key ``T`` toggles a label."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "label looks categorical": it is
        layer = Points(
            np.empty((0, image.ndim)), ndim=image.ndim, name=name or f"{image.name} points",
            features={"label": np.array([], dtype=int)}, face_color="label",
            face_color_cycle=dict(POINT_COLORS), border_color="label",
            border_color_cycle=dict(POINT_BORDER_COLORS), size=3,
            metadata={"role": "prompt_points", "image": image.name}, **transform_kwargs(image),
        )
    layer.feature_defaults["label"] = 1
    keep_point_polarity(layer)
    return layer


def box_from_vertices(yx: np.ndarray, shape_hw: tuple[int, int]) -> tuple[int, int, int, int] | None:
    """Inclusive pixel box ``(x0, y0, x1, y1)`` of the pixels whose centres lie in the
    bounding rectangle of ``yx`` vertices, clipped to ``shape_hw``; None when outside."""
    yx = np.asarray(yx, dtype=np.float64).reshape(-1, 2)
    h, w = shape_hw
    (y_min, x_min), (y_max, x_max) = yx.min(axis=0), yx.max(axis=0)
    x0, x1 = math.ceil(x_min - 1e-9), math.floor(x_max + 1e-9)
    y0, y1 = math.ceil(y_min - 1e-9), math.floor(y_max + 1e-9)
    if x1 < x0:  # thinner than a pixel: the pixel at its centre
        x0 = x1 = int(round((x_min + x_max) / 2))
    if y1 < y0:
        y0 = y1 = int(round((y_min + y_max) / 2))
    if x1 < 0 or y1 < 0 or x0 > w - 1 or y0 > h - 1:
        return None
    return max(0, x0), max(0, y0), min(w - 1, x1), min(h - 1, y1)


def box_vertices(box: Iterable[float], index: int | None) -> np.ndarray:
    """The rectangle (4 vertices, ``[z,] y, x``) around the pixels of an inclusive box."""
    x0, y0, x1, y1 = (float(v) for v in box)
    yx = np.array([[y0 - 0.5, x0 - 0.5], [y0 - 0.5, x1 + 0.5], [y1 + 0.5, x1 + 0.5], [y1 + 0.5, x0 - 0.5]])
    if index is None:
        return yx
    return np.column_stack([np.full(4, float(index)), yx])


def _shape_slice(coords: np.ndarray) -> int:
    return int(round(float(np.mean(coords[:, 0]))))


def prompt_slices(image: Image, boxes: Shapes | None, points: Points | None) -> list[int]:
    """Slice indices (of ``image``) holding at least one box or point, ascending."""
    if layer_kind(image) == "image":
        has = (boxes is not None and len(boxes.data)) or (points is not None and len(points.data))
        return [0] if has else []
    found: set[int] = set()
    for shape in (boxes.data if boxes is not None else []):
        found.add(_shape_slice(to_image_coords(boxes, image, shape)))
    if points is not None and len(points.data):
        coords = to_image_coords(points, image, points.data)
        found.update(int(round(float(z))) for z in coords[:, 0])
    return sorted(found)


def _drawn_on_slice(image: Image, index: int | None, boxes: Shapes | None, points: Points | None
                    ) -> tuple[list[tuple[int, int, int, int]], list[tuple[float, float]], list[int], int]:
    """The boxes, point coordinates (x, y) and point labels drawn on slice ``index`` inside the image, and
    how many boxes and points drawn on that slice lie wholly outside it."""
    is_2d = layer_kind(image) == "image"
    shape_hw = spatial_shape(image)[-2:]
    prompt_boxes: list[tuple[int, int, int, int]] = []
    outside = 0
    for shape in (boxes.data if boxes is not None else []):
        coords = to_image_coords(boxes, image, shape)
        if not is_2d and _shape_slice(coords) != index:
            continue
        box = box_from_vertices(coords[:, -2:], shape_hw)
        if box is None:
            outside += 1
        else:
            prompt_boxes.append(box)
    xy: list[tuple[float, float]] = []
    labels: list[int] = []
    if points is not None and len(points.data):
        coords = to_image_coords(points, image, points.data)
        h, w = shape_hw
        for coord, label in zip(coords, point_labels(points)):
            if not is_2d and int(round(float(coord[0]))) != index:
                continue
            y, x = float(coord[-2]), float(coord[-1])
            if not (-0.5 <= y <= h - 0.5 and -0.5 <= x <= w - 0.5):
                outside += 1
                continue
            xy.append((min(max(x, 0.0), w - 1.0), min(max(y, 0.0), h - 1.0)))
            labels.append(int(label))
    return prompt_boxes, xy, labels, outside


def prompt_from_layers(
    image: Image,
    index: int | None,
    target_label: int,
    boxes: Shapes | None = None,
    points: Points | None = None,
) -> Prompt:
    """The :class:`Prompt` of the boxes and points drawn on slice ``index`` (None: 2D image)."""
    prompt_boxes, xy, labels, _outside = _drawn_on_slice(image, index, boxes, points)
    is_2d = layer_kind(image) == "image"
    return Prompt(target_label=int(target_label), slice_index=None if is_2d else index, boxes=prompt_boxes,
                  points=xy, point_labels=labels, protocol="manual")


def drawn_prompt(viewer: Any, image: Image, target_label: int, boxes: Shapes | None, points: Points | None,
                 index: int | None = None) -> Prompt:
    """The prompt drawn on slice ``index`` (default: the one on screen, else the only prompted one);
    ValueError when there are no prompt layers, nothing is drawn there or all of it lies outside the image."""
    if boxes is None and points is None:
        raise InputError("no prompt layers: draw a box or points (New prompt layers) or prompt from ground truth")
    if index is None and layer_kind(image) != "image":
        index = current_index(viewer, image)
        slices = prompt_slices(image, boxes, points)
        if index not in slices and len(slices) == 1:
            index = slices[0]
    prompt = prompt_from_layers(image, index, target_label, boxes, points)
    if prompt.is_empty:
        where = "" if index is None else f" on slice {index}"
        outside = _drawn_on_slice(image, index, boxes, points)[3]
        if outside:
            height, width = spatial_shape(image)[-2:]
            what = "the box or point" if outside == 1 else f"all {outside} boxes and points"
            raise InputError(f"{what} drawn{where} lie{'s' if outside == 1 else ''} wholly outside the image "
                             f"({width} x {height} pixels): draw over the image")
        raise InputError(f"no box or point{where}: draw one or prompt from ground truth")
    return prompt


def show_prompt(prompt: Prompt, image: Image, boxes: Shapes, points: Points) -> None:
    """Replace the contents of the prompt layers with ``prompt`` (on its slice)."""
    index = None if layer_kind(image) == "image" else prompt.slice_index
    boxes.data = []
    if prompt.boxes:
        rects = [from_image_coords(boxes, image, box_vertices(b, index)) for b in prompt.boxes]
        boxes.add_rectangles(rects, edge_color=BOX_COLOR, face_color="transparent")
    coords = np.array([[float(y), float(x)] for x, y in prompt.points]).reshape(-1, 2)
    if index is not None:
        coords = np.column_stack([np.full(len(coords), float(index)), coords])
    default = int(points.feature_defaults["label"].iloc[0]) if "label" in points.feature_defaults else 1
    points.data = from_image_coords(points, image, coords) if len(coords) else np.empty((0, points.ndim))
    points.features = {"label": np.asarray(prompt.point_labels, dtype=int)}
    points.feature_defaults["label"] = default
    points.refresh_colors(update_color_mapping=False)


def warm_prompt_layers() -> None:
    """Build a box and a point prompt over a small volume once, off the GUI thread (a dock's ``warm_up``):
    napari's Shapes layer has numba compile its triangulation for the boxes' arrays on first use (half a
    second holding the interpreter), which would otherwise happen while the first row or prompt is shown."""
    image = Image(np.zeros((3, 8, 8), np.uint8), scale=(2.0, 1.0, 1.0))
    prompt = Prompt(target_label=1, slice_index=1, boxes=[(1, 1, 5, 5)], points=[(3, 3)], point_labels=[1])
    show_prompt(prompt, image, make_box_layer(image), make_point_layer(image))


__all__ = ["BOX_COLOR", "NEXT_LABEL_KEY", "POINT_BORDER_COLORS", "POINT_COLORS", "TOGGLE_KEY", "add_prompt_layers",
           "adopt_point_layer", "box_from_vertices", "box_vertices", "drawn_prompt", "keep_point_polarity",
           "make_box_layer", "make_point_layer", "next_point_label", "point_labels", "prompt_from_layers", "prompt_slices",
           "set_next_point_label", "show_prompt", "toggle_point_label", "warm_prompt_layers"]
