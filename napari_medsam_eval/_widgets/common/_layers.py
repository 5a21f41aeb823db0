"""napari layers without Qt: image geometry, viewer slices, picking layers by their role.

Layers made by this plugin carry a ``metadata['role']``: ``ground_truth``
(the reader's label layers), ``prediction`` (with ``target_label``),
``overlay``, ``prompt_boxes`` / ``prompt_points`` (with the ``image`` they
prompt). The widgets pick their layers by role (:func:`with_role`), so a
layer added by one widget is found by another without either touching the
other's controls.

Coordinates: napari keeps a layer's vertices and points in its *data*
coordinates (``z, y, x``; a pixel's centre is at an integer index). Layers
made for an image get its scale and translate (:func:`transform_kwargs`), so
their data coordinates are the image's pixel indices; a layer with another
transform is mapped through world coordinates (:func:`to_image_coords`).
"""
from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable

import numpy as np
from napari.layers import Image, Labels, Layer

from napari_medsam_eval.core.case import infer_kind
from napari_medsam_eval.core.errors import InputError
from napari_medsam_eval._widgets.common._removal import RETIRED_KEY


def spatial_shape(layer: Layer) -> tuple[int, ...]:
    """The layer's shape without its colour axis."""
    shape = tuple(int(s) for s in layer.data.shape)
    return shape[:-1] if getattr(layer, "rgb", False) else shape


def layer_kind(layer: Layer) -> str:
    """``volume``, ``video`` or ``image``: the reader's ``metadata['kind']`` when it fits, else guessed."""
    hint = layer.metadata.get("kind") if isinstance(layer.metadata, dict) else None
    shape, rgb = tuple(layer.data.shape), bool(getattr(layer, "rgb", False))
    try:
        return infer_kind(shape, rgb, hint)
    except ValueError:
        return infer_kind(shape, rgb)


def transform_kwargs(image: Layer) -> dict[str, Any]:
    """The ``scale`` and ``translate`` of ``image``, for a layer drawn over it."""
    return {"scale": tuple(image.scale), "translate": tuple(image.translate)}


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


def from_image_coords(layer: Layer, image: Layer, coords: np.ndarray) -> np.ndarray:
    """``coords`` in ``image``'s data coordinates -> ``layer``'s (the inverse of :func:`to_image_coords`)."""
    coords = np.asarray(coords, dtype=np.float64).reshape(-1, image.ndim)
    if _same_transform(layer, image):
        return coords
    return np.array([layer.world_to_data(image.data_to_world(c)) for c in coords]).reshape(-1, layer.ndim)


def current_index(viewer: Any, layer: Layer) -> int | None:
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
    axis = viewer.dims.ndim - layer.ndim  # the dims axis of the layer's first data axis
    rng = viewer.dims.range[axis]
    step = int(round((world - rng.start) / rng.step)) if rng.step else 0
    viewer.dims.set_current_step(axis, step)


# ---------------------------------------------------------------------------
# finding and choosing layers
# ---------------------------------------------------------------------------

def add_inactive(viewer: Any, layer: Layer) -> Layer:
    """Add ``layer`` without making it the active layer: napari would rebuild the layer controls for
    it (about 60 ms a layer here, in the same turn of the event loop as the add itself)."""
    layers = viewer.layers
    activate = getattr(layers, "_activate_on_insert", None)  # napari's switch; absent: the normal add
    if activate is not None:
        layers._activate_on_insert = False
    try:
        return viewer.add_layer(layer)
    finally:
        if activate is not None:
            layers._activate_on_insert = activate


def find_layer(viewer: Any, name: str, kind: type, shape: tuple[int, ...]) -> Any:
    """The layer called ``name`` when it is a ``kind`` of data ``shape``, else None."""
    if name in viewer.layers:
        layer = viewer.layers[name]
        if isinstance(layer, kind) and tuple(layer.data.shape) == tuple(shape):
            return layer
    return None


def with_role(layers: Any, role: str, kind: type = Layer, shape: tuple[int, ...] | None = None,
              **metadata: Any) -> Any:
    """The first ``kind`` layer with ``metadata['role'] == role`` (and these ``metadata`` values,
    data ``shape``); None when there is none."""
    for layer in layers:
        meta = layer.metadata
        if (isinstance(layer, kind) and meta.get("role") == role and all(meta.get(k) == v for k, v in metadata.items())
                and (shape is None or tuple(layer.data.shape) == tuple(shape))):
            return layer
    return None


