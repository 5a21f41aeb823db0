"""Writing a predicted mask next to (and aligned with) its source case.

Formats, chosen by the path's suffix:

- ``.nii.gz``/``.nii``/``.nrrd``/``.mha``: the geometry (spacing, origin,
  direction) is copied from the source case's metadata, so the mask overlays
  the source image in any viewer. A case without a header (PNG, frame folder)
  gets its :class:`Spacing` and the ITK defaults.
- ``.npz``: MedSAM style, the mask under ``segs`` plus ``spacing`` in
  **x, y, z** order (as MedSAM npz store it) and ``origin``/``direction`` when known.
- ``.png`` (2D cases only): label values written as they are (1, 2, ...),
  not scaled to 255.
- ``.dcm`` (cases read from a DICOM series only): a DICOM SEG on that series, one segment per label
  value (:mod:`.dicom_seg_write` builds it with highdicom; ``names`` name the segments, ``model`` and
  ``protocol`` its algorithm); :func:`write_dicom_seg` writes segments that overlap.

Every write goes to a temporary file in the target folder, is read back and
compared with the mask (SimpleITK does not report every failed write: on a
full disk it can leave a 0-byte or truncated file and return), is
``fsync``-ed, and only then does ``os.replace`` put it in place. A crash or
a full disk never leaves a half-written mask, and never replaces a good one.
:func:`check_output_path` checks a path before any model work is spent on
what will be written there.
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import imageio.v3 as iio
import numpy as np
import SimpleITK as sitk

from ..core.array_blocks import blocks
from ..core.case import Case
from ..core.errors import DataError, UnknownFormatError, os_problem
from ..core.ownership import check_not_inputs
from .formats import check_name_encoding, format_suffix
from .sitk_io import image_from_array
from .validation import check_same_shape, to_label_array
from ..core.temp_files import MAX_NAME_BYTES, name_fits, temporary_beside

SITK_MASK_SUFFIXES = (".nii.gz", ".nii", ".nrrd", ".mha")
MASK_SUFFIXES = SITK_MASK_SUFFIXES + (".npz", ".png", ".dcm")


def check_output_path(path: str | Path, kind: str | None = None, reference: Case | None = None) -> Path:
    """``path`` as a :class:`Path` when a mask can be written there, else a DataError.

    Checked before any model work: the suffix is a mask format (``.png`` only
    for 2D images, when ``kind`` is given; ``.dcm`` only for a ``reference`` read
    from a DICOM series, when it is given), the path is not a folder, the
    nearest existing parent is a folder (not a file) and writable.
    """
    path = check_name_encoding(path)
    if not name_fits(path):
        raise DataError(f"the file name is {len(os.fsencode(path.name))} bytes, more than a file name may have "
                        f"({MAX_NAME_BYTES}); give a shorter one", path.parent)
    if path.is_dir():
        raise DataError("the output is a folder; give a file name", path)
    suffix = format_suffix(path)
    if suffix not in MASK_SUFFIXES:
        raise UnknownFormatError(f"cannot write a mask as {suffix or '(no suffix)'}; use one of "
                                 f"{', '.join(MASK_SUFFIXES)}", path)
    if suffix == ".png" and kind is not None and kind != "image":
        raise DataError(f"PNG masks are for 2D images; this is a {kind} (use .nii.gz or .npz)", path)
    if suffix == ".dcm" and reference is not None:
        from .dicom_seg_write import dicom_source

        dicom_source(reference, path)
    check_writable_folder(path.parent)
    return path


def check_writable_folder(folder: str | Path) -> Path:
    """``folder`` when it exists as a writable folder or can be made (its nearest existing parent is one)."""
    folder = Path(folder)
    existing = folder
    while not existing.exists():
        if existing.is_symlink():
            raise DataError("is a broken link, not a folder", existing)
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise DataError(f"is a file, not a folder, so {folder} cannot be made", existing)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DataError("folder is not writable", existing)
    return folder


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (same suffix); move it onto ``path`` on success.

    OSErrors (a full disk, a read-only folder) become a DataError naming ``path``.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp_name = temporary_beside(path, suffix=format_suffix(path))
    except OSError as error:
        raise DataError(f"cannot write mask: {os_problem(error)}", path) from None
    os.close(handle)
    temp = Path(temp_name)
    try:
        yield temp
        _fsync(temp)
        os.replace(temp, path)
        _fsync(path.parent)
    except OSError as error:
        raise DataError(f"cannot write mask: {os_problem(error)}; nothing was replaced", path) from None
    finally:
        temp.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.EBADF):  # folders on some file systems
            raise
    finally:
        os.close(fd)


def _same_blocks(back: np.ndarray, labels: np.ndarray) -> bool:
    """Equal shape and values, compared block by block (no mask-sized temporary)."""
    return back.shape == labels.shape and all(np.array_equal(back[part], labels[part]) for part in blocks(labels))


def _npz_holds(temp: Path, labels: np.ndarray) -> bool:
    """``segs`` of the written npz equals ``labels``, read block by block from the archive (not inflated whole)."""
    with zipfile.ZipFile(temp) as archive, archive.open("segs.npy") as member:
        version = np.lib.format.read_magic(member)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
        shape, fortran, dtype = read_header[version](member)  # np.savez writes 1.0 (2.0 for huge headers)
        if tuple(shape) != labels.shape or fortran:
            return False
        row = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
        for part in blocks(labels):
            count = (part.stop - part.start) * row if len(shape) else 1
            data = member.read(count * dtype.itemsize)
            if len(data) != count * dtype.itemsize:
                return False
            if not np.array_equal(np.frombuffer(data, dtype=dtype).reshape(labels[part].shape), labels[part]):
                return False
    return True


def _holds(temp: Path, suffix: str, labels: np.ndarray) -> bool:
    """Whether the written file holds exactly ``labels``, read back with the format's reader."""
    if suffix == ".npz":
        return _npz_holds(temp, labels)
    if suffix == ".png":
        return _same_blocks(np.asarray(iio.imread(temp, extension=".png")), labels)
    image = sitk.ReadImage(str(temp))
    return _same_blocks(sitk.GetArrayViewFromImage(image), labels)  # the view, while ``image`` lives


