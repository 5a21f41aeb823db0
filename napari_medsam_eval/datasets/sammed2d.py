"""SAM-Med2D 2D data: ``images/<stem>.png`` with one mask per object ``masks/<stem>_<object>_<n>.png``.

The release adds ``image2label_train.json`` (image -> its masks). Each image's
masks are merged into one label map by :func:`napari_medsam_eval.datasets.layouts.read_sammed2d`
(label ``i + 1`` = the ``i``-th mask, named after its object: ``liver``,
``aorta`` ...), so a task is ``<dataset>/<object>`` and label values differ
between images; the runner names tasks from the label names, never the values.
"""
from __future__ import annotations

from pathlib import Path

from ..core.case import Case
from .layouts import read_sammed2d, sammed2d_mask_files
from ..io.formats import strip_suffix
from .base import CaseRef, DatasetLayout, unique_case_ids
from .folder2d import find_mask, image_files

_SAMPLE = 5


class SAMMed2DLayout(DatasetLayout):
    """SAM-Med2D: images/ + masks/ with several ``<stem>_<object>_<n>`` masks per image."""

    name = "sammed2d"
    kind = "image"
    summary = "images/<stem>.png + masks/<stem>_<object>_<nnn>.png (SAM-Med2D, image2label_train.json)"

    def detect(self, path: str | Path) -> bool:
        path = Path(path)
        images, masks = path / "images", path / "masks"
        if not images.is_dir() or not masks.is_dir():
            return False
        if any(path.glob("image2label*.json")):
            return True
        sample = image_files(images)[:_SAMPLE]
        return bool(sample) and not any(find_mask(i, masks) for i in sample) and any(
            sammed2d_mask_files(i, masks) for i in sample)

    def list_cases(self, path: str | Path) -> list[CaseRef]:
        root = Path(path)
        refs = [self.ref(root, strip_suffix(image),
                         {"image": image, "masks": sammed2d_mask_files(image, root / "masks")})
                for image in image_files(root / "images")]
        return unique_case_ids(refs, root)

    def _read(self, ref: CaseRef) -> Case:
        return read_sammed2d(ref.paths["image"], ref.paths.get("masks") or [], case_id=ref.case_id)
