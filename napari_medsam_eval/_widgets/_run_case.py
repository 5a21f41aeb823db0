"""One row of a benchmark run, opened in the viewer: image, ground truth, prediction, prompt.

:func:`load_run_case` reads everything (no napari: it runs in a worker
thread); :func:`show_run_case` adds the layers on the GUI thread. The case is
found through the run's ``manifest.json`` (dataset path and layout), the
prediction is the file the runner saved (``prediction_path``, run with
``save_predictions``), the prompt is the row's recorded ``prompt`` JSON.

Layers get the roles the Compare widget looks for (``ground_truth``,
``prediction`` with ``target_label``), so it picks them up by itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from napari.layers import Layer

from .._reader import case_to_layer_data
from ..benchmark.manifest import read_manifest
from ..case import Case
from ..datasets import get_layout
from ..errors import DataError
from ..io import read_label
from ..prompt import Prompt, prompts_from_json
from . import _layers

#: metadata key marking the layers a benchmark row opened (replaced by the next row opened)
OPENED_KEY = "benchmark_row"


@dataclass
class RunCase:
    """What a row needs in the viewer; ``note`` says what could not be loaded (e.g. no prediction)."""

    row: dict[str, Any]
    case: Case
    prediction: np.ndarray | None
    prompt: Prompt | None
    note: str = ""


def _find_ref(layout_name: str, dataset: Path, case_id: str) -> Any:
    layout = get_layout(layout_name)
    for ref in layout.list_cases(dataset):
        if ref.case_id == case_id:
            return layout, ref
    raise DataError(f"case {case_id!r} is no longer in the dataset (layout {layout_name})", dataset)


def _prompt(row: dict[str, Any]) -> Prompt | None:
    text = row.get("prompt") or "[]"
    try:
        prompts = prompts_from_json(text) if isinstance(text, str) else []
    except (ValueError, TypeError):
        return None
    return prompts[0] if prompts else None


def load_run_case(run_dir: str | Path, row: dict[str, Any]) -> RunCase:
    """Read the case of ``row`` (a row of the run in ``run_dir``), its saved prediction and its prompt."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise DataError("no manifest.json: not a benchmark run folder", run_dir)
    config = manifest.get("config", {})
    layout, ref = _find_ref(config["layout"], Path(config["dataset_path"]), str(row["case_id"]))
    case = layout.load(ref)
    prediction, note = None, ""
    relative = str(row.get("prediction_path") or "")
    if not relative:
        note = "no prediction saved for this row (run with 'save predictions')"
    else:
        try:
            prediction = read_label(run_dir / relative, reference=case).array
        except (DataError, OSError) as error:
            note = f"prediction not readable: {error}"
        else:
            if prediction.shape != case.spatial_shape:
                prediction, note = None, f"prediction shape {prediction.shape} != case {case.spatial_shape}"
    return RunCase(row=dict(row), case=case, prediction=prediction, prompt=_prompt(row), note=note)


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
