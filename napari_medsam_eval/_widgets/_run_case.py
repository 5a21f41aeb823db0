"""One row of a benchmark run, opened in the viewer: image, ground truth, prediction, prompt.

Reading the row's case, saved prediction and prompt is core work,
:func:`napari_medsam_eval.benchmark.run_case.load_run_case` (no napari: it
runs in a worker thread); :func:`show_run_case` adds the layers on the GUI
thread.

Layers get the roles the Compare widget looks for (``ground_truth``,
``prediction`` with ``target_label``), so it picks them up by itself when
they are added: no widget sets another's controls.
"""
from __future__ import annotations

from typing import Any

from napari.layers import Layer

from .._reader import case_to_layer_data
from ..benchmark.run_case import RunCase, load_run_case
from ..prompt import Prompt
from ..report.stats import row_stops
from ._layers import go_to_index
from ._prompt_layers import make_box_layer, make_point_layer, show_prompt

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
                    "protocol": row.get("protocol"), "stops": row_stops(row)}
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
        boxes = layers["prompt_boxes"] = make_box_layer(image, f"{image.name} prompt box")
    if prompt.points:
        points = layers["prompt_points"] = make_point_layer(image, f"{image.name} prompt points")
    for layer in layers.values():
        layer.metadata[OPENED_KEY] = True
    show_prompt(prompt, image, boxes or make_box_layer(image), points or make_point_layer(image))
    for layer in layers.values():
        viewer.add_layer(layer)
    if prompt.slice_index is not None:
        go_to_index(viewer, image, int(prompt.slice_index))
    return layers


__all__ = ["OPENED_KEY", "RunCase", "load_run_case", "show_run_case"]
