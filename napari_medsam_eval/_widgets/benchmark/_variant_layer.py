"""A counterfactual variant's mask as a layer: a pair against the row's prediction (no Qt; a worker builds it).

Drawn over the prediction in a colour of its own (the green of TP), a variant hid what it was to be compared
with; it is now its prediction-only / variant-only / both map
(:func:`~napari_medsam_eval.evaluation.mask_comparison.ab_overlay`, in two runs' colours), the *variant* view of
the canvas composer (:mod:`.._canvas`), whose legend names the variant.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from napari.layers import Labels, Layer

from napari_medsam_eval._layer_style import AB_COLORS
from napari_medsam_eval.benchmark.explain import variant_mask_path
from napari_medsam_eval.benchmark.open_row import RunCase
from napari_medsam_eval.benchmark.schema import row_labels
from napari_medsam_eval.evaluation.mask_comparison import ab_overlay, binary_target
from napari_medsam_eval.io import read_label
from napari_medsam_eval.studies.counterfactuals import VARIANT_WORDS
from napari_medsam_eval._widgets.benchmark._open_row import OPENED_KEY, row_object
from napari_medsam_eval._widgets.common._unit_words import in_units, unit_of

#: the role (and :data:`OPENED_KEY` value) of a variant's layer
ROLE = "counterfactual"
#: the opacity of a variant's pair with the prediction (as two runs' A vs B)
VARIANT_OPACITY = 0.6


def variant_name(variant: str, unit: str = "slice") -> str:
    """``true box on every slice``: a variant in words, in ``unit``."""
    return in_units(VARIANT_WORDS[variant].removeprefix("the "), unit)


def variant_layer(run_dir: Path, explained: dict[str, Any], variant: str, loaded: RunCase, image_name: str,
                  transform: dict[str, Any]) -> Layer | None:
    """Worker: ``variant``'s saved mask against the row's prediction, as a pair (prediction only / variant only /
    both: :func:`~napari_medsam_eval.evaluation.mask_comparison.ab_overlay`), a labels layer over the image (None
    when not saved). Drawn over the prediction in a colour of its own it hid what it was to be compared with."""
    path = variant_mask_path(run_dir, explained, variant)
    if path is None:
        return None
    row, case = loaded.row, loaded.case
    labels = row_labels(row)
    variant_mask = binary_target(read_label(path, reference=case).array, labels, binary_fallback=True)
    prediction = (np.zeros_like(variant_mask) if loaded.prediction is None
                  else binary_target(loaded.prediction, labels, binary_fallback=True))
    metadata = {"role": ROLE, "variant": variant, "image": image_name, "case_id": case.case_id,
                "label_name": row.get("label_name"), OPENED_KEY: ROLE, **row_object(row)}
    name = f"prediction vs {variant_name(variant, unit_of(case.kind))} ({case.case_id} {row.get('label_name')})"
    return Labels(ab_overlay(prediction, variant_mask), name=name, metadata=metadata, colormap=AB_COLORS,
                  opacity=VARIANT_OPACITY, **transform)


__all__ = ["ROLE", "VARIANT_OPACITY", "variant_layer", "variant_name"]
