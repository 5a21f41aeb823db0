"""One row of a benchmark run, opened in the viewer: image, ground truth, prediction, prompt.

Reading the row's case, saved prediction and prompt is core work,
:func:`napari_medsam_eval.benchmark.run_case.load_run_case` (no napari: it
runs in a worker thread); :func:`show_run_case` adds the layers on the GUI
thread.

Layers get the roles the Compare widget looks for (``ground_truth``,
``prediction`` with ``target_label``), so it picks them up by itself.
"""
from __future__ import annotations

from typing import Any

from napari.layers import Layer

from .._reader import case_to_layer_data
from ..benchmark.run_case import RunCase, load_run_case
from ..prompt import Prompt
from . import _layers

#: metadata key marking the layers a benchmark row opened (replaced by the next row opened)
OPENED_KEY = "benchmark_row"


def _remove_opened(viewer: Any) -> None:
    for layer in [layer for layer in viewer.layers if layer.metadata.get(OPENED_KEY)]:
        viewer.layers.remove(layer)


def _add(viewer: Any, data: Any, kwargs: dict[str, Any], kind: str) -> Layer:
    kwargs = {**kwargs, "metadata": {**kwargs.get("metadata", {}), OPENED_KEY: True}}
    return getattr(viewer, f"add_{kind}")(data, **kwargs)


def show_run_case(viewer: Any, loaded: RunCase) -> dict[str, Layer]:
    """Replace the last opened row's layers by this row's; go to the prompted slice.

    Returns the layers by role: ``image``, ``ground_truth``, ``prediction``,
    ``prompt_boxes``, ``prompt_points`` (those that exist).
    """
    _remove_opened(viewer)
    case, row = loaded.case, loaded.row
    layers: dict[str, Layer] = {}
    for data, kwargs, kind in case_to_layer_data(case):
        layers["image" if kind == "image" else "ground_truth"] = _add(viewer, data, kwargs, kind)
    image = layers["image"]
    target = row.get("target_label")
    if loaded.prediction is not None:
        metadata = {"role": "prediction", "image": image.name, "model": row.get("model"),
                    "protocol": row.get("protocol")}
        if target is not None:
            metadata["target_label"] = int(target)
        layers["prediction"] = _add(viewer, loaded.prediction, {
            "name": f"{case.case_id} prediction ({row.get('model')})", "scale": image.scale,
            "translate": image.translate, "opacity": 0.6, "metadata": metadata}, "labels")
    if loaded.prompt is not None:
        layers.update(_show_prompt(viewer, image, loaded.prompt))
    return layers


def _show_prompt(viewer: Any, image: Layer, prompt: Prompt) -> dict[str, Layer]:
    layers: dict[str, Layer] = {}
    boxes = points = None
    if prompt.boxes:
        boxes = layers["prompt_boxes"] = _layers.make_box_layer(image, f"{image.name} prompt box")
    if prompt.points:
        points = layers["prompt_points"] = _layers.make_point_layer(image, f"{image.name} prompt points")
    for layer in layers.values():
        layer.metadata[OPENED_KEY] = True
    _layers.show_prompt(prompt, image, boxes or _layers.make_box_layer(image), points or _layers.make_point_layer(image))
    for layer in layers.values():
        viewer.add_layer(layer)
    if prompt.slice_index is not None:
        _layers.go_to_index(viewer, image, int(prompt.slice_index))
    return layers


def point_compare_widgets(viewer: Any, layers: dict[str, Layer], target: int | None) -> int:
    """Point every open Compare widget at the opened ground truth and prediction; returns how many."""
    from .compare import CompareWidget

    if "prediction" not in layers:
        return 0
    try:
        docked = list(viewer.window.dock_widgets.values())
    except AttributeError:  # an older napari without the public mapping
        return 0
    count = 0
    for widget in docked:
        if isinstance(widget, CompareWidget):
            widget.reset_choices()
            widget.pred_layer.value = layers["prediction"]
            widget.gt_layer.value = layers["ground_truth"]
            if target is not None:
                widget.target_label.value = int(target)
            count += 1
    return count


__all__ = ["OPENED_KEY", "RunCase", "load_run_case", "point_compare_widgets", "show_run_case"]
