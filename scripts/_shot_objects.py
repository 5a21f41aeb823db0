"""Screenshot of nested objects: the CT phantom's liver (a region holding its lesion), kidney and lesion.

``shot(viewer)`` opens the CT phantom sample, docks the Segment widget with LiteMedSAM and segments three
objects from the ground truth: the liver as the region of labels 1 and 3 (LiTS's liver holds its tumour),
the kidney (2) and the lesion (3), which lies inside the liver. Each keeps its own mask: the layer draws
the lesion over the liver, so both contours show. The view goes to the lesion's largest slice and
``docs/screenshots/objects.png`` is saved with :func:`screenshots.save`. Standalone::

    python scripts/_shot_objects.py      # (starts its own Xvfb when there is no display)
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from screenshots import _process, _wait, dock, in_viewer, on_display, save  # noqa: E402

#: the objects segmented: (label value, region)
OBJECTS = ((1, "1,3"), (2, ""), (3, ""))


def shot(viewer: Any, name: str = "objects.png") -> None:
    from napari_medsam_eval._widgets.common._object_masks import object_mask
    from napari_medsam_eval.session.session import Session

    image, gt = viewer.open_sample("napari-medsam-eval", "phantom_ct")[:2]
    widget, _ = dock(viewer, "Segment")
    widget.set_backend(Session.build_backend("litemedsam", device="cpu"))
    _process()
    for value, region in OBJECTS:
        widget.target_label.value = value
        widget.region.value = region
        if widget.prompt_from_ground_truth() is None:
            raise RuntimeError(f"no prompt for object {value}: {widget.status.value}")
        _wait(widget.propagate())
    prediction = viewer.layers[f"{image.name} prediction"]
    masks = {value: object_mask(prediction, value) for value, _ in OBJECTS}
    if not all(mask.any() for mask in masks.values()) or not (masks[1] & masks[3]).any():
        raise RuntimeError("the three objects, the lesion inside the liver, were not all kept")
    z = int(np.argmax((np.asarray(gt.data) == 3).sum(axis=(1, 2))))
    viewer.dims.set_point(0, image.data_to_world([z, 0, 0])[0])
    gt.opacity = 0.35
    widget.target_label.value = 3
    viewer.layers.selection.active = prediction
    _process(1.0)
    save(viewer, name)
    drawn = np.asarray(prediction.data[z])
    print(f"slice {z}: liver {int((drawn == 1).sum())}, lesion {int((drawn == 3).sum())} pixels drawn; "
          f"the liver's own mask {int(masks[1][z].sum())} pixels, the lesion inside it")


if __name__ == "__main__":
    sys.exit(on_display(lambda: in_viewer(shot)))
