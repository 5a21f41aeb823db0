"""napari reader: any file or folder the core reads, as image (+ ground-truth labels) layers.

Thin: :func:`napari_medsam_eval.io.read_case` does the work; this module only
turns a Case into napari layer data with ``scale`` from the spacing. It
returns None (never raises) for paths it cannot read, as npe2 expects: an
unknown suffix or folder, an empty file, and a file whose first bytes
contradict its suffix (a text file named ``.png``, a PNG named ``.npz``) are
refused before any reading. The suffixes are those of
:mod:`napari_medsam_eval.io.formats`, listed in ``napari.yaml``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .case import Case
from .errors import MedsamEvalError
from .io import detect_format, read_case
from .io.formats import format_suffix, looks_like_text

LayerData = tuple[Any, dict[str, Any], str]

#: the first bytes a file with this suffix must start with (any one of them)
MAGIC: dict[str, tuple[bytes, ...]] = {
    ".png": (b"\x89PNG\r\n\x1a\n",),
    ".jpg": (b"\xff\xd8\xff",),
    ".jpeg": (b"\xff\xd8\xff",),
    ".tif": (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"),
    ".tiff": (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"),
    ".bmp": (b"BM",),
    ".npz": (b"PK\x03\x04", b"PK\x05\x06"),
    ".nii.gz": (b"\x1f\x8b",),
}
#: Case.metadata keys (ITK order) that place a mask on the source image's grid
GEOMETRY_KEYS = ("spacing_xyz", "origin", "direction")
#: formats whose (header) file is text
TEXT_SUFFIXES = (".nhdr", ".mhd")


def case_to_layer_data(case: Case) -> list[LayerData]:
    """Image layer (and Labels layer when the case has ground truth) for napari."""
    scale = list(case.spacing.values)
    # the file's geometry travels with the layers so that our writer can save
    # a mask that overlays the source image in other viewers
    geometry = {key: case.metadata[key] for key in GEOMETRY_KEYS if case.metadata.get(key) is not None}
    image_kwargs = {"name": case.case_id, "scale": scale, "rgb": case.has_channels,
                    "metadata": {"case_id": case.case_id, "kind": case.kind, "modality": case.modality,
                                 "geometry": geometry}}
    layers: list[LayerData] = [(case.image, image_kwargs, "image")]
    if case.label is not None:
        label_meta = {"label_names": case.label_names, "role": "ground_truth", "kind": case.kind,
                      "geometry": geometry}
        layers.append((case.label, {"name": f"{case.case_id} ground truth", "scale": scale,
                                    "metadata": label_meta}, "labels"))
    return layers


def napari_get_reader(path: str | list[str]) -> Callable[[str], list[LayerData]] | None:
    """Return a reader for ``path`` when the core knows its format, else None."""
    if isinstance(path, list):
        if len(path) != 1:
            return None
        path = path[0]
    path = Path(path)
    try:
        detect_format(path)
        if path.is_file() and not _content_fits_suffix(path):
            return None
    except (MedsamEvalError, OSError):
        return None
    return read_layers


def _content_fits_suffix(path: Path) -> bool:
    """Whether the file's first bytes fit its suffix (cheap: reads at most 512 bytes)."""
    if path.stat().st_size == 0:
        return False
    suffix = format_suffix(path)
    if suffix in MAGIC:
        with open(path, "rb") as handle:
            head = handle.read(16)
        return head.startswith(MAGIC[suffix])
    if suffix in TEXT_SUFFIXES:
        return True
    if suffix == ".dcm":  # a Part 10 file says so at byte 128; an older one must at least be binary
        with open(path, "rb") as handle:
            handle.seek(128)
            if handle.read(4) == b"DICM":
                return True
    return not looks_like_text(path)


def read_layers(path: str | list[str]) -> list[LayerData]:
    """The layers of the case at ``path`` (image, and ground truth when found beside it)."""
    if isinstance(path, list):
        path = path[0]
    return case_to_layer_data(read_case(path))
