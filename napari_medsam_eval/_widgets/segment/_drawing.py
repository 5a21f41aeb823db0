"""Which layers the user draws prompts in, and the polarity of the next point (Segment widget).

A Shapes or Points layer the user makes with napari's own buttons is a prompt
layer as soon as it is the active layer (of the image's dimensionality). The
polarity of a point is chosen *before* it is placed (the widget's *next point*
buttons, or key ``T`` on the point layer), and the points' colours show it
(white positive, black negative, each ringed in the other; :mod:`._prompt_points`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from magicgui.widgets import ComboBox, RadioButtons
from napari.layers import Points, Shapes
from napari.utils.notifications import show_warning

from napari_medsam_eval.core.prompt import Prompt

from napari_medsam_eval._widgets.common import _prompt_points

if TYPE_CHECKING:
    import napari

    from napari_medsam_eval.session.session import Session

POLARITIES = {"positive": 1, "negative": 0}
BOX_ONLY_HINT = ("{model} was trained on boxes: points alone give poor masks. Draw a box around the object "
                 "(points are used as given).")


def polarity_control() -> RadioButtons:
    return RadioButtons(label="next point", choices=list(POLARITIES), value="positive", orientation="horizontal",
                        tooltip="the label of the next point you place: positive (white) or negative (black); "
                                f"key {_prompt_points.TOGGLE_KEY.upper()} switches")


def warn_points(session: "Session", prompt: Prompt) -> None:
    """Points with a model trained on boxes (LiteMedSAM): say so; a single point gives a few pixels."""
    if prompt.points and getattr(session.backend, "box_trained", False):
        show_warning(BOX_ONLY_HINT.format(model=session.model_name))


class DrawnLayers(Protocol):
    """The controls :func:`follow_drawing` keeps on the layers drawn in (the image section's)."""

    viewer: "napari.viewer.Viewer"
    image_layer: ComboBox
    box_layer: ComboBox
    point_layer: ComboBox
    polarity: RadioButtons
    native: Any

    @property
    def busy(self) -> bool: ...

    def reset_choices(self) -> None: ...


def follow_drawing(widget: DrawnLayers) -> None:
    """Keep ``widget``'s prompt layers on the layers the user draws in, and its polarity on the point layer."""
    viewer = widget.viewer

    def on_active(_event: Any = None) -> None:
        active, image = viewer.layers.selection.active, widget.image_layer.value
        if widget.busy or image is None or not isinstance(active, (Shapes, Points)) or active.ndim != image.ndim:
            return
        combo = widget.box_layer if isinstance(active, Shapes) else widget.point_layer
        if combo.value is not active:
            widget.reset_choices()
            combo.value = active

    def on_key(points: Points) -> None:
        new = _prompt_points.toggle_point_label(points)
        if new is not None:
            widget.polarity.value = next(name for name, value in POLARITIES.items() if value == new)

    def apply(_value: Any = None) -> None:
        points = widget.point_layer.value
        if points is None:
            return
        _prompt_points.adopt_point_layer(points)
        _prompt_points.set_next_point_label(points, POLARITIES[widget.polarity.value])
        points.bind_key(_prompt_points.TOGGLE_KEY, on_key, overwrite=True)

    widget.polarity.changed.connect(apply)
    widget.point_layer.changed.connect(apply)
    viewer.layers.selection.events.active.connect(on_active)
    widget.native.destroyed.connect(lambda *_a: viewer.layers.selection.events.active.disconnect(on_active))


__all__ = ["BOX_ONLY_HINT", "DrawnLayers", "POLARITIES", "follow_drawing", "polarity_control", "warn_points"]
