"""The Compare widget's per-slice DSC plot: a point per slice, a cursor on the slice shown, where
propagation stopped; a click on the plot asks for the nearest slice (:func:`nearest_slice`).

Plain matplotlib on a Qt canvas, no viewer: the widget gives it the per-slice
DSC and the prediction's propagation stops, and moves its cursor. The cursor is
blitted (drawn alone over the plot's last full drawing, kept as a bitmap): moving it
with the slice shown costs a few milliseconds on the GUI thread, not a redraw of the
whole plot. The bitmap reaches the screen at the canvas's next paint (``update``, which Qt
merges with the viewer's own repaint), never through matplotlib's ``blit``: that repaints
at once, and with napari's OpenGL canvas in the same window a synchronous repaint
recomposes the whole window (50-80 ms a move, measured by ``benchmarks/responsiveness.py``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from qtpy.QtWidgets import QSizePolicy

from napari_medsam_eval.core.palette import PLOT_CURSOR, PLOT_SERIES, PLOT_STOP
from napari_medsam_eval._widgets.common._dock_layout import fixed_margins
from napari_medsam_eval._widgets.common._theme import plot_canvas, style_axes
from napari_medsam_eval.propagation.stop_words import STOP_LABELS

LINE_COLOR = PLOT_SERIES
STOP_COLOR = PLOT_STOP
#: the plot's least height in pixels (it grows with the Compare dock's result tab)
MIN_HEIGHT = 90
#: the stop markers' text size in points (readable beside the 8 pt axis labels)
STOP_FONT_PT = 9


def stop_markers(stops: Any) -> list[tuple[int, str]]:
    """(slice, rule) where each propagation direction stopped, from a prediction layer's ``stops`` metadata."""
    stops = stops if isinstance(stops, list) else []
    return [(int(s["at"]), str(s.get("reason"))) for s in stops if isinstance(s, dict) and s.get("at") is not None]


def stop_label_place(per_slice: np.ndarray, at: int, reach: int = 6) -> tuple[float, str, str]:
    """Where a stop's label goes, written across (never up the line, where a short plot cuts it): on the
    side of the line towards the middle of the plot (it stays inside), at the top or the bottom of the axes,
    whichever the curve leaves free over the ``reach`` slices the text spans; ``(y in axes fraction, va, ha)``."""
    per_slice = np.asarray(per_slice, dtype=float)
    ha = "left" if at < len(per_slice) / 2 else "right"
    span = per_slice[at: at + reach + 1] if ha == "left" else per_slice[max(at - reach, 0): at + 1]
    span = span[~np.isnan(span)]
    top_taken = int(np.count_nonzero(span > 0.7))  # DSC 0.7-1.05: the top fifth of the axes' -0.05-1.05
    bottom_taken = int(np.count_nonzero(span < 0.3))
    return (0.97, "top", ha) if top_taken <= bottom_taken else (0.03, "bottom", ha)


def _apart(labels: list[Any], axes: Any, per_slice: np.ndarray, renderer: Any) -> None:
    """A stop label that would cover another moves to the first place inside the plot, clear of the other
    labels and of the curve: a second row at its edge, the other edge's rows, each on either side of its line."""
    shown = ~np.isnan(per_slice)
    points = axes.transData.transform(np.column_stack([np.flatnonzero(shown), per_slice[shown]])) if shown.any() \
        else np.zeros((0, 2))
    inside = axes.get_window_extent(renderer)
    for index, label in enumerate(labels):
        placed = [other.get_window_extent(renderer) for other in labels[:index]]
        if not any(label.get_window_extent(renderer).overlaps(box) for box in placed):
            continue
        row = (label.get_window_extent(renderer).height + 2) / max(inside.height, 1)  # a row, in axes fraction
        ha, start, first_y = label.get_ha(), label.get_va(), label.xy[1]
        rows = [(start, 0), (start, 1), ("bottom" if start == "top" else "top", 0), ("bottom" if start == "top" else "top", 1)]
        sides = [ha, "right" if ha == "left" else "left"]
        for va, step in rows:
            for side in sides:
                _place(label, side, va, 0.03 + step * row if va == "bottom" else 0.97 - step * row)
                box = label.get_window_extent(renderer)
                covers = ((points[:, 0] >= box.x0) & (points[:, 0] <= box.x1) & (points[:, 1] >= box.y0)
                          & (points[:, 1] <= box.y1)).any()
                if (inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
                        and not covers and not any(box.overlaps(other) for other in placed)):
                    break
            else:
                continue
            break
        else:  # no place is clear: where it was put first
            _place(label, ha, start, first_y)


def _place(label: Any, ha: str, va: str, y: float) -> None:
    """Put stop label ``label`` on side ``ha`` of its line, its ``va`` edge at ``y`` (axes fraction)."""
    label.set_ha(ha)
    label.set_va(va)
    label.xyann = (3 if ha == "left" else -3, 0)
    label.xy = (label.xy[0], y)


