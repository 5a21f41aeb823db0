"""One canvas, composed: a *view* declares its layers by role, and this module puts them on the canvas.

Every dock used to add and style its own layers, so z-order was the order of creation, a reused layer stayed
where it had been (an overlay under a colonoscopy frame drew nothing) and six colours could sit on one small
object with nothing to name them. Now a dock says *which view* it opens for *which image* and hands over the
layers by role (:func:`compose`); the composer alone

* orders them: the view's layers directly above the image they belong to, in the view's order, its subject on
  top (a second image gets its own overlay, above that image);
* shows and hides: the layers of ours (a ``metadata['role']`` of :data:`ROLES`, or an opened row's) that go with
  the image and are not in the view are hidden; a user's own layers (no role) are never touched;
* styles by role, from the one palette (:mod:`napari_medsam_eval.core.palette`), with the outline width and the
  fill's opacity chosen from the object's size on screen (:func:`size_style`): a 20-pixel hippocampus gets a
  one-pixel outline without the dark rings, and a fill that shows;
* names every colour it shows in a legend on the canvas (napari canvas text overlays, top left, one line a
  colour, written in that colour): no colour on screen that the legend does not name, at most three colour roles
  a view (more are shown one view at a time: *why: too much* and *why: too little*, *sensitivity* and *worst
  run*). The prompt (a yellow box, white and black points) is a marker, named whenever it is shown.

A comparison that lands by itself (the Compare dock recomputing after an edit) takes over only the plain
views (:data:`YIELDING`): it never hides a pair of runs, a variant or an agreement map the user opened
(:func:`offer`). :func:`views_of` lists the views an image's layers allow; the Compare dock's *canvas* choice
switches between them (:func:`show_view`).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
from napari.layers import Image, Layer
from psygnal import Signal

from napari_medsam_eval._widgets.common._canvas_roles import OPENED_KEY, ROLES, VIEWS, YIELDING, legend_of
from napari_medsam_eval._widgets.common._canvas_style import show_legend, style_layer
from napari_medsam_eval._widgets.common._removal import RETIRED_KEY

# ---------------------------------------------------------------------------------------------------------------
# which layers are ours, and which image each belongs to
# ---------------------------------------------------------------------------------------------------------------

def role_of(layer: Layer) -> str | None:
    """The composer's role of ``layer`` (None: not ours, or retired)."""
    meta = layer.metadata if isinstance(layer.metadata, dict) else {}
    if meta.get(RETIRED_KEY) is not None:
        return None
    role = meta.get("role")
    if role == "prediction" and meta.get(OPENED_KEY) == "prediction_b":
        return "prediction_b"
    return role if role in ROLES else None


def is_ours(layer: Layer) -> bool:
    """Whether the composer may hide ``layer``: one of our roles, or an opened row's (a user's own layer: never)."""
    meta = layer.metadata if isinstance(layer.metadata, dict) else {}
    return meta.get("role") in ROLES or meta.get(OPENED_KEY) not in (None, "image")


def spatial(layer: Layer) -> tuple[int, ...]:
    shape = tuple(int(s) for s in np.shape(layer.data))
    return shape[:-1] if getattr(layer, "rgb", False) else shape


def image_of(viewer: Any, layer: Layer) -> Image | None:
    """The image ``layer`` belongs to: the one its ``metadata['image']`` names, else the longest image name its
    own name starts with, else the nearest image below it of its shape (None when there is none)."""
    images = [x for x in viewer.layers if isinstance(x, Image) and not is_ours(x)]  # (an agreement map is ours)
    meta = layer.metadata if isinstance(layer.metadata, dict) else {}
    named = [x for x in images if x.name == meta.get("image")]
    if named:
        return named[0]
    prefixed = [x for x in images if layer.name.startswith(f"{x.name} ")]
    if prefixed:
        return max(prefixed, key=lambda x: len(x.name))
    shape = spatial(layer)
    fits = [x for x in images if spatial(x) == shape]
    below = [x for x in fits if viewer.layers.index(x) < viewer.layers.index(layer)] if layer in viewer.layers else []
    return (below or fits or [None])[-1]


def belongs(viewer: Any, layer: Layer, image: Image) -> bool:
    """Whether ``layer`` goes with ``image`` (:func:`image_of`)."""
    return image_of(viewer, layer) is image


# ---------------------------------------------------------------------------------------------------------------
# the state of one viewer's canvas
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class Canvas:
    """One viewer's canvas: the view of each image (by image name) and its layers, and the legend shown."""

    views: dict[str, str] = field(default_factory=dict)
    layers: dict[str, dict[str, "weakref.ref[Layer]"]] = field(default_factory=dict)
    image: str | None = None
    legend: tuple[tuple[str, str], ...] = ()


class _Changed:
    """The composer's signal: a view was composed (viewer, image name, view name); the canvas choices follow."""

    composed = Signal(object, str, str)


CHANGED = _Changed()
_CANVASES: dict[int, tuple["weakref.ref[Any]", Canvas]] = {}