def belongs_to(layer: Layer | None, image: Layer, role: str) -> bool:
    """Whether ``layer`` can serve ``image`` in ``role``: a ground truth of its spatial shape; a prompt layer
    made for it (``metadata['image']``) or a user's own layer (no ``image``) of its dimensionality."""
    if layer is None:
        return False
    if role == "ground_truth":
        return isinstance(layer, Labels) and tuple(layer.data.shape) == spatial_shape(image)
    owner = layer.metadata.get("image")
    return layer.ndim == image.ndim and (owner is None or owner == image.name)


def layers_of_image(layers: Any, image: Layer, chosen: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
    """The ground truth, box and point layers for ``image``: each ``chosen`` one that belongs to it, else
    the layer with its role made for it (a ground truth named after it first), else None."""
    roles = ("ground_truth", "prompt_boxes", "prompt_points")
    picked = []
    for role, layer in zip(roles, chosen):
        if belongs_to(layer, image, role):
            picked.append(layer)
        elif role == "ground_truth":
            fits = [x for x in layers if x.metadata.get("role") == role and belongs_to(x, image, role)]
            named = [x for x in fits if x.name.startswith(image.name)]
            picked.append((named or fits or [None])[0])
        else:
            picked.append(with_role(layers, role, image=image.name))
    return picked[0], picked[1], picked[2]


def layer_choices(viewer: Any, kind: type, exclude_roles: tuple[str, ...] = ()) -> Callable[..., list]:
    """A magicgui ``choices`` callable: the viewer's ``kind`` layers, by name, but those with ``exclude_roles``
    and the retired ones (:func:`._removal.retire_layers`)."""
    def choices(_widget: Any = None) -> list[tuple[str, Any]]:
        return [(layer.name, layer) for layer in viewer.layers if isinstance(layer, kind)
                and layer.metadata.get("role") not in exclude_roles and RETIRED_KEY not in layer.metadata]
    return choices


def follow_viewer(widget: Any, connections: list[tuple[Any, Callable]],
                  on_close: Callable[[], Any] | None = None) -> None:
    """Connect each ``(event, callback)`` for as long as ``widget`` lives: once its Qt widget is
    destroyed they are disconnected and ``on_close`` runs. Bound methods are held weakly, so the Qt
    connection keeps nothing alive (a widget collected first is simply forgotten)."""
    for event, callback in connections:
        event.connect(callback)
    refs = [(event, _weak(callback)) for event, callback in connections]
    close = _weak(on_close) if on_close is not None else None

    def disconnect(*_args: Any) -> None:
        for event, ref in refs:
            if (callback := ref()) is not None:
                event.disconnect(callback)
        refs.clear()
        if close is not None and (callback := close()) is not None:
            callback()
    widget.native.destroyed.connect(disconnect)


def _weak(callback: Callable) -> Callable[[], Callable | None]:
    return weakref.WeakMethod(callback) if inspect.ismethod(callback) else (lambda: callback)


def checked_image(image: Image | None) -> Image:
    """``image``; ValueError when there is none or it is multiscale."""
    if image is None:
        raise InputError("choose an image layer first")
    if getattr(image, "multiscale", False):
        raise InputError(f"{image.name}: multiscale images are not supported")
    return image


def image_args(image: Image) -> tuple[Any, dict[str, Any]]:
    """``(data, keyword arguments of Session.set_image)`` of an image layer."""
    metadata = image.metadata if isinstance(image.metadata, dict) else {}
    return image.data, {"kind": layer_kind(image), "rgb": bool(image.rgb), "modality": metadata.get("modality"),
                        "image_id": image.name}


def label_map_for(image: Image, labels: Labels | None) -> np.ndarray:
    """The ground-truth array of ``labels`` for ``image``; ValueError when there is none or its shape differs."""
    if labels is None:
        raise InputError("choose a ground-truth Labels layer first")
    shape = spatial_shape(image)
    if tuple(labels.data.shape) != shape:
        raise InputError(f"ground truth {labels.name} has shape {tuple(labels.data.shape)}, image {image.name} {shape}")
    return np.asarray(labels.data)


__all__ = ["add_inactive", "belongs_to", "checked_image", "layers_of_image", "current_index", "find_layer", "follow_viewer", "from_image_coords", "go_to_index",
           "image_args", "label_map_for", "layer_choices", "layer_kind", "spatial_shape",
           "to_image_coords",
           "transform_kwargs", "with_role"]
