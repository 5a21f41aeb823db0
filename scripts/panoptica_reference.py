"""Panoptica's lesion matching on real pairs, stored as reference data for tests/test_panoptica_agreement.py.

Panoptica 2.1.7 (BrainLesion/panoptica; ``pip install --no-deps panoptica==2.1.7 connected-components-3d
ruamel.yaml "plotly<6"``: its pins on numpy, pandas and rich are older than this project's) is run with
naive threshold matching at IoU 0.5 on:

* the Cell Tracking Challenge nuclei (``ctc_nuclei_gowt1``, 6 images): the true instance map against a
  perturbed prediction (each nucleus moved, grown or shrunk, some dropped, one split, two merged, false
  blobs added), as instance maps (``UnmatchedInstancePair``: no connected components);
* the same images' foreground as semantic masks (Panoptica's connected components): with its 2D default
  (``scipy.ndimage.label``, 4 neighbours) and with cc3d (8 neighbours in 2D, ours);
* hippocampus (4 cases, each label) and BraTS (the enhancing region of the one shared case) with perturbed
  truth (moved, shrunk, split, false blobs), semantic 3D masks (cc3d: 26 neighbours, ours).

Writes ``tests/data/panoptica_reference/``: ``predictions.npz`` (every prediction, keyed by pair) and
``reference.json`` (per pair: where the truth is, how the prediction is read, Panoptica's TP, FP, FN, F1
(its ``rq``), ``sq_dsc`` and the DSC of every matched pair, sorted). The test needs no Panoptica.

    python scripts/panoptica_reference.py [--shared-data ../shared/data]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy import ndimage

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "data" / "panoptica_reference"


def perturb_instances(truth: np.ndarray, seed: int) -> np.ndarray:
    """A prediction of an instance map: each instance moved by up to 4 px, grown or shrunk by up to 3 px,
    one in ten dropped; the first instance split in two halves, the next two merged under one value; three
    false blobs. Later instances are painted over earlier ones."""
    rng = np.random.default_rng(seed)
    values = [int(v) for v in np.unique(truth) if v]
    pred = np.zeros(truth.shape, dtype=np.uint16)
    next_value = max(values) + 1
    for index, value in enumerate(values):
        mask = truth == value
        if rng.random() < 0.1:
            continue
        mask = np.roll(mask, tuple(int(v) for v in rng.integers(-4, 5, 2)), axis=(0, 1))
        grow = int(rng.integers(-3, 4))
        if grow > 0:
            mask = ndimage.binary_dilation(mask, iterations=grow)
        elif grow < 0:
            mask = ndimage.binary_erosion(mask, iterations=-grow)
        if index == 0:  # split: the right half another instance
            cols = np.flatnonzero(mask.any(axis=0))
            if len(cols):
                half = mask.copy()
                half[:, : cols[len(cols) // 2]] = False
                pred[mask & ~half] = value
                pred[half] = next_value
                next_value += 1
                continue
        pred[mask] = values[1] if index == 2 and len(values) > 2 else value  # instance 3 takes 2's value
    for _ in range(3):
        y, x = (int(v) for v in rng.integers(30, np.array(truth.shape) - 30))
        pred[y - 8:y + 8, x - 8:x + 8] = next_value
        next_value += 1
    return pred


def perturb_mask(truth: np.ndarray, seed: int) -> np.ndarray:
    """A prediction of a 3D mask: moved by up to a voxel along each axis, shrunk or grown once, a slab cut out of it (which
    may split it), two false cubes."""
    rng = np.random.default_rng(seed)
    pred = np.roll(truth, tuple(int(v) for v in rng.integers(-1, 2, 3)), axis=(0, 1, 2))
    pred = ndimage.binary_erosion(pred) if rng.random() < 0.5 else ndimage.binary_dilation(pred)
    zs = np.flatnonzero(pred.any(axis=(1, 2)))
    if len(zs) > 4 and rng.random() < 0.6:
        middle = zs[len(zs) // 2]
        pred[middle:middle + 2] = False
    for _ in range(2):
        z, y, x = (int(rng.integers(0, s - 4)) for s in truth.shape)
        pred[z:z + 3, y:y + 3, x:x + 3] = True
    return pred


def panoptica_counts(pred: np.ndarray, truth: np.ndarray, instances: bool, backend: str | None = None) -> dict:
    """Panoptica's naive IoU-0.5 matching of one pair: TP, FP, FN, F1 (rq), sq_dsc, every TP's DSC."""
    from panoptica import (ConnectedComponentsInstanceApproximator, InputType, NaiveThresholdMatching,
                           Panoptica_Evaluator)
    from panoptica.metrics import Metric
    from panoptica.utils.constants import CCABackend

    approximator = None if instances else ConnectedComponentsInstanceApproximator(
        cca_backend=None if backend is None else CCABackend[backend])
    evaluator = Panoptica_Evaluator(
        expected_input=InputType.UNMATCHED_INSTANCE if instances else InputType.SEMANTIC,
        instance_approximator=approximator,
        instance_matcher=NaiveThresholdMatching(matching_metric=Metric.IOU, matching_threshold=0.5),
        instance_metrics=[Metric.DSC, Metric.IOU], global_metrics=[Metric.DSC])
    dtype = np.uint16 if instances else np.uint8
    (result,) = evaluator.evaluate(pred.astype(dtype), truth.astype(dtype), verbose=False).values()
    dsc = sorted(float(v) for v in (result._list_metrics[Metric.DSC].ALL or [])) if result.tp else []
    iou = [float(v) for v in (result._list_metrics[Metric.IOU].ALL or [])] if result.tp else []
    return {"tp": int(result.tp), "fp": int(result.fp), "fn": int(result.fn), "f1": float(result.rq),
            "sq_dsc": None if not result.tp else float(result.sq_dsc), "dsc": dsc,
            "n_true": int(result.n_ref_instances), "n_pred": int(result.n_pred_instances),
            "iou_exactly_half": sum(abs(v - 0.5) < 1e-12 for v in iou)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    import panoptica  # noqa: F401 - fail early when it is missing

    from napari_medsam_eval.datasets import detect_layout

    pairs, predictions = [], {}
    root = args.shared_data / "ctc_nuclei_gowt1"
    layout = detect_layout(root)
    for seed, ref in enumerate(layout.list_cases(root)):
        truth = layout.load(ref).label.astype(np.uint16)
        pred = perturb_instances(truth, seed)
        key = f"ctc_{ref.case_id}"
        predictions[key] = pred
        pairs.append({"id": key, "dataset": "ctc_nuclei_gowt1", "case": ref.case_id, "read": "instances",
                      "panoptica": panoptica_counts(pred, truth, True)})
        for backend, read in ((None, "semantic_2d_panoptica_default"), ("cc3d", "semantic")):
            pairs.append({"id": key, "dataset": "ctc_nuclei_gowt1", "case": ref.case_id, "read": read,
                          "labels": "foreground", "panoptica": panoptica_counts(pred > 0, truth > 0, False, backend)})
    for name, labels, count in (("hippocampus_mri", (1, 2), 4), ("brats2021_flair", (1,), 1)):
        root = args.shared_data / name
        layout = detect_layout(root)
        for ref in layout.list_cases(root)[:count]:
            case = layout.load(ref)
            for label in labels:
                truth = case.label == label
                key = f"{name}_{ref.case_id}_{label}"
                pred = perturb_mask(truth, len(pairs))
                predictions[key] = pred
                pairs.append({"id": key, "dataset": name, "case": ref.case_id, "read": "semantic",
                              "labels": [label], "panoptica": panoptica_counts(pred, truth, False)})
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT / "predictions.npz", **predictions)
    (OUT / "reference.json").write_text(json.dumps({
        "panoptica": "2.1.7", "matching": "NaiveThresholdMatching(matching_metric=IOU, matching_threshold=0.5)",
        "made_by": "scripts/panoptica_reference.py", "pairs": pairs}, indent=1) + "\n")
    for pair in pairs:
        p = pair["panoptica"]
        print(f"{pair['id']:40s} {pair['read']:30s} TP {p['tp']:3d} FP {p['fp']:3d} FN {p['fn']:3d} "
              f"F1 {p['f1']:.3f} sq_dsc {p['sq_dsc']}")


if __name__ == "__main__":
    main()
