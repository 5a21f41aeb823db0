"""Recognising a file or folder's format from its name and first bytes.

Dispatch is by suffix (``.nii.gz`` counts as one suffix); a folder is a DICOM
series when it holds ``.dcm`` files or files with the DICOM ``DICM`` marker,
and a video made of frames when it holds image files. A file whose content
plainly contradicts its suffix (a text file named ``.nii.gz``) is reported as
such rather than with the reader's generic failure.
"""
from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Literal

from ..core.errors import DataError, UnknownFormatError

Format = Literal["sitk", "npz", "image2d", "video_file", "dicom_folder", "frame_folder"]

#: single-file formats SimpleITK reads (NIfTI, NRRD, MetaImage, single DICOM file)
SITK_SUFFIXES = (".nii.gz", ".nii", ".nrrd", ".nhdr", ".mha", ".mhd", ".dcm")
NPZ_SUFFIXES = (".npz",)
IMAGE2D_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp")
VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm")
JPEG_SUFFIXES = (".jpg", ".jpeg")

_ALL_SUFFIXES = SITK_SUFFIXES + NPZ_SUFFIXES + IMAGE2D_SUFFIXES + VIDEO_SUFFIXES
#: every file suffix a reader takes
KNOWN_SUFFIXES = _ALL_SUFFIXES
_DICOM_MARKER_OFFSET = 128


def check_name_encoding(path: str | Path) -> Path:
    """``path`` when every part of it is valid UTF-8; else a DataError naming it (its bad bytes shown as ``\\xff``)
    and what to do. SimpleITK aborts the whole process (C++ ``std::logic_error``) on such a name, and a results
    table cannot hold it: refused before any file is opened."""
    path = Path(path)
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise DataError(f"{shown}: the file name is not valid UTF-8; rename it (SimpleITK and the results tables "
                        "take UTF-8 names only)") from None
    return path


def format_suffix(path: str | Path) -> str:
    """Lower-case suffix, treating ``.nii.gz`` as one suffix (``''`` when none)."""
    name = Path(path).name.lower()
    if name.endswith(".nii.gz"):
        return ".nii.gz"
    return Path(name).suffix


def strip_suffix(path: str | Path) -> str:
    """File name without its format suffix: ``case_001.nii.gz`` -> ``case_001``."""
    name = Path(path).name
    suffix = format_suffix(path)
    return name[: len(name) - len(suffix)] if suffix else name


def natural_sort_key(name: str | Path) -> tuple:
    """Sort key putting ``frame2`` before ``frame10`` (digit runs compared as numbers)."""
    parts = re.split(r"(\d+)", Path(name).name.lower())
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in parts if part != "")


def is_broken_link(path: Path) -> bool:
    """A symbolic link whose target does not exist, or that loops (see :func:`is_link_loop`)."""
    return path.is_symlink() and not path.exists()


def is_link_loop(path: str | Path) -> bool:
    """A path the system cannot resolve because its symbolic links lead back to themselves (ELOOP)."""
    try:
        os.stat(path)
    except OSError as error:
        return error.errno == errno.ELOOP
    return False


def link_target(path: str | Path) -> str:
    """What the symbolic link ``path`` points to, as written in the link (``"?"`` if unreadable)."""
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def missing_message(path: Path, what: str = "file") -> str:
    """``file not found``, or, for a dangling symbolic link, where it points (a loop is called a loop)."""
    if is_link_loop(path):
        if not path.is_symlink():
            return f"symbolic link loop: a folder link on its path leads back to itself and never reaches a {what}"
        return (f"symbolic link loop: {path.name} -> {link_target(path)} leads back to itself "
                f"and never reaches a {what}")
    if is_broken_link(path):
        return f"broken symbolic link: its target {link_target(path)} does not exist"
    return f"{what} not found"


def listed_file(path: Path) -> bool:
    """A file to list in a folder: a regular file, or a broken link (so reading it fails loudly)."""
    return path.is_file() or is_broken_link(path)


def require_file(path: str | Path) -> Path:
    """The path as a :class:`Path`, or a DataError when it is missing, a folder or empty."""
    path = Path(path)
    if not path.exists():
        raise DataError(missing_message(path), path)
    if not path.is_file():
        raise DataError("expected a file, found a folder", path)
    if path.stat().st_size == 0:
        raise DataError("file is empty (0 bytes)", path)
    return path


def looks_like_text(path: str | Path, n_bytes: int = 512) -> bool:
    """True when the file's first bytes are printable text (a mislabelled text file)."""
    with open(path, "rb") as handle:
        head = handle.read(n_bytes)
    if not head or b"\x00" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(ch.isprintable() or ch in "\r\n\t" for ch in text)


