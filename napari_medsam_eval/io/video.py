"""Videos: a folder of frames, a video file (mp4, avi, ...) or a NIfTI sequence.

All give a ``video`` Case with image ``(T, Y, X)`` or ``(T, Y, X, 3)`` in the
source dtype (uint8 frames stay uint8: videos are large).

Time spacing: ``t`` is always 1.0 (one frame). Frame folders and video files
carry no physical time step usable as a length (their ``y, x`` spacing is the
frames' TIFF pixel size in mm where they state one, as for a single image,
else unit pixels: ``metadata['spacing_unit']``), and the third pixdim of a 3D
NIfTI sequence is a spatial length field, not a frame interval; the file's
value is kept in ``metadata['spacing_xyz']`` (so written masks reproduce the
header) and a video file's frame rate in ``metadata['fps']``.

Frames are ordered by a natural sort of their names (``frame2`` before
``frame10``); masks in a mask folder are matched to frames by file stem
(SUN-SEG: ``Frame/<case>/0001.jpg`` <-> ``GT/<case>/0001.png``). A frame without
a mask is an error, a mask without a frame is ignored.

A NIfTI whose name ends in ``sequence`` (CAMUS ``patient0001_2CH_half_sequence``
and its ``..._sequence_gt``) is read as a video by default: its SimpleITK array
is ``(T, Y, X)``, the last ITK axis being time.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

import av
import numpy as np

from ..core.case import Case, CaseKind, Spacing
from ..core.errors import DataError
from .case_builder import FRAME_SPACING, check_kind, make_case
from .formats import image_files_in, missing_message, require_file, strip_suffix
from .image2d import check_image_header, read_image_array, read_mask2d
from .sitk_io import read_sitk_case
from .pixel_size import PIXEL_UNITS, frames_pixel_size, spacing_notes
from .sizes import check_ceiling, human_bytes
from .validation import check_same_shape, label_dtype_for

_SEQUENCE_NAME = re.compile(r"(^|_)(half_)?sequence(_gt)?$", re.IGNORECASE)


def is_sequence_name(path: str | Path) -> bool:
    """True for CAMUS-style sequence file names (``..._half_sequence[_gt].nii.gz``)."""
    return bool(_SEQUENCE_NAME.search(strip_suffix(path)))


def _frame_spacing(size_yx: tuple[float, float] | None = None) -> Spacing:
    """One frame on ``t``; the frames' pixel size in mm where they state one (TIFF), else unit pixels."""
    return Spacing.from_array_order((FRAME_SPACING, *(size_yx or (1.0, 1.0))), "tyx")


def read_frame_folder(folder: str | Path, *, kind: CaseKind | None = None, modality: str | None = None,
                      case_id: str | None = None) -> Case:
    """A folder of same-size frames (PNG/JPEG/TIFF), naturally sorted, as a video Case."""
    folder = Path(folder)
    check_kind(kind, ("video",), folder, "a folder of frames")
    files = image_files_in(folder)
    if not files:
        raise DataError("folder holds no image frames (PNG/JPEG/TIFF/BMP)", folder)
    check_image_header(files[0], frames=len(files), where=folder)
    first, notes = read_image_array(files[0])
    frames = np.empty((len(files),) + first.shape, dtype=first.dtype)
    frames[0] = first
    for index, path in enumerate(files[1:], start=1):
        pixels, _ = read_image_array(path)
        if pixels.shape != first.shape or pixels.dtype != first.dtype:
            raise DataError(
                f"frame {pixels.shape} {pixels.dtype} differs from first frame {files[0].name} "
                f"{first.shape} {first.dtype}",
                path,
            )
        frames[index] = pixels
    notes["frame_names"] = [p.name for p in files]
    size = frames_pixel_size(files)
    return make_case(frames, kind="video", spacing=_frame_spacing(size), path=folder,
                     case_id=case_id, modality=modality, metadata={**notes, **spacing_notes(size, files[0])})