def canvas_of(viewer: Any) -> Canvas:
    """``viewer``'s :class:`Canvas` (made on the first ask)."""
    key = id(viewer)
    entry = _CANVASES.get(key)
    if entry is None or entry[0]() is not viewer:
        entry = _CANVASES[key] = (weakref.ref(viewer, lambda ref: _CANVASES.pop(key, None)), Canvas())
    return entry[1]


def current_view(viewer: Any, image: Image | str) -> str | None:
    """The view shown for ``image`` (None before any)."""
    return canvas_of(viewer).views.get(image if isinstance(image, str) else image.name)


# ---------------------------------------------------------------------------------------------------------------
# composing
# ---------------------------------------------------------------------------------------------------------------

def compose(viewer: Any, view: str, image: Image, layers: Mapping[str, Layer | None], *,
            words: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """Show ``view`` of ``image``: ``layers`` (by role; None and absent ones skipped) above ``image`` in the view's
    order, styled by role and by the object's size on screen, the rest of ours that goes with ``image`` hidden,
    the legend written. ``words``: a role's own words for its entry ("variant only" -> "true box on every slice
    only"). Returns the legend, ``(words, colour)`` a line."""
    spec = VIEWS[view]
    present = {role: layer for role, layer in layers.items()
               if layer is not None and role in spec.roles and layer in viewer.layers}
    keep = {id(layer) for layer in present.values()} | {id(image)}
    for layer in list(viewer.layers):
        if id(layer) not in keep and is_ours(layer) and layer.visible and belongs(viewer, layer, image):
            layer.visible = False
    stacked = [present[role] for role in spec.roles if role in present]
    stack_above(viewer, image, stacked)
    for role, layer in present.items():
        style_layer(viewer, layer, role, view)
        if not layer.visible:
            layer.visible = True
    if not image.visible:
        image.visible = True
    legend = legend_of(view, present, words or {})
    show_legend(viewer, legend)
    state = canvas_of(viewer)
    state.views[image.name] = view
    state.layers[image.name] = {role: weakref.ref(layer) for role, layer in present.items()}
    state.image, state.legend = image.name, tuple(legend)
    CHANGED.composed.emit(viewer, image.name, view)
    return legend


def offer(viewer: Any, view: str, image: Image | None, layers: Mapping[str, Layer | None], **kwargs: Any) -> bool:
    """A view that landed by itself (a comparison recomputed after an edit): composed when ``image`` shows no
    view yet or one of :data:`YIELDING`; else its layers are hidden (the user's pair, variant or map stays).
    Whether it was composed."""
    if image is None:
        return False
    shown = current_view(viewer, image)
    if shown is None or shown in YIELDING or shown == view:
        compose(viewer, view, image, layers, **kwargs)
        return True
    for role, layer in layers.items():
        if layer is not None and role not in VIEWS[shown].roles and layer.visible:
            layer.visible = False
    return False


def stack_above(viewer: Any, image: Layer, stacked: list[Layer]) -> None:
    """Put ``stacked`` directly above ``image`` in the layer list, in this order (the last on top); nothing moves
    when they are there already (a move redraws and tells every dock)."""
    layers = viewer.layers
    if image not in layers:
        return
    order = [layers.index(image), *(layers.index(layer) for layer in stacked)]
    if all(b == a + 1 for a, b in zip(order, order[1:])):
        return
    with layers.batched_update():  # one scene-graph update for all the moves
        previous = image
        for layer in stacked:  # each right above the one before (napari's move inserts before its destination)
            index, after = layers.index(layer), layers.index(previous) + 1
            if index != after:
                layers.move(index, after)
            previous = layer


def views_of(viewer: Any, image: Image) -> list[str]:
    """The views ``image``'s layers allow now (a view with its subject's role among them)."""
    roles = {role_of(layer) for layer in viewer.layers if is_ours(layer) and belongs(viewer, layer, image)}
    return [name for name, spec in VIEWS.items() if _subject(name) in roles]


def _subject(view: str) -> str:
    roles = [role for role in VIEWS[view].roles if not ROLES[role].marker]
    return roles[-1]


def layers_for(viewer: Any, view: str, image: Image, **chosen: Layer | None) -> dict[str, Layer]:
    """The layers of ``view`` for ``image``: each role's ``chosen`` layer, else the topmost of that role that goes
    with ``image``."""
    found: dict[str, Layer] = {role: layer for role, layer in chosen.items() if layer is not None}
    for layer in reversed(list(viewer.layers)):
        role = role_of(layer)
        if role in VIEWS[view].roles and role not in found and belongs(viewer, layer, image):
            found[role] = layer
    return found


def show_view(viewer: Any, view: str, image: Image, **chosen: Layer | None) -> list[tuple[str, str]]:
    """Compose ``view`` of ``image`` from the layers there are for it now (:func:`layers_for`)."""
    return compose(viewer, view, image, layers_for(viewer, view, image, **chosen))


__all__ = ["CHANGED", "Canvas", "OPENED_KEY", "ROLES", "VIEWS", "YIELDING", "belongs", "canvas_of", "compose",
           "current_view", "image_of", "is_ours", "layers_for", "offer", "role_of", "show_view", "stack_above",
           "views_of"]