#: the first bytes a file with this suffix starts with (any one of them), and the format's name
MAGIC: dict[str, tuple[tuple[bytes, ...], str]] = {
    ".png": ((b"\x89PNG\r\n\x1a\n",), "PNG"),
    ".jpg": ((b"\xff\xd8\xff",), "JPEG"),
    ".jpeg": ((b"\xff\xd8\xff",), "JPEG"),
    ".tif": ((b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"), "TIFF"),
    ".tiff": ((b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"), "TIFF"),
    ".bmp": ((b"BM",), "BMP"),
    ".npz": ((b"PK\x03\x04", b"PK\x05\x06"), "npz (zip archive)"),
    ".nii.gz": ((b"\x1f\x8b",), "gzip-compressed NIfTI"),
    ".nrrd": ((b"NRRD",), "NRRD"),
    ".nhdr": ((b"NRRD",), "NRRD header"),
}
#: formats whose file (or header) starts as text: only the reader can judge them
_TEXT_HEADER_SUFFIXES = (".mha", ".mhd")


def content_problem(path: str | Path) -> str | None:
    """Why a file's first bytes contradict its suffix (a text file named ``.nii.gz``, a PNG named
    ``.npz``, an empty file), or None when they fit. Cheap: reads at most 512 bytes, so a reader
    can say this instead of a decoder's generic failure."""
    path = Path(path)
    if path.stat().st_size == 0:
        return "file is empty (0 bytes)"
    suffix = format_suffix(path)
    if suffix in _TEXT_HEADER_SUFFIXES:
        return None
    if suffix in MAGIC:
        magics, name = MAGIC[suffix]
        with open(path, "rb") as handle:
            head = handle.read(16)
        if head.startswith(magics):
            return None
        if looks_like_text(path):
            return f"is a text file, not a {name} file"
        return f"is not a valid {name} file (its first bytes do not match: damaged, or named with the wrong suffix)"
    if suffix == ".dcm" and is_dicom_file_marked(path):
        return None
    if looks_like_text(path):
        return f"is a text file, not a {suffix or 'image'} file"
    return None


def is_dicom_file_marked(path: Path) -> bool:
    """The DICOM Part 10 ``DICM`` marker at byte 128."""
    try:
        with open(path, "rb") as handle:
            handle.seek(_DICOM_MARKER_OFFSET)
            return handle.read(4) == b"DICM"
    except OSError:
        return False


def is_dicom_file(path: Path) -> bool:
    """A ``.dcm`` file, or any file with ``DICM`` at byte 128 (DICOM Part 10)."""
    return path.suffix.lower() == ".dcm" or is_dicom_file_marked(path)


def image_files_in(folder: Path) -> list[Path]:
    """Image files (PNG, JPEG, TIFF, BMP) directly in ``folder``, naturally sorted.

    A broken symbolic link is listed too, so a missing frame or mask fails on
    reading instead of silently shifting the others.
    """
    files = [p for p in folder.iterdir()
             if listed_file(p) and not p.name.startswith(".") and format_suffix(p) in IMAGE2D_SUFFIXES]
    return sorted(files, key=natural_sort_key)


def detect_format(path: str | Path) -> Format:
    """Which reader handles ``path``; raises DataError / UnknownFormatError otherwise."""
    path = check_name_encoding(path)
    if not path.exists():
        raise DataError(missing_message(path), path)
    if path.is_dir():
        return _detect_folder(path)
    if not path.is_file():  # a named pipe would block the first read for ever; a device never ends
        raise DataError(f"not a regular file ({special_file_kind(path)}): give an image file or folder", path)
    suffix = format_suffix(path)
    for fmt, suffixes in (
        ("sitk", SITK_SUFFIXES),
        ("npz", NPZ_SUFFIXES),
        ("image2d", IMAGE2D_SUFFIXES),
        ("video_file", VIDEO_SUFFIXES),
    ):
        if suffix in suffixes:
            return fmt  # type: ignore[return-value]
    if is_dicom_file(path):
        return "sitk"
    raise UnknownFormatError(
        f"unknown format {suffix or '(no suffix)'!r}; supported: {', '.join(_ALL_SUFFIXES)}, "
        "a DICOM series folder or a folder of frames",
        path,
    )


def special_file_kind(path: Path) -> str:
    """What a path that is neither a file nor a folder is, in words."""
    import stat

    mode = path.stat().st_mode
    for test, name in ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def _detect_folder(folder: Path, n_sniffed: int = 20) -> Format:
    """``.dcm`` files -> DICOM; else image files -> frames; else sniff a few files for ``DICM``."""
    files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    if any(p.suffix.lower() == ".dcm" for p in files):
        return "dicom_folder"
    if any(format_suffix(p) in IMAGE2D_SUFFIXES for p in files):
        return "frame_folder"
    if any(is_dicom_file(p) for p in files[:n_sniffed]):
        return "dicom_folder"
    raise UnknownFormatError(_nothing_readable(folder, files), folder)


def _nothing_readable(folder: Path, files: list[Path]) -> str:
    """Why a folder holds nothing to read, in words: other files, only broken links or link loops, or nothing."""
    if files:
        return "folder holds neither a DICOM series nor image frames (PNG/JPEG/TIFF)"
    dangling = sorted(p.name for p in folder.iterdir() if p.is_symlink() and not p.exists())
    if not dangling:
        return "folder is empty"
    shown = ", ".join(dangling[:3]) + (f" and {len(dangling) - 3} more" if len(dangling) > 3 else "")
    return (f"folder holds only symbolic links that reach no file ({shown}: link loops or links to missing "
            f"files); nothing to read")
