"""What a DICOM SEG or RTSTRUCT holds once placed on its series: named masks, and the reader's notes.

The readers (:mod:`.dicom_seg`, :mod:`.rtstruct`) return a :class:`DicomObjects`; :mod:`.dicom_objects`
turns it into a case's label and targets. No pixel reading here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import DataError
from ..core.targets import clean_name
from .dicom_grid import SeriesGrid


class DicomObjectWarning(UserWarning):
    """Something the reader decided about a SEG or RTSTRUCT that the user should know (also in ``notes``)."""


@dataclass
class ObjectMask:
    """One segment or ROI: its number, its name and its mask on the series' grid (``shape``: z, y, x), kept
    as the 2D masks of the slices it has frames or contours on (``slices``: slice index -> bool (y, x)); a
    planning CT's ROI covers few of its slices."""

    number: int
    name: str
    shape: tuple[int, int, int]
    slices: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def mask(self) -> np.ndarray:
        """The whole mask (bool, ``shape``)."""
        whole = np.zeros(self.shape, dtype=bool)
        for index, plane in self.slices.items():
            whole[index] = plane
        return whole

    def add(self, index: int, plane: np.ndarray) -> None:
        """``plane`` joins the mask on slice ``index`` (union with what is there)."""
        if index in self.slices:
            self.slices[index] = self.slices[index] | plane
        else:
            self.slices[index] = np.asarray(plane, dtype=bool)

    def any(self) -> bool:
        return any(plane.any() for plane in self.slices.values())


@dataclass
class DicomObjects:
    """What a SEG or RTSTRUCT holds on one series' grid, with the reader's notes."""

    kind: str
    objects: list[ObjectMask]
    grid: SeriesGrid
    notes: list[str] = field(default_factory=list)


def unique_names(objects: list[ObjectMask]) -> list[ObjectMask]:
    """``objects`` with names a target can take (cleaned), a repeated name followed by its number."""
    cleaned = [clean_name(o.name) for o in objects]
    for obj, name in zip(objects, cleaned):
        obj.name = f"{name}_{obj.number}" if cleaned.count(name) > 1 else name
    return objects



def read_dataset(path: Path, what: str) -> Any:
    """The DICOM object at ``path`` (pixel data included), or a :class:`DataError` naming ``what`` it should be."""
    import pydicom

    try:
        return pydicom.dcmread(str(path))
    except Exception as error:  # pydicom raises many kinds (a truncated file, a bad length, not DICOM)
        raise DataError(f"unreadable {what} ({type(error).__name__}: {error})", path) from None

__all__ = ["read_dataset", "DicomObjectWarning", "DicomObjects", "ObjectMask", "unique_names"]
