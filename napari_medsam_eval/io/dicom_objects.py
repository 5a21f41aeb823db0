"""Ground truth held as DICOM objects (a SEG's segments, an RTSTRUCT's ROIs) as a case's label and targets.

A case has one label map, and segments or ROIs may nest or overlap (a GTV inside an organ, a PTV around
the GTV). Each object keeps its own mask this way (the regions of :mod:`napari_medsam_eval.core.targets`):
every voxel gets the value of the set of objects covering it. A voxel of one object only holds that
object's number (the SEG's Segment Number, the RTSTRUCT's ROI Number); a voxel several objects share
holds a value above every object number, named ``A+B``. Each object is a :class:`Target` uniting the
values of every set it belongs to, named by its Segment Label / ROI Name, keyed by its number; so
``target.mask(case.label)`` is exactly the object's mask. ``case.metadata`` keeps ``targets`` (these),
``dicom_objects`` (``SEG`` or ``RTSTRUCT``), ``dicom_object_path`` and ``notes`` (what the reader decided
for the user to see: a fractional segment thresholded, an ROI without contour left out).

Which series an object belongs to: the one its Referenced Series names (its frame of reference where it
names none). Given an image case (``info IMAGE --label SEG``), that series must be the case's; alone
(``score PRED SEG``), the series is looked for in the object's folder, the folders beside it and inside it.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..core.case import Case
from ..core.errors import DataError
from ..core.targets import Target
from .dicom_grid import SeriesGrid, series_grid
from .dicom_masks import DicomObjects, DicomObjectWarning, ObjectMask

#: the DICOM objects read as ground truth, by Modality
GROUND_TRUTH_MODALITIES = ("SEG", "RTSTRUCT")


def ground_truth_kind(path: str | Path) -> str | None:
    """``"SEG"`` or ``"RTSTRUCT"`` for a DICOM file that is one, else None (a header read, no pixels)."""
    from .dicom import dicom_modality
    from .formats import is_dicom_file

    path = Path(path)
    if not path.is_file() or not is_dicom_file(path):
        return None
    modality = dicom_modality(path)
    return modality if modality in GROUND_TRUTH_MODALITIES else None


def object_label(objects: list[ObjectMask], shape: tuple[int, ...]) -> tuple[np.ndarray, dict[int, str], list[Target]]:
    """The label map, label names and targets of ``objects`` (module doc: a value per set of objects). Slice by
    slice: only the slices an object covers are touched."""
    sets: dict[frozenset, int] = {frozenset(): 0}
    members: list[frozenset] = [frozenset()]
    # the set of objects of each voxel, by its index in ``members``: a byte, two once there are more than 256 sets
    codes = np.zeros(shape, dtype=np.uint8)
    covered = sorted({index for obj in objects for index in obj.slices})
    for index in covered:
        plane = codes[index]
        for obj in objects:
            where = obj.slices.get(index)
            if where is None or not where.any():
                continue
            old = plane[where]
            lookup = np.zeros(len(members), dtype=codes.dtype)  # each set present here -> that set with this object
            for code in np.flatnonzero(np.bincount(old, minlength=len(members))):
                key = members[int(code)] | {obj.number}
                if key not in sets:
                    if len(members) == 1 << 8 and codes.dtype == np.uint8:
                        codes, lookup = codes.astype(np.uint16), lookup.astype(np.uint16)
                        plane = codes[index]
                    if len(members) == 1 << 16:
                        raise DataError(f"the objects overlap in more than {1 << 16} different ways: too many to "
                                        "keep each its own mask in one label map")
                    sets[key] = len(members)
                    members.append(key)
                lookup[code] = sets[key]
            plane[where] = lookup[old]
    names = {o.number: o.name for o in objects}
    shared = sorted((key for key in members if len(key) > 1), key=lambda k: (len(k), sorted(k)))
    value_of = np.zeros(len(members), dtype=np.int64)
    next_value = max(list(names) + [0]) + 1
    label_names = {}
    for key in members[1:]:
        if len(key) == 1:
            value_of[sets[key]] = next(iter(key))
    for offset, key in enumerate(shared):
        value_of[sets[key]] = next_value + offset
        label_names[next_value + offset] = "+".join(names[n] for n in sorted(key))
    top = int(value_of.max(initial=0))
    kind = np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.uint32  # as small as the values allow
    label = codes if codes.dtype == kind else codes.astype(kind)
    for index in covered:
        label[index] = value_of[codes[index]]
    label_names.update(names)
    targets = []
    for obj in objects:
        values = sorted(int(value_of[sets[key]]) for key in members if obj.number in key)
        targets.append(Target(obj.name, tuple(values or [obj.number]), key=obj.number))
    return label, label_names, targets


def grid_of_case(case: Case) -> SeriesGrid | None:
    """The series grid of a case read from a DICOM series folder (None for any other case)."""
    from .dicom import dicom_series_files

    folder, series = case.metadata.get("dicom_series_folder"), case.metadata.get("dicom_series_id")
    if not folder or not series:
        return None
    files, _ = dicom_series_files(folder, series)
    return series_grid(files, Path(folder))


def referenced_series(path: Path) -> tuple[list[str], str]:
    """The series UIDs a SEG or RTSTRUCT references and its frame of reference UID (headers only)."""
    import pydicom

    header = pydicom.dcmread(str(path), stop_before_pixels=True)
    uids = [str(item.SeriesInstanceUID) for item in header.get("ReferencedSeriesSequence", [])
            if "SeriesInstanceUID" in item]
    for frame in header.get("ReferencedFrameOfReferenceSequence", []):
        for study in frame.get("RTReferencedStudySequence", []):
            uids += [str(s.SeriesInstanceUID) for s in study.get("RTReferencedSeriesSequence", [])
                     if "SeriesInstanceUID" in s]
    frame_uid = str(header.get("FrameOfReferenceUID", "") or "")
    if not frame_uid:
        frames = header.get("ReferencedFrameOfReferenceSequence", [])
        frame_uid = str(frames[0].get("FrameOfReferenceUID", "")) if frames else ""
    return uids, frame_uid


def _candidate_folders(path: Path) -> list[Path]:
    here = path.parent
    folders = [here] + sorted(p for p in here.iterdir() if p.is_dir() and not p.name.startswith("."))
    if here.parent != here:
        folders += sorted(p for p in here.parent.iterdir() if p.is_dir() and p != here and not p.name.startswith("."))
    return folders


def _holds_dicom(folder: Path, n_sniffed: int = 20) -> bool:
    """A folder with a DICOM file among its first files (GDCM is asked about no other: it warns on each)."""
    from .formats import is_dicom_file

    try:
        files = [p for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith(".")][:n_sniffed]
    except OSError:
        return False
    return any(is_dicom_file(p) for p in files)


def find_series(path: Path) -> SeriesGrid:
    """The series ``path`` (a SEG or RTSTRUCT) references, looked for in its folder, the folders inside it
    and beside it; a DataError naming the series and where it was looked for when it is not there."""
    from .dicom import dicom_series_files, image_series_ids

    uids, _ = referenced_series(path)
    if not uids:
        raise DataError("the object names no referenced image series; give its image series with it "
                        "(medsam-eval info SERIES_FOLDER --label OBJECT)", path)
    looked = _candidate_folders(path)
    for folder in looked:
        if not _holds_dicom(folder):
            continue
        try:
            ids = image_series_ids(folder)
        except RuntimeError:
            continue
        for uid in uids:
            if uid in ids:
                files, _ = dicom_series_files(folder, uid)
                return series_grid(files, folder)
    shown = ", ".join(str(p) for p in looked[:4]) + (f" and {len(looked) - 4} more" if len(looked) > 4 else "")
    raise DataError(f"its image series {uids[0]} is not there (looked in {shown}); give the series folder with "
                    "it (medsam-eval info SERIES_FOLDER --label OBJECT)", path)


def read_objects(path: str | Path, grid: SeriesGrid | None = None) -> DicomObjects:
    """The SEG or RTSTRUCT at ``path`` on ``grid`` (found near the file when None)."""
    path = Path(path)
    kind = ground_truth_kind(path)
    if kind is None:
        raise DataError("not a DICOM SEG or RTSTRUCT", path)
    grid = grid if grid is not None else find_series(path)
    if kind == "SEG":
        from .dicom_seg import read_seg

        return read_seg(path, grid)
    from .rtstruct import read_rtstruct

    return read_rtstruct(path, grid)


def object_label_file(path: Path, reference: Case | None) -> tuple[np.ndarray, dict[str, Any], dict[str, Any]]:
    """A SEG or RTSTRUCT as :func:`.reader.read_label` returns a label: array, ITK geometry and case metadata."""
    grid = grid_of_case(reference) if reference is not None else None
    if reference is not None and grid is None:
        raise DataError(f"a DICOM {ground_truth_kind(path)} is placed on its image series: the image "
                        f"{reference.metadata.get('image_path', reference.case_id)} is not a DICOM series folder",
                        path)
    found = read_objects(path, grid)
    for note in found.notes:
        warnings.warn(f"{path.name}: {note}", DicomObjectWarning, stacklevel=3)
    label, names, targets = object_label(found.objects, found.grid.shape)
    geometry = {} if reference is not None else grid_geometry(found.grid)  # the case's own series: its geometry
    info = {"label_names": names, "targets": targets, "dicom_objects": found.kind, "dicom_object_path": str(path),
            "notes": list(found.notes), "dicom_series_id": found.grid.series_uid}
    if reference is None and found.grid.folder is not None:  # found beside the file: where (a case has its own)
        info["dicom_series_folder"] = str(Path(found.grid.folder).resolve())
    return label, geometry, info


def grid_geometry(grid: SeriesGrid) -> dict[str, Any]:
    """ITK-order spacing, origin and direction of the grid (what the series reader gives the image)."""
    z = grid.slice_z
    step = float(np.median(np.diff(z))) if len(z) > 1 else 1.0
    direction = np.stack([grid.row_direction, grid.column_direction, grid.normal * np.sign(step)], axis=1)
    return {"spacing": (grid.pixel_spacing[1], grid.pixel_spacing[0], abs(step)),
            "origin": tuple(float(v) for v in grid.positions[0]),
            "direction": tuple(float(v) for v in direction.ravel())}


def folder_ground_truth(case: Case) -> Path | None:
    """The one SEG or RTSTRUCT in a DICOM case's series folder that references its series (None when there is
    none; several: a :class:`DicomObjectWarning` naming them, none taken)."""
    folder, series = case.metadata.get("dicom_series_folder"), case.metadata.get("dicom_series_id")
    if not folder or not series:
        return None
    from .dicom import dicom_series_files

    slices = {Path(f).resolve() for f in dicom_series_files(folder, series)[0]}
    found = []
    for path in sorted(Path(folder).iterdir()):  # the series' own slices are not read again
        if (path.is_file() and not path.name.startswith(".") and path.resolve() not in slices
                and ground_truth_kind(path)):
            uids, _ = referenced_series(path)
            if series in uids:
                found.append(path)
    if len(found) > 1:
        warnings.warn(f"{folder}: {len(found)} ground truths of the series ({', '.join(p.name for p in found)}): "
                      "none opened; give one as the label", DicomObjectWarning, stacklevel=3)
        return None
    return found[0] if found else None


__all__ = ["DicomObjectWarning", "DicomObjects", "GROUND_TRUTH_MODALITIES", "ObjectMask", "find_series",
           "folder_ground_truth", "ground_truth_kind", "grid_of_case", "object_label", "object_label_file",
           "read_objects", "referenced_series"]
