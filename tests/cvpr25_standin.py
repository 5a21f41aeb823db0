"""The multi-class cases and the model-free stand-in of ``tests/data/cvpr25_reference/multiclass_outputs.json``
(PROVENANCE.md there): shared by the test and by ``scripts/cvpr25_multiclass_reference.py``, which ran the
challenge's own functions on them. Nothing here is the challenge's code."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.ndimage import binary_erosion, label

BRATS = Path("brats2021_flair") / "labelsTr" / "BraTS2021_01646.nii.gz"


def brats_nested(shared: Path) -> tuple[np.ndarray, tuple[float, float, float]]:
    """A BraTS-like label map from the shared BraTS FLAIR case: the whole tumour (its edema label) as three
    nested classes, 1 the outer shell, 2 the 3D erosion by 3 voxels, 3 that eroded by 3 more (BraTS's
    edema / core / enhancing nesting); the array-order spacing."""
    import SimpleITK as sitk

    image = sitk.ReadImage(str(shared / BRATS))
    whole = sitk.GetArrayFromImage(image) > 0
    core = binary_erosion(whole, iterations=3)
    inner = binary_erosion(core, iterations=3)
    gts = np.zeros(whole.shape, np.uint8)
    gts[whole], gts[core], gts[inner] = 1, 2, 3
    return gts, tuple(float(v) for v in reversed(image.GetSpacing()))


def thin_plates() -> tuple[np.ndarray, tuple[float, float, float]]:
    """Two touching plates two voxels thick (a first step whose case DSC is under the NSD gate), 2 mm slices."""
    gts = np.zeros((12, 48, 48), np.uint8)
    gts[2:10, 10:12, 8:40] = 1
    gts[2:10, 12:14, 8:40] = 2
    gts[4:8, 20:30, 20:22] = 2
    return gts, (2.0, 0.8, 0.8)


def specks() -> tuple[np.ndarray, tuple[float, float, float]]:
    """Two specks two pixels wide (the stand-in's erosion leaves nothing: the case's first DSC is 0, under the
    gate, until the clicks put them back)."""
    gts = np.zeros((8, 32, 32), np.uint8)
    gts[2:6, 10:12, 10:12] = 1
    gts[3:6, 18:20, 12:14] = 2
    return gts, (1.0, 1.0, 1.0)


CASES = ("brats_nested", "thin_plates", "specks")


def load(name: str, shared: Path) -> tuple[np.ndarray, tuple[float, float, float]]:
    """One of :data:`CASES`: its label map and array-order spacing."""
    return {"brats_nested": lambda: brats_nested(shared), "thin_plates": thin_plates, "specks": specks}[name]()


def model_region(gts: np.ndarray, value: int) -> np.ndarray:
    """What the stand-in model takes for class ``value``: the class and every class nested inside it
    (``gts >= value``: a model asked for the edema takes the whole tumour), so the classes' masks overlap."""
    return gts >= value


def first_prediction(region: np.ndarray, box: dict) -> np.ndarray:
    """Step 0: ``region`` in the box's z-range, each slice eroded by a pixel, and a 3-pixel false-positive band
    right of it on the box's middle slice."""
    pred = np.zeros(region.shape, dtype=bool)
    for z in range(int(box["z_min"]), int(box["z_max"]) + 1):
        pred[z] = binary_erosion(region[z], iterations=1)
    z = int(box["z_mid"])
    ys, xs = np.nonzero(region[z])
    x0 = int(xs.max()) + 2
    if x0 + 3 <= region.shape[2]:
        pred[z, int(ys.min()):int(ys.max()) + 1, x0:x0 + 3] = True
    return pred


def corrected(pred: np.ndarray, truth: np.ndarray, click: tuple[int, int, int]) -> np.ndarray:
    """A click step: on the click's slice, the 8-connected region of the class's own errors that holds the
    click set right (no change where its own mask is right there: the click came from the map)."""
    z, y, x = (int(v) for v in click)
    regions, _ = label(pred[z] != truth[z], structure=np.ones((3, 3), bool))
    out = pred.copy()
    if regions[y, x]:
        region = regions == regions[y, x]
        out[z][region] = truth[z][region]
    return out
