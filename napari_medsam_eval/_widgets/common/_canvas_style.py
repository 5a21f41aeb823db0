"""How the canvas composer draws: a role's look by the object's size on screen, and the legend on the canvas.

A contour napari draws is data pixels wide, and :class:`._outlined_labels.OutlinedLabels` adds a dark ring of a
data pixel each side: on a hippocampus (35 x 50 voxels, each some 15 screen pixels when it fills the canvas) that
was four data pixels of line over a structure ten wide. :func:`size_style` gives a small object one data pixel of
outline, no rings and a stronger fill. The legend is napari canvas text overlays, top left, one a colour, each
line in its colour on a dark box (:func:`show_legend`); :func:`legend_shown` reads it back.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from napari.layers import Labels, Layer

from napari_medsam_eval.core.palette import rgb_to_hex
from napari_medsam_eval.evaluation.error_parts import PART_VALUES
from napari_medsam_eval._widgets.common._canvas_roles import LEGEND_BOX, LEGEND_FONT, LEGEND_KEY, ROLES, WHY_PARTS

#: an object whose smaller side is under this many screen pixels is small: a one-pixel outline, no dark rings
SMALL_ON_SCREEN = 120
#: fill opacity of the ground truth: an object large on screen, and a small one (its fill must show)
FILL_OPACITY = (0.45, 0.65)


def screen_pixels_per_voxel(viewer: Any, layer: Layer) -> float:
    """How many screen pixels one of ``layer``'s data pixels spans now (the camera's zoom times its scale)."""
    scene = getattr(viewer, "scene", None)  # napari 0.9: the camera is the scene's (viewer.camera deprecated)
    zoom = float((scene.camera if scene is not None else viewer.camera).zoom)
    scale = np.asarray(layer.scale, dtype=float)[-2:]
    return zoom * float(np.min(np.abs(scale))) if scale.size else zoom


def object_side(mask: np.ndarray) -> int:
    """The object's smaller side in data pixels, on its largest slice (0 when empty)."""
    mask = np.asarray(mask) != 0
    if not mask.any():
        return 0
    plane = mask.reshape((-1,) + mask.shape[-2:]).sum(axis=0) > 0 if mask.ndim > 2 else mask
    rows, cols = np.flatnonzero(plane.any(axis=1)), np.flatnonzero(plane.any(axis=0))
    return int(min(rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1))


def size_style(side_voxels: int, pixels_per_voxel: float) -> tuple[int, bool, float]:
    """``(outline width in data pixels, dark rings, fill opacity)`` for an object ``side_voxels`` across drawn at
    ``pixels_per_voxel``: a small object on screen gets one data pixel of outline, no rings (they would cover it)
    and a stronger fill; a large one two pixels, rings (its outline shows on any image), the usual fill."""
    small = side_voxels * pixels_per_voxel < SMALL_ON_SCREEN or side_voxels < 24
    return (1, False, FILL_OPACITY[1]) if small else (2, True, FILL_OPACITY[0])


def style_layer(viewer: Any, layer: Layer, role: str, view: str) -> None:
    """Give ``layer`` its role's look in ``view`` (colours from the palette; outline and opacity by size)."""
    if not isinstance(layer, Labels):
        return
    side = object_side(layer.data) if role in ("ground_truth", "prediction", "worst_run") else 0
    width, rings, fill = size_style(side, screen_pixels_per_voxel(viewer, layer))
    if role in ("ground_truth", "prediction"):
        _palette_colours(layer, role)
    if role == "ground_truth":
        if abs(layer.opacity - fill) > 1e-6:
            layer.opacity = fill
    elif role in ("prediction", "worst_run"):
        if layer.contour != width:
            layer.contour = width
        if hasattr(layer, "rings") and layer.rings != rings:
            layer.rings = rings
    elif any(value is not None for value, _words, _color in ROLES[role].colors):
        _colour_values(layer, role, view)


def _palette_colours(layer: Labels, role: str) -> None:
    """The palette's colours for a truth (cool fills) or a prediction (warm outlines), whatever the layer was made
    with (a user's prediction layer given the role: napari's random colours named nothing in the legend)."""
    from napari_medsam_eval._layer_style import ground_truth_colormap, prediction_colormap
    from napari_medsam_eval.core.palette import GROUND_TRUTH_PALETTE, PREDICTION_PALETTE

    first = (GROUND_TRUTH_PALETTE if role == "ground_truth" else PREDICTION_PALETTE)[0]
    have = layer.get_color(1)
    if have is None or rgb_to_hex(have) != first.upper():
        layer.colormap = ground_truth_colormap() if role == "ground_truth" else prediction_colormap()


