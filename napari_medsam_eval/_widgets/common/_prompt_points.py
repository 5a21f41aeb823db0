"""The polarity of prompt points: each point's 1 / 0 label, the next point's, and key ``T``, without Qt.

A prompt Points layer holds ``features['label']``: 1 (positive, white with a black
ring) or 0 (negative, black with a white ring; :mod:`napari_medsam_eval.core.palette`).
The label of the *next* point is chosen before it is placed (:func:`set_next_point_label`,
kept in the layer's metadata) and given to each point added (:func:`keep_point_polarity`);
key ``T`` flips it (:func:`toggle_point_label`). A user's own Points layer becomes a prompt
layer with :func:`adopt_point_layer`.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from napari.layers import Points

from napari_medsam_eval.core.palette import NEGATIVE_POINT, POINT_BORDERS, POSITIVE_POINT

#: colours of positive / negative prompt points, and of their rings
POINT_COLORS = {1: POSITIVE_POINT, 0: NEGATIVE_POINT}
POINT_BORDER_COLORS = dict(POINT_BORDERS)
#: the key that toggles a prompt point's label (selected points, else the next one)
TOGGLE_KEY = "t"


def point_labels(layer: Points) -> np.ndarray:
    """The 1/0 label of every point (1 when the layer has no ``label`` feature)."""
    if "label" not in layer.features:
        return np.ones(len(layer.data), dtype=int)
    return np.asarray(layer.features["label"], dtype=int)


#: ``metadata`` key of a point layer: the label (1 / 0) of the next point placed
NEXT_LABEL_KEY = "next_point_label"


def next_point_label(layer: Points) -> int:
    """The label (1 positive, 0 negative) the next point added to ``layer`` gets."""
    return int(layer.metadata.get(NEXT_LABEL_KEY, 1))


def set_next_point_label(layer: Points, label: int) -> None:
    """Make the next points added to ``layer`` positive (1) or negative (0), before they are placed."""
    layer.metadata[NEXT_LABEL_KEY] = int(label)
    if "label" in layer.features:
        layer.feature_defaults["label"] = int(label)


def adopt_point_layer(layer: Points) -> Points:
    """Make a user's own Points layer a prompt layer: a ``label`` feature coloured
    white / black (:data:`POINT_COLORS`, ringed in :data:`POINT_BORDER_COLORS`), and the polarity
    rule of :func:`keep_point_polarity`."""
    if "label" not in layer.features:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            layer.features = {"label": np.ones(len(layer.data), dtype=int)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "label looks categorical": it is
        layer.face_color_cycle = dict(POINT_COLORS)
        layer.face_color = "label"
        layer.border_color_cycle = dict(POINT_BORDER_COLORS)
        layer.border_color = "label"
    keep_point_polarity(layer)
    return layer


def keep_point_polarity(layer: Points) -> None:
    """Give every point added to ``layer`` the label chosen beforehand (:func:`set_next_point_label`).

    napari copies the *selected* point's features into the defaults (and
    selects the point just placed), so defaults alone drift; this handler sets
    the new points' labels after each addition instead. Idempotent per layer.
    """
    if layer.metadata.get("_keeps_polarity"):
        return
    layer.metadata["_keeps_polarity"] = True
    layer.metadata.setdefault(NEXT_LABEL_KEY, 1)

    def on_data(event: Any) -> None:
        if getattr(event, "action", None) != "added":
            return
        labels = point_labels(layer).copy()
        n = len(labels)  # napari names the points added by negative indices (-1: the last)
        indices = [int(i) % n for i in (getattr(event, "data_indices", None) or ()) if -n <= int(i) < n]
        if not indices:
            return
        labels[list(indices)] = next_point_label(layer)
        features = layer.features.copy() if "label" in layer.features else layer.features.assign(label=labels)
        features["label"] = labels
        layer.features = features
        layer.feature_defaults["label"] = next_point_label(layer)
        layer.refresh_colors(update_color_mapping=False)

    layer.events.data.connect(on_data)
    layer.bind_key(TOGGLE_KEY, toggle_point_label, overwrite=True)  # key bindings ignore case


def toggle_point_label(layer: Points) -> int | None:
    """Key ``T``: flip the label of the *next* point (the points already placed keep theirs).

    Only in napari's select mode, with points selected by the user, are those
    points flipped instead (None is returned then): while adding, napari
    selects the point just placed, and flipping it turned earlier points
    negative by surprise. Returns the next point's new label.
    """
    selected = sorted(layer.selected_data)
    if selected and str(layer.mode) == "select":
        if "label" not in layer.features:
            layer.features = {"label": np.ones(len(layer.data), dtype=int)}
        features = layer.features.copy()
        labels = features["label"].to_numpy().astype(int)
        labels[selected] = 1 - labels[selected]
        features["label"] = labels
        layer.features = features
        layer.refresh_colors(update_color_mapping=False)
        return None
    new = 1 - next_point_label(layer)
    set_next_point_label(layer, new)
    return new


__all__ = ["NEXT_LABEL_KEY", "POINT_BORDER_COLORS", "POINT_COLORS", "TOGGLE_KEY", "adopt_point_layer",
           "keep_point_polarity", "next_point_label", "point_labels", "set_next_point_label", "toggle_point_label"]
