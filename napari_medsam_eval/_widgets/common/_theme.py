"""The viewer theme's colours and the small matplotlib plots the Compare and Benchmark widgets embed."""
from __future__ import annotations

from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg
from matplotlib.figure import Figure

from napari_medsam_eval.core.palette import PLOT_LIGHT_THEME


def theme_colors(viewer: Any) -> tuple[str, str]:
    """(background, text) colours of the viewer's theme, for the plots."""
    try:
        from napari.utils.theme import get_theme

        theme = get_theme(viewer.theme)
        return theme.canvas.as_hex(), theme.text.as_hex()
    except Exception:  # a theme without those fields: matplotlib's defaults
        return PLOT_LIGHT_THEME


def plot_canvas(background: str, min_height: int) -> tuple[Figure, Axes, FigureCanvasQTAgg]:
    """A small figure (one axes) on a Qt canvas at least ``min_height`` pixels high."""
    figure = Figure(figsize=(3.2, 2.2), facecolor=background, tight_layout=True)
    axes = figure.add_subplot(111)
    canvas = FigureCanvasQTAgg(figure)
    canvas.setMinimumHeight(min_height)
    return figure, axes, canvas


def style_axes(ax: Axes, background: Any, text: str) -> None:
    """Theme ``ax``: its background, spines, ticks and axis labels."""
    ax.set_facecolor(background)
    for spine in ax.spines.values():
        spine.set_color(text)
    ax.tick_params(colors=text, labelsize=7)
    ax.xaxis.label.set_color(text)
    ax.yaxis.label.set_color(text)


__all__ = ["plot_canvas", "style_axes", "theme_colors"]
