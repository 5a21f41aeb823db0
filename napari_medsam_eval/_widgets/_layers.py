"""napari layers <-> core objects, without Qt: prompt layers, slices, result layers.

Coordinates: napari keeps a layer's vertices and points in its *data*
coordinates (``z, y, x``; a pixel's centre is at an integer index and the
pixel spans ``index - 0.5 .. index + 0.5``). Prompt layers are made with their
image's scale and translate, so their data coordinates are the image's pixel
indices; a layer with another transform is mapped through world coordinates
(``data_to_world`` then the image's ``world_to_data``).

A drawn shape becomes the inclusive pixel box of the pixels whose *centres*
lie inside its bounding rectangle (``x0 = ceil(min x)``, ``x1 = floor(max x)``),
clipped to the image; a :class:`~napari_medsam_eval.prompt.Prompt` box is shown
as the rectangle around its pixels (``x0 - 0.5 .. x1 + 0.5``), so the two are
inverse for integer boxes.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Iterable

import numpy as np
from napari.layers import Image, Labels, Layer, Points, Shapes
from napari.utils.colormaps import DirectLabelColormap

from ..case import infer_kind
from ..comparison import OVERLAY_FN, OVERLAY_FP, OVERLAY_TP
from ..prompt import Prompt

#: colours of positive / negative prompt points
POINT_COLORS = {1: "lime", 0: "red"}
BOX_COLOR = "yellow"
#: overlay colours: TP green, FP magenta (predicted, not true), FN cyan (missed)
OVERLAY_COLORS = {OVERLAY_TP: "lime", OVERLAY_FP: "magenta", OVERLAY_FN: "cyan"}
#: the key that toggles a prompt point's label (selected points, else the next one)
TOGGLE_KEY = "t"


# ---------------------------------------------------------------------------
# geometry of image layers
# ---------------------------------------------------------------------------

def spatial_shape(layer: Image) -> tuple[int, ...]:
    """The image's shape without its colour axis."""
    shape = tuple(int(s) for s in layer.data.shape)
    return shape[:-1] if layer.rgb else shape


def layer_kind(layer: Image) -> str:
    """``volume``, ``video`` or ``image``: the reader's ``metadata['kind']`` when it fits, else guessed."""
    hint = layer.metadata.get("kind") if isinstance(layer.metadata, dict) else None
    shape = tuple(layer.data.shape)
    try:
        return infer_kind(shape, bool(layer.rgb), hint)
    except ValueError:
        return infer_kind(shape, bool(layer.rgb))


def _same_transform(a: Layer, b: Layer) -> bool:
    """Whether two layers map data to world alike (an affine map is fixed by n + 1 points)."""
    if a.ndim != b.ndim:
        return False
    probes = np.vstack([np.zeros(a.ndim), np.eye(a.ndim)])
    return all(np.allclose(a.data_to_world(p), b.data_to_world(p)) for p in probes)


def to_image_coords(layer: Layer, image: Layer, coords: np.ndarray) -> np.ndarray:
    """``coords`` (N, layer.ndim) in ``layer``'s data coordinates -> ``image``'s data coordinates."""
    coords = np.asarray(coords, dtype=np.float64).reshape(-1, layer.ndim)
    if _same_transform(layer, image):
        return coords
    return np.array([image.world_to_data(layer.data_to_world(c)) for c in coords]).reshape(-1, image.ndim)


def _from_image_coords(layer: Layer, image: Layer, coords: np.ndarray) -> np.ndarray:
    coords = np.asarray(coords, dtype=np.float64).reshape(-1, image.ndim)
    if _same_transform(layer, image):
        return coords
    return np.array([layer.world_to_data(image.data_to_world(c)) for c in coords]).reshape(-1, layer.ndim)


def _slice_axis(viewer: Any, layer: Layer) -> int:
    """The viewer dims axis of ``layer``'s first data axis."""
    return viewer.dims.ndim - layer.ndim