def read_mask_folder(folder: str | Path, frame_names: Sequence[str] | None = None,
                     shape: Sequence[int] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Per-frame masks as a ``(T, Y, X)`` label map, matched to ``frame_names`` by stem.

    Each mask follows the 2D mask rules of :mod:`.image2d`. Without
    ``frame_names`` every mask in the folder is used, naturally sorted.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(missing_message(folder, "mask folder") if not folder.exists() else "expected a folder of masks",
                        folder)
    masks = image_files_in(folder)
    if frame_names is not None:
        by_stem = {strip_suffix(p): p for p in masks}
        missing = [name for name in frame_names if strip_suffix(name) not in by_stem]
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise DataError(f"no mask for {len(missing)} of {len(frame_names)} frame(s): {shown}", folder)
        masks = [by_stem[strip_suffix(name)] for name in frame_names]
    if not masks:
        raise DataError("folder holds no mask images", folder)
    frame_shape = tuple(shape[1:]) if shape is not None else None
    if shape is not None and len(masks) != shape[0]:
        raise DataError(f"{len(masks)} masks for {shape[0]} frames", folder)
    labels, infos = [], []
    for path in masks:
        label, info = read_mask2d(path, shape=frame_shape)
        if labels and label.shape != labels[0].shape:
            check_same_shape(label.shape, labels[0].shape, path, masks[0])
        labels.append(label)
        infos.append(info)
    stack = np.stack(labels)
    return stack.astype(label_dtype_for(int(stack.max()))), _merge_mask_infos(infos, masks)


def _merge_mask_infos(infos: list[dict[str, Any]], masks: list[Path]) -> dict[str, Any]:
    merged: dict[str, Any] = {"mask_encoding": "; ".join(sorted({i["mask_encoding"] for i in infos}))}
    for key in ("label_names", "label_source_values"):
        values: dict = {}
        for info in infos:
            values.update(info.get(key, {}))
        if values:
            merged[key] = values
    merged["mask_names"] = [p.name for p in masks]
    return merged


def read_video_file(path: str | Path, *, kind: CaseKind | None = None, modality: str | None = None,
                    case_id: str | None = None) -> Case:
    """An mp4/avi/... file decoded with PyAV as ``(T, Y, X, 3)`` uint8 RGB.

    PyAV is used directly rather than through imageio's ``pyav`` plugin (same
    decoder) because that plugin runs ``gc.collect()`` on every close, which
    costs a second per file inside a napari session.

    A container that declares how many frames it holds must deliver them all:
    a file cut short (its index still promising every frame) is refused with
    both counts, never scored on the frames that happened to decode. The
    declared frames must also fit the memory ceiling of :mod:`.sizes`.
    """
    path = require_file(path)
    check_kind(kind, ("video",), path, "a video file")
    try:
        frames, fps, declared, stopped = _decode_video(path)
    except DataError:
        raise
    except Exception as error:  # PyAV raises its own error types, IndexError when there is no video stream ...
        raise DataError(f"cannot be decoded as a video ({_reason(error)})", path) from None
    _check_frame_count(path, len(frames), declared, stopped)
    notes: dict[str, Any] = {"fps": fps} if fps else {}
    return make_case(np.stack(frames), kind="video", spacing=_frame_spacing(), path=path,
                     case_id=case_id, modality=modality, metadata={**notes, **PIXEL_UNITS})


def _reason(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _check_frame_count(path: Path, decoded: int, declared: int, stopped: BaseException | None) -> None:
    """Refuse a video that decodes no frame, stops on an error, or yields fewer frames than it declares."""
    promised = f"its container declares {declared} frames but " if declared else ""
    if stopped is not None:
        what = f"only {decoded} decode" if declared else f"decoding stopped after {decoded} frame(s)"
        if not declared and not decoded:
            raise DataError(f"cannot be decoded as a video ({_reason(stopped)})", path)
        raise DataError(f"{promised}{what} ({_reason(stopped)}): the file is cut short or damaged; "
                        "refused rather than scored on part of the video", path)
    if not decoded:
        raise DataError("video holds no decodable frame" + (f" (its container declares {declared})"
                                                             if declared else ""), path)
    if declared and decoded < declared:
        raise DataError(f"{promised}only {decoded} decode: the file is cut short or damaged; "
                        "refused rather than scored on part of the video", path)


def _decode_video(path: Path) -> tuple[list[np.ndarray], float | None, int, BaseException | None]:
    """Decoded RGB frames, the frame rate, the frame count the container declares (0: none) and the
    error that stopped decoding early (None when the stream ended)."""
    with av.open(str(path)) as container:
        if not container.streams.video:  # a container written without frames, or sound alone
            kinds = ", ".join(sorted({str(s.type) for s in container.streams})) or "none"
            raise DataError(f"cannot be decoded as a video: it holds no video stream (its streams: {kinds}), no "
                            "frame to read or score", path)
        stream = container.streams.video[0]
        fps = float(stream.average_rate) if stream.average_rate else None
        declared = int(stream.frames or 0)
        width, height = int(stream.codec_context.width or 0), int(stream.codec_context.height or 0)
        expected = declared or _frames_from_duration(container, fps)  # containers without a frame count (webm)
        if expected and width and height:
            n_bytes = expected * width * height * 3
            check_ceiling(n_bytes, f"{expected} frames of {width} x {height} RGB ({human_bytes(n_bytes)})", path)
        frames: list[np.ndarray] = []
        try:
            for frame in container.decode(stream):
                frames.append(frame.to_ndarray(format="rgb24"))
        except av.FFmpegError as error:
            return frames, fps, declared, error
        return frames, fps, declared, None


def _frames_from_duration(container: "av.container.InputContainer", fps: float | None) -> int:
    """Frames a container without a frame count holds by its duration x frame rate (0 when unknown)."""
    if not container.duration or not fps:
        return 0
    return int(container.duration / av.time_base * fps)


def read_nifti_sequence(path: str | Path, *, modality: str | None = None, case_id: str | None = None) -> Case:
    """A 3D NIfTI (or NRRD/MHA) whose last ITK axis is time, as a ``(T, Y, X)`` video Case."""
    return read_sitk_case(path, kind="video", modality=modality, case_id=case_id)
