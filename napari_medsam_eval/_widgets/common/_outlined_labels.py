"""A Labels layer whose contours carry a dark outline, so a contour shows on any image.

A prediction is drawn as a contour in a warm colour (:mod:`napari_medsam_eval._layer_style`); on an
endoscopy frame the orange contour and the warm mucosa under it are nearly one colour. napari draws a
contour alone; :class:`OutlinedLabels` adds a ring of :data:`OUTLINE_PIXELS` data pixel on each side of
it in :data:`OUTLINE_COLOR` (near black), as map labels keep a halo: the bright line shows on dark tissue,
the dark ring on bright or warm tissue. Only what is drawn changes: the layer's data, its values under the
mouse and what is saved are the labels themselves. Without a contour (``contour`` 0) it draws as any Labels
layer; so does a layer whose colormap is not a direct one.

The ring is drawn as one more label value, the largest of the data's type (:func:`ring_value`), which no
mask of ours holds: one-byte data is kept as ``uint16`` (so that 255 stays a label), and every colormap the
layer is given gets the ring's colour at that value.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from napari.layers import Labels
from napari.utils.colormaps import DirectLabelColormap
from scipy import ndimage

from napari_medsam_eval.core.palette import OUTLINE

#: the ring's colour (near black: a pure black ring on a black background would look like a gap)
OUTLINE_COLOR = OUTLINE
#: the ring's width on each side of the contour, in data pixels
OUTLINE_PIXELS = 1


def ring_value(dtype: Any) -> int:
    """The value the ring is drawn as in data of ``dtype``: its largest."""
    return int(np.iinfo(np.dtype(dtype)).max)


def outline_ring(contours: np.ndarray, background: int, width: int = OUTLINE_PIXELS) -> np.ndarray:
    """Where the ring goes: the background within ``width`` pixels of a contour pixel (diagonals too)."""
    drawn = contours != background
    grown = ndimage.binary_dilation(drawn, ndimage.generate_binary_structure(drawn.ndim, 2), iterations=width)
    return grown & ~drawn


class OutlinedLabels(Labels):
    """A :class:`napari.layers.Labels` whose contours are drawn with a dark ring around them."""

    #: whether the dark rings are drawn (the canvas composer turns them off for an object small on screen, where
    #: a ring a data pixel wide would cover it)
    _rings: bool = True

    @property
    def rings(self) -> bool:
        return self._rings

    @rings.setter
    def rings(self, value: bool) -> None:
        if bool(value) != self._rings:
            self._rings = bool(value)
            self.refresh()

    @property
    def _type_string(self) -> str:
        """``labels``, as napari's own: its menus, icons, writers and layer data tuples go by this name."""
        return "labels"

    def _ensure_int_labels(self, data: Any) -> Any:
        data = super()._ensure_int_labels(data)
        if isinstance(data, np.ndarray) and data.dtype.itemsize == 1:
            return data.astype(np.uint16)  # room for the ring's value above every label
        return data

    @Labels.data.setter
    def data(self, data: Any) -> None:
        Labels.data.fset(self, data)
        if isinstance(self._colormap, DirectLabelColormap):
            self._set_colormap(self._colormap)  # the ring's value follows the data's type

    def _set_colormap(self, colormap: Any) -> None:
        if isinstance(colormap, dict):
            colormap = DirectLabelColormap(color_dict=colormap)
        if isinstance(colormap, DirectLabelColormap) and hasattr(self, "_data"):
            ring = ring_value(self.data.dtype)
            if ring not in colormap.color_dict:
                colormap = DirectLabelColormap(color_dict={**colormap.color_dict, ring: OUTLINE_COLOR},
                                               use_selection=colormap.use_selection, selection=colormap.selection)
        super()._set_colormap(colormap)

    def _calculate_contour(self, labels: np.ndarray, data_slice: tuple[slice, ...]) -> np.ndarray | None:
        contours = super()._calculate_contour(labels, data_slice)
        if contours is None or not self._rings or not isinstance(self.colormap, DirectLabelColormap):
            return contours
        ring = ring_value(contours.dtype)
        if ring not in self.colormap.color_dict:
            return contours
        contours[outline_ring(contours, self.colormap.background_value)] = ring
        return contours


__all__ = ["OUTLINE_COLOR", "OUTLINE_PIXELS", "OutlinedLabels", "outline_ring", "ring_value"]