def current_index(viewer: Any, layer: Image) -> int | None:
    """The slice/frame of ``layer`` the viewer shows (None for a 2D image)."""
    if layer_kind(layer) == "image":
        return None
    position = layer.world_to_data(viewer.dims.point)
    n = spatial_shape(layer)[0]
    return int(min(max(int(round(float(position[0]))), 0), n - 1))


def go_to_index(viewer: Any, layer: Layer, index: int) -> None:
    """Move the viewer's dims to slice ``index`` of ``layer`` (no-op for 2D)."""
    if layer.ndim < 3:
        return
    coords = np.zeros(layer.ndim)
    coords[0] = index
    world = float(np.asarray(layer.data_to_world(coords))[0])
    axis = _slice_axis(viewer, layer)
    rng = viewer.dims.range[axis]
    step = int(round((world - rng.start) / rng.step)) if rng.step else 0
    viewer.dims.set_current_step(axis, step)


# ---------------------------------------------------------------------------
# prompt layers
# ---------------------------------------------------------------------------

def _transform_kwargs(image: Image) -> dict[str, Any]:
    return {"scale": tuple(image.scale), "translate": tuple(image.translate)}


def new_box_layer(viewer: Any, image: Image, name: str | None = None) -> Shapes:
    """:func:`make_box_layer`, added to the viewer."""
    return viewer.add_layer(make_box_layer(image, name))


def new_point_layer(viewer: Any, image: Image, name: str | None = None) -> Points:
    """:func:`make_point_layer`, added to the viewer."""
    return viewer.add_layer(make_point_layer(image, name))


def make_box_layer(image: Image, name: str | None = None) -> Shapes:
    """An empty Shapes layer for box prompts over ``image`` (same transform)."""
    layer = Shapes(
        ndim=image.ndim, name=name or f"{image.name} boxes", edge_color=BOX_COLOR, face_color="transparent",
        edge_width=0.5, metadata={"role": "prompt_boxes", "image": image.name}, **_transform_kwargs(image),
    )
    layer.current_edge_color = BOX_COLOR
    layer.current_face_color = "transparent"
    return layer