def _colour_values(layer: Labels, role: str, view: str) -> None:
    """The role's colour for each of its values (the palette's, whatever the layer was made with); the error parts
    outside ``view`` (why: too much / too little) transparent."""
    shown = {PART_VALUES[part] for part in WHY_PARTS[view]} if role == "error_parts" and view in WHY_PARTS else None
    colors: dict[Any, str] = {None: "transparent", 0: "transparent"}
    colors.update({value: color if shown is None or value in shown else "transparent"
                   for value, _words, color in ROLES[role].colors})
    current = getattr(layer.colormap, "color_dict", None)
    if current is not None and all(_hexes(current, colors)):
        return
    layer.colormap = colors


def _hexes(current: Mapping[Any, Any], wanted: Mapping[Any, str]) -> list[bool]:
    from napari.utils.colormaps.standardize_color import transform_color
    out = []
    for key, color in wanted.items():
        have = current.get(key)
        out.append(have is not None and np.allclose(np.asarray(have, dtype=float)[:4],
                                                    transform_color(color)[0], atol=1e-3))
    return out


#: legend lines made ahead, each in a turn of its own, when a dock opens (:func:`warm_legend`): napari builds a
#: text visual per line (about 80 ms each here) and vispy compiles its shaders at its first draw (about 100 ms);
#: made all at once when the first view opened, they froze an opened row's viewer 0.86 s
WARM_LINES = 4


def warm_legend(viewer: Any, owner: Any) -> None:
    """Make :data:`WARM_LINES` blank legend lines on ``viewer``'s canvas, each in a turn of the event loop of its
    own (``owner``: the Qt object the turns belong to), so that the first view's legend only writes text."""
    from napari_medsam_eval._turns import soon

    for index in range(WARM_LINES):
        soon(owner, lambda index=index: _line(viewer, index))


def _line(viewer: Any, index: int) -> Any:
    """Legend line ``index`` (made blank where missing: no text, no box, drawn as nothing)."""
    from napari.components.overlays import TextOverlay

    overlays, key = viewer.canvas.overlays, f"{LEGEND_KEY}{index}"
    if key not in overlays:
        overlays[key] = TextOverlay(text="", position="top_left", font_size=LEGEND_FONT, box=False,
                                    box_color=LEGEND_BOX, visible=True)
    return overlays[key]


def show_legend(viewer: Any, legend: list[tuple[str, str]]) -> None:
    """Write ``legend`` on the canvas, top left, a line a colour in that colour; the lines past it are blanked (kept,
    so a later legend reuses their visuals)."""
    for index, (text, color) in enumerate(legend):
        overlay, line = _line(viewer, index), f"\u25a0 {text}"
        if overlay.text != line:
            overlay.text = line
        overlay.color = color
        if not overlay.box:
            overlay.box = True
        if not overlay.visible:
            overlay.visible = True
    index = len(legend)
    while f"{LEGEND_KEY}{index}" in viewer.canvas.overlays:
        overlay = viewer.canvas.overlays[f"{LEGEND_KEY}{index}"]
        if overlay.text:
            overlay.text, overlay.box = "", False
        index += 1


def legend_shown(viewer: Any) -> list[tuple[str, str]]:
    """The legend on ``viewer``'s canvas now: ``(words, '#RRGGBB')`` of each written line, top down."""
    overlays = viewer.canvas.overlays
    shown, index = [], 0
    while f"{LEGEND_KEY}{index}" in overlays:
        overlay = overlays[f"{LEGEND_KEY}{index}"]
        if overlay.visible and overlay.text:
            shown.append((overlay.text.removeprefix("\u25a0 "), rgb_to_hex(overlay.color)))
        index += 1
    return shown


__all__ = ["FILL_OPACITY", "SMALL_ON_SCREEN", "WARM_LINES", "legend_shown", "object_side", "screen_pixels_per_voxel", "show_legend",
           "size_style", "style_layer", "warm_legend"]
