"""2D image/mask folders: ``images/<stem>.jpg`` with ``masks/<stem>.png``.

Kvasir-SEG, HAM10000 and most 2D benchmarks ship this way. A mask may also be
named ``<stem>_segmentation`` (ISIC) or ``<stem>_mask``. Mask values follow the
2D mask rules of :mod:`napari_medsam_eval.io.image2d` (0/255 -> label 1 ...).
An image without a mask is listed and fails on loading, with the reason.
"""
from __future__ import annotations

from pathlib import Path

from ..core.case import Case
from ..io import read_case
from .layouts import find_label_file
from ..io.formats import IMAGE2D_SUFFIXES, format_suffix, strip_suffix
from .base import CaseRef, DatasetLayout, unique_case_ids, visible_files

IMAGES_FOLDER, MASKS_FOLDER = "images", "masks"
#: mask stems tried after ``<stem>`` itself
MASK_STEM_SUFFIXES = ("_segmentation", "_mask", "_Segmentation", "_Mask")
#: images looked at by :meth:`ImageMaskFolderLayout.detect`
_SAMPLE = 5


def image_files(folder: Path) -> list[Path]:
    return [p for p in visible_files(folder) if format_suffix(p) in IMAGE2D_SUFFIXES]


def find_mask(image: Path, mask_dir: Path) -> Path | None:
    """``masks/<stem>.*``, else ``masks/<stem>_segmentation.*`` / ``_mask``; None when absent."""
    found = find_label_file(image, mask_dir)
    if found is not None:
        return found
    for suffix in MASK_STEM_SUFFIXES:
        for candidate in mask_dir.glob(f"{strip_suffix(image)}{suffix}.*"):
            if format_suffix(candidate) in IMAGE2D_SUFFIXES:
                return candidate
    return None


def masks_folder_of(image: str | Path) -> Path | None:
    """``<root>/images/x.jpg`` -> ``<root>/masks`` when it exists (this layout and SAM-Med2D's)."""
    folder = Path(image).parent
    masks = folder.parent / MASKS_FOLDER
    return masks if folder.name == IMAGES_FOLDER and masks.is_dir() else None


def is_mask_file(path: str | Path) -> bool:
    """A file in ``<root>/masks`` beside ``<root>/images``: a mask, never an image to segment."""
    folder = Path(path).parent
    return folder.name == MASKS_FOLDER and (folder.parent / IMAGES_FOLDER).is_dir()


class ImageMaskFolderLayout(DatasetLayout):
    """``images/`` + ``masks/`` with one mask per image, same stem."""

    name = "folder2d"
    kind = "image"
    summary = "images/<stem>.jpg|png + masks/<stem>.png (one mask per image, same stem)"

    def detect(self, path: str | Path) -> bool:
        path = Path(path)
        images, masks = path / IMAGES_FOLDER, path / MASKS_FOLDER
        if not images.is_dir() or not masks.is_dir():
            return False
        return any(find_mask(image, masks) for image in image_files(images)[:_SAMPLE])

    def list_cases(self, path: str | Path) -> list[CaseRef]:
        root = Path(path)
        refs = [self.ref(root, strip_suffix(image), {"image": image, "label": find_mask(image, root / MASKS_FOLDER)})
                for image in image_files(root / IMAGES_FOLDER)]
        return unique_case_ids(refs, root)

    def _read(self, ref: CaseRef) -> Case:
        return read_case(ref.paths["image"], ref.paths.get("label"), kind="image", case_id=ref.case_id)