def make_point_layer(image: Image, name: str | None = None) -> Points:
    """An empty Points layer for point prompts over ``image``: ``features['label']``
    1 (positive, green) or 0 (negative, red); key ``T`` toggles a label."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "label looks categorical": it is
        layer = Points(
            np.empty((0, image.ndim)), ndim=image.ndim, name=name or f"{image.name} points",
            features={"label": np.array([], dtype=int)}, face_color="label",
            face_color_cycle=dict(POINT_COLORS), border_color="white", size=3,
            metadata={"role": "prompt_points", "image": image.name}, **_transform_kwargs(image),
        )
    layer.feature_defaults["label"] = 1
    bind_toggle_key(layer)
    return layer


def bind_toggle_key(layer: Points) -> None:
    """Bind :data:`TOGGLE_KEY` on ``layer`` to :func:`toggle_point_label`."""
    layer.bind_key(TOGGLE_KEY, toggle_point_label, overwrite=True)  # key bindings ignore case


def point_labels(layer: Points) -> np.ndarray:
    """The 1/0 label of every point (1 when the layer has no ``label`` feature)."""
    if "label" not in layer.features:
        return np.ones(len(layer.data), dtype=int)
    return np.asarray(layer.features["label"], dtype=int)


def toggle_point_label(layer: Points) -> int | None:
    """Flip the label of the selected points, or, with none selected, of the next point added.

    Returns the new label of the next point (None when selected points changed).
    """
    if "label" not in layer.features:
        layer.features = {"label": np.ones(len(layer.data), dtype=int)}
    selected = sorted(layer.selected_data)
    if selected:
        features = layer.features.copy()
        labels = features["label"].to_numpy().astype(int)
        labels[selected] = 1 - labels[selected]
        features["label"] = labels
        layer.features = features
        layer.refresh_colors(update_color_mapping=False)
        return None
    new = 1 - int(layer.feature_defaults["label"].iloc[0])
    layer.feature_defaults["label"] = new
    return new


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


def _shape_slice(coords: np.ndarray, is_2d: bool) -> int | None:
    return None if is_2d else int(round(float(np.mean(coords[:, 0]))))


def prompt_slices(image: Image, boxes: Shapes | None, points: Points | None) -> list[int]:
    """Slice indices (of ``image``) holding at least one box or point, ascending."""
    if layer_kind(image) == "image":
        has = (boxes is not None and len(boxes.data)) or (points is not None and len(points.data))
        return [0] if has else []
    found: set[int] = set()
    for shape in (boxes.data if boxes is not None else []):
        found.add(_shape_slice(to_image_coords(boxes, image, shape), False))
    if points is not None and len(points.data):
        coords = to_image_coords(points, image, points.data)
        found.update(int(round(float(z))) for z in coords[:, 0])
    return sorted(found)


def prompt_from_layers(
    image: Image,
    index: int | None,
    target_label: int,
    boxes: Shapes | None = None,
    points: Points | None = None,
) -> Prompt:
    """The :class:`Prompt` of the boxes and points drawn on slice ``index`` (None: 2D image)."""
    is_2d = layer_kind(image) == "image"
    shape_hw = spatial_shape(image)[-2:]
    prompt_boxes: list[tuple[int, int, int, int]] = []
    for shape in (boxes.data if boxes is not None else []):
        coords = to_image_coords(boxes, image, shape)
        if not is_2d and _shape_slice(coords, False) != index:
            continue
        box = box_from_vertices(coords[:, -2:], shape_hw)
        if box is not None:
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
                continue
            xy.append((min(max(x, 0.0), w - 1.0), min(max(y, 0.0), h - 1.0)))
            labels.append(int(label))
    return Prompt(target_label=int(target_label), slice_index=None if is_2d else index, boxes=prompt_boxes,
                  points=xy, point_labels=labels, protocol="manual")


def same_geometry(a: Prompt, b: Prompt) -> bool:
    """Whether two prompts ask the same thing (slice, boxes, points and their labels)."""
    return (a.slice_index == b.slice_index and a.target_label == b.target_label
            and [tuple(x) for x in a.boxes] == [tuple(x) for x in b.boxes]
            and [tuple(x) for x in a.points] == [tuple(x) for x in b.points]
            and list(a.point_labels) == list(b.point_labels))


def show_prompt(prompt: Prompt, image: Image, boxes: Shapes, points: Points) -> None:
    """Replace the contents of the prompt layers with ``prompt`` (on its slice)."""
    index = None if layer_kind(image) == "image" else prompt.slice_index
    boxes.data = []
    if prompt.boxes:
        rects = [_from_image_coords(boxes, image, box_vertices(b, index)) for b in prompt.boxes]
        boxes.add_rectangles(rects, edge_color=BOX_COLOR, face_color="transparent")
    coords = np.array([[float(y), float(x)] for x, y in prompt.points]).reshape(-1, 2)
    if index is not None:
        coords = np.column_stack([np.full(len(coords), float(index)), coords])
    default = int(points.feature_defaults["label"].iloc[0]) if "label" in points.feature_defaults else 1
    points.data = _from_image_coords(points, image, coords) if len(coords) else np.empty((0, points.ndim))
    points.features = {"label": np.asarray(prompt.point_labels, dtype=int)}
    points.feature_defaults["label"] = default
    points.refresh_colors(update_color_mapping=False)


# ---------------------------------------------------------------------------
# result layers
# ---------------------------------------------------------------------------

def prediction_layer_name(target_label: int) -> str:
    return f"prediction [label {int(target_label)}]"


def _label_dtype(value: int) -> type:
    return np.uint8 if value < 256 else np.int32


def find_layer(viewer: Any, name: str, kind: type, shape: tuple[int, ...]) -> Any:
    if name in viewer.layers:
        layer = viewer.layers[name]
        if isinstance(layer, kind) and tuple(layer.data.shape) == tuple(shape):
            return layer
    return None


def _source_geometry(image: Image) -> dict[str, Any]:
    """The reader's ``kind`` and file ``geometry`` of ``image``, for saving a prediction."""
    source = image.metadata if isinstance(image.metadata, dict) else {}
    return {key: source[key] for key in ("kind", "geometry") if key in source}