def verify_written(temp: Path, labels: np.ndarray, path: Path, holds: Callable[[], bool] | None = None) -> None:
    """A DataError unless ``temp`` holds exactly ``labels`` (read back with the format's reader; ``holds``
    says so for a format that is no label map, a DICOM SEG)."""
    size = temp.stat().st_size
    problem = None
    if size == 0:
        problem = "0 bytes were written"
    else:
        try:
            same = holds() if holds is not None else _holds(temp, format_suffix(path), labels)
        except Exception as error:  # noqa: BLE001 - any reader failure means the file is not what we wrote
            problem = f"the written file cannot be read back ({' '.join(str(error).split())[:120]})"
        else:
            if not same:
                problem = "the written file does not hold the mask"
    if problem is not None:
        free = shutil.disk_usage(path.parent).free
        raise DataError(f"cannot write mask: {problem}; {free} bytes free on its disk (is it full?); "
                        "nothing was replaced", path)


def mask_geometry(reference: Case) -> dict[str, tuple[float, ...]]:
    """ITK-order geometry for a mask of ``reference``: its file's header, else its Spacing (``Case.geometry``)."""
    return reference.geometry()


def write_mask(mask: np.ndarray, path: str | Path, reference: Case, *, names: dict[int, str] | None = None,
               model: str | None = None, protocol: str | None = None) -> Path:
    """Write ``mask`` (the reference's spatial shape, integer labels) to ``path``; returns the path.

    The file is verified (read back, equal to ``mask``) before it replaces
    anything at ``path``; a failed or incomplete write is a DataError, and so
    is a ``path`` that is (or lies inside) the reference's image or label file.
    A ``.dcm`` path gets a DICOM SEG (a reference read from a DICOM series only): a segment per label value,
    named by ``names`` (value -> name; a named value absent from the mask is an empty segment; default: the
    reference's label names), ``model`` and ``protocol`` recorded as its algorithm.
    """
    path = check_output_path(path, reference.kind, reference)
    metadata = reference.metadata
    check_not_inputs([("the mask", path)], [("the image", metadata.get("image_path")),
                                            ("the label", metadata.get("label_path"))])
    suffix = format_suffix(path)
    labels = to_label_array(np.asarray(mask), path)
    check_same_shape(labels.shape, reference.spatial_shape, path, reference.metadata.get("image_path"))
    if suffix == ".npz":
        _write_npz(labels, path, reference)
    elif suffix == ".png":
        _write_png(labels, path, reference)
    elif suffix == ".dcm":
        from .dicom_seg_write import SegAlgorithm, segments_of_labels

        segments = segments_of_labels(labels, names, reference.label_names)
        _write_seg(segments, path, reference, SegAlgorithm(model or "medsam-eval", protocol))
    else:
        _write_sitk(labels, path, reference)
    return path