def nearest_slice(per_slice: np.ndarray, x: float) -> int:
    """The slice nearest to ``x`` (slices with a DSC first, else any)."""
    candidates = np.flatnonzero(~np.isnan(per_slice))
    if candidates.size == 0:
        candidates = np.arange(len(per_slice))
    return int(candidates[np.argmin(np.abs(candidates - x))])


class SliceDicePlot:
    """DSC per slice; ``on_click(index)`` gets the slice nearest to a click inside the axes."""

    def __init__(self, colors: tuple[str, str], on_click: Callable[[float], Any]) -> None:
        background, self._text_color = colors
        self.figure, self.axes, self.canvas = plot_canvas(background, MIN_HEIGHT)
        self.canvas.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)  # the height its tab has left
        fixed_margins(self.figure, bottom=0.22)
        style_axes(self.axes, background, self._text_color)
        self.canvas.setToolTip("DSC of every slice (frame) with foreground; click a point to go to its slice; "
                               "the orange line is the slice shown, dotted lines where propagation stopped and why")
        self.line: Any = None
        self.per_slice = np.array([])
        self.cursor: Any = None
        #: (slice, rule) of the stops drawn
        self.stops: list[tuple[int, str]] = []
        self._on_click = on_click
        #: the plot without its cursor, as last drawn in full (None: a full drawing is due)
        self._background: Any = None
        self.canvas.mpl_connect("button_press_event", self._clicked)
        self.canvas.mpl_connect("draw_event", self._drawn)

    def show(self, per_slice: np.ndarray, stops: list[tuple[int, str]], xlabel: str) -> None:
        """Draw ``per_slice`` (NaN: no foreground), the ``stops`` and a cursor at slice 0."""
        ax = self.axes
        ax.clear()
        style_axes(ax, ax.get_facecolor(), self._text_color)
        self.per_slice = per_slice = np.asarray(per_slice, dtype=float)
        index = np.arange(len(per_slice))
        (self.line,) = ax.plot(index, per_slice, "o-", markersize=3, linewidth=1, color=LINE_COLOR, picker=5)
        self.cursor = ax.axvline(0, color=PLOT_CURSOR, linewidth=1, animated=True)  # blitted, never in a full draw
        self.stops = stops
        labels = []
        for at, reason in stops:
            ax.axvline(at, color=STOP_COLOR, linestyle=":", linewidth=1)
            y, va, ha = stop_label_place(per_slice, at)
            labels.append(ax.annotate(STOP_LABELS.get(reason, reason), (at, y), xycoords=("data", "axes fraction"),
                        xytext=(3 if ha == "left" else -3, 0), textcoords="offset points", fontsize=STOP_FONT_PT,
                        color=STOP_COLOR, va=va, ha=ha, annotation_clip=False,
                        bbox={"boxstyle": "square,pad=0.1", "facecolor": ax.get_facecolor(), "edgecolor": "none"}))
        _apart(labels, ax, per_slice, self.canvas.get_renderer())
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlim(-0.5, len(per_slice) - 0.5)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel("DSC", fontsize=8)
        self._background = None
        self.canvas.draw_idle()

    def clear(self) -> None:
        """No plot (nothing compared): an empty frame, no cursor."""
        self.axes.clear()
        style_axes(self.axes, self.axes.get_facecolor(), self._text_color)
        self.line = self.cursor = None
        self.per_slice = np.zeros(0)
        self.stops = []
        self._background = None
        self.canvas.draw_idle()

    def move_cursor(self, index: int) -> None:
        """The cursor to slice ``index``: blitted over the last full drawing (a full drawing when none is kept)."""
        if self.cursor is None:
            return
        self.cursor.set_xdata([index, index])
        if self._background is None:
            self.canvas.draw_idle()
            return
        self.canvas.restore_region(self._background)
        self._blit_cursor()

    def _drawn(self, _event: Any) -> None:
        """After a full drawing (a new plot, a resize): keep it without the cursor, then blit the cursor."""
        self._background = self.canvas.copy_from_bbox(self.figure.bbox)
        if self.cursor is not None:
            self._blit_cursor()

    def _blit_cursor(self) -> None:
        """The cursor drawn into the canvas's bitmap, shown at its next paint (see the module's note)."""
        self.axes.draw_artist(self.cursor)
        self.canvas.update()

    def _clicked(self, event: Any) -> None:
        if self.line is not None and event.inaxes is self.axes and event.xdata is not None:
            self._on_click(nearest_slice(self.per_slice, float(event.xdata)))


__all__ = ["SliceDicePlot", "nearest_slice", "stop_label_place", "stop_markers"]