def write_prediction(
    viewer: Any,
    image: Image,
    target_label: int,
    mask: np.ndarray,
    *,
    index: int | None = None,
    metadata: dict[str, Any] | None = None,
) -> Labels:
    """Put ``mask`` (whole, or slice ``index`` of it) into the target's prediction layer.

    The layer (:func:`prediction_layer_name`) holds ``target_label`` where the
    mask is set; it is created with the image's transform or, when it exists,
    its data are replaced (a slice: only that slice).
    """
    shape = spatial_shape(image)
    name = prediction_layer_name(target_label)
    mask = np.asarray(mask, dtype=bool)
    layer = find_layer(viewer, name, Labels, shape)
    meta = {"role": "prediction", "target_label": int(target_label), "image": image.name,
            **_source_geometry(image), **(metadata or {})}
    value = int(target_label)
    if layer is None:
        data = np.zeros(shape, dtype=_label_dtype(value))
    else:
        data = np.array(layer.data, copy=True)
    if index is None:
        if mask.shape != shape:
            raise ValueError(f"prediction shape {mask.shape} does not match the image's {shape}")
        data[...] = 0
        data[mask] = value
    else:
        data[index] = 0
        data[index][mask] = value
    if layer is None:
        layer = Labels(data, name=name, metadata=meta, opacity=0.6, **_transform_kwargs(image))
        return viewer.add_layer(layer)
    layer.metadata.update(meta)
    layer.data = data
    return layer


def overlay_colormap() -> DirectLabelColormap:
    """TP / FP / FN colours (:data:`OVERLAY_COLORS`), everything else transparent."""
    colors: dict[Any, Any] = {None: "transparent", 0: "transparent"}
    colors.update(OVERLAY_COLORS)
    return DirectLabelColormap(color_dict=colors)


def overlay_layer_name(target_label: int | None) -> str:
    return "TP/FP/FN" if target_label is None else f"TP/FP/FN [label {int(target_label)}]"


def write_overlay(viewer: Any, reference: Layer, overlay: np.ndarray, target_label: int | None) -> Labels:
    """Create or replace the TP/FP/FN Labels layer (fixed colours) over ``reference``'s transform."""
    name = overlay_layer_name(target_label)
    layer = find_layer(viewer, name, Labels, overlay.shape)
    if layer is None:
        layer = Labels(overlay, name=name, colormap=overlay_colormap(), opacity=0.7,
                       metadata={"role": "overlay", "target_label": target_label},
                       scale=tuple(reference.scale), translate=tuple(reference.translate))
        return viewer.add_layer(layer)
    layer.data = overlay
    return layer


__all__ = [
    "BOX_COLOR",
    "OVERLAY_COLORS",
    "POINT_COLORS",
    "TOGGLE_KEY",
    "box_from_vertices",
    "box_vertices",
    "current_index",
    "go_to_index",
    "layer_kind",
    "make_box_layer",
    "make_point_layer",
    "new_box_layer",
    "new_point_layer",
    "overlay_colormap",
    "prediction_layer_name",
    "prompt_from_layers",
    "prompt_slices",
    "same_geometry",
    "show_prompt",
    "spatial_shape",
    "to_image_coords",
    "toggle_point_label",
    "write_overlay",
    "write_prediction",
]