def write_dicom_seg(segments: Sequence[Any], path: str | Path, reference: Case, algorithm: Any = None) -> Path:
    """Write :class:`~.dicom_seg_write.SegSegment` s (they may overlap) as one DICOM SEG on the series ``reference``
    was read from, made by ``algorithm`` (a :class:`~.dicom_seg_write.SegAlgorithm`); returns the path. Checked,
    atomic and verified as :func:`write_mask` is."""
    from .dicom_seg_write import SegAlgorithm

    path = check_output_path(path, reference.kind, reference)
    metadata = reference.metadata
    check_not_inputs([("the mask", path)], [("the image", metadata.get("image_path")),
                                            ("the label", metadata.get("label_path"))])
    _write_seg(segments, path, reference, algorithm or SegAlgorithm())
    return path


def _write_seg(segments: Sequence[Any], path: Path, reference: Case, algorithm: Any) -> None:
    """The SEG built by :mod:`.dicom_seg_write`, written beside ``path``, read back by highdicom, then moved."""
    from .dicom_seg_write import SegSegment, check_segments, seg_dataset, seg_holds, source_headers

    headers = source_headers(reference, path)
    segments = [SegSegment(s.name, np.asarray(s.mask, dtype=bool), int(s.value)) for s in segments]
    check_segments(segments, reference.spatial_shape, path)
    dataset = seg_dataset(segments, headers, algorithm)
    with atomic_path(path) as temp:
        dataset.save_as(temp)
        verify_written(temp, segments[0].mask, path, lambda: seg_holds(temp, segments, headers))


def _write_sitk(labels: np.ndarray, path: Path, reference: Case) -> None:
    image = image_from_array(labels, mask_geometry(reference))
    with atomic_path(path) as temp:
        try:
            sitk.WriteImage(image, str(temp), useCompression=format_suffix(path) != ".nii")
        except RuntimeError as error:
            raise DataError(f"cannot write mask: {error}".splitlines()[0], path) from None
        verify_written(temp, labels, path)


def _write_npz(labels: np.ndarray, path: Path, reference: Case) -> None:
    geometry = mask_geometry(reference)
    arrays = {"segs": labels, "spacing": np.asarray(geometry["spacing"], dtype=float)}
    for key in ("origin", "direction"):
        if geometry[key] is not None:
            arrays[key] = np.asarray(geometry[key], dtype=float)
    with atomic_path(path) as temp:
        with open(temp, "wb") as handle:
            np.savez_compressed(handle, **arrays)
        verify_written(temp, labels, path)


def _write_png(labels: np.ndarray, path: Path, reference: Case) -> None:
    with atomic_path(path) as temp:
        iio.imwrite(temp, labels, extension=".png")
        verify_written(temp, labels, path)
