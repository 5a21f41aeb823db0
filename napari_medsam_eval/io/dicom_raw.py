"""DICOM elements read from a file's raw bytes: the few a reader needs, without pydicom's datasets.

pydicom builds a Dataset for every item of every sequence it is asked about, and converts each value through its
hooks: for the 600 frames of a SEG (six nested items a frame) that was 0.17 s, for the 200 slice headers of a
series 0.05 s: most of reading a SEG as ground truth (benchmarks/dicom_io.py). :func:`read_raw` walks a file
(memory-mapped, up to its pixel data) and keeps only the values asked for, by their tag path (:data:`Spec`): an element's, or
every item of a sequence each read by its own spec (a nested sequence not so named: its first item).

Little-endian files only, explicit VR or implicit (what GDCM, highdicom, dcmqi, 3D Slicer and scanners write);
another transfer syntax (deflated, big-endian) or bytes that do not parse as the standard's elements and items
raise :class:`Unparsed`, and the caller reads the file with pydicom as before.
"""
from __future__ import annotations

import mmap
import struct
from functools import lru_cache
from pathlib import Path
from typing import Any

#: item, item delimitation and sequence delimitation tags, and the undefined length
_ITEM, _ITEM_END, _SEQUENCE_END, _UNDEFINED = 0xFFFEE000, 0xFFFEE00D, 0xFFFEE0DD, 0xFFFFFFFF
#: explicit VRs whose length takes 4 bytes after 2 reserved ones
_LONG_VRS = {b"OB", b"OD", b"OF", b"OL", b"OV", b"OW", b"SQ", b"SV", b"UC", b"UN", b"UR", b"UT", b"UV"}
_PIXEL_DATA, _TRANSFER_SYNTAX = 0x7FE00010, 0x00020010
EXPLICIT_VR_LITTLE_ENDIAN, IMPLICIT_VR_LITTLE_ENDIAN = "1.2.840.10008.1.2.1", "1.2.840.10008.1.2"

#: what to read: a tag path (from the data set, or from an item) -> a name for its raw value, or, for a sequence,
#: (name, spec): every item of it read by that spec, a list of dicts under the name
Spec = dict[tuple[int, ...], "str | tuple[str, Spec]"]
Values = dict[str, Any]


class Unparsed(Exception):
    """The file is not what the walk reads (module doc): read it with pydicom instead."""


def read_raw(path: str | Path, spec: Spec) -> Values:
    """The raw values of ``path`` that ``spec`` names (:data:`Spec`), up to its pixel data."""
    values: Values = {}
    try:
        with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            if buf[128:132] != b"DICM":
                raise Unparsed
            walk = _Walk(buf, {(_TRANSFER_SYNTAX,): "transfer_syntax", **spec})
            walk.top(132, values)
    except (OSError, ValueError, struct.error, IndexError, RecursionError) as error:  # a damaged or hostile file
        raise Unparsed from error
    return values


def text(raw: bytes | None) -> str:
    """A text value (UI, CS, LO...) without its padding."""
    return raw.rstrip(b"\x00 ").decode("ascii", "replace").strip() if raw else ""


def numbers(raw: bytes | None) -> tuple[float, ...] | None:
    """A DS or IS value's numbers (``\\``-separated text); None where there is none or one is not a number."""
    if raw is None:
        return None
    try:
        return tuple(float(part) for part in raw.rstrip(b"\x00 ").decode("ascii").split("\\"))
    except (UnicodeDecodeError, ValueError):
        return None


def unsigned_short(raw: bytes | None) -> int | None:
    """A US value's first number."""
    return struct.unpack("<H", raw[:2])[0] if raw and len(raw) >= 2 else None


class _Walk:
    """One walk over a file's bytes, keeping what ``spec`` names (:data:`Spec`)."""

    def __init__(self, buf: Any, spec: Spec) -> None:
        self.buf, self.spec = buf, spec
        self.implicit: bool | None = None  # known once the file meta group (explicit VR always) is read

    def top(self, pos: int, values: Values) -> None:
        """The file's elements from ``pos`` (the file meta group first) up to the pixel data."""
        while pos < len(self.buf):
            tag = _tag(self.buf, pos)
            if tag >> 16 != 0x0002 and self.implicit is None:  # past the file meta group: its syntax is known
                self.implicit = self._implicit(values)
            if tag >= _PIXEL_DATA:
                break
            pos = self.element(pos, (), self.spec, values)
        if self.implicit is None:  # nothing after the file meta group
            raise Unparsed

    def element(self, pos: int, path: tuple[int, ...], spec: Spec, values: Values | None) -> int:
        """The element at ``pos``, what ``spec`` names of it kept in ``values`` (None: nothing is); the position
        after it."""
        tag, is_sequence, length, pos = self.header(pos)
        key = path + (tag,)
        entry = spec.get(key) if values is not None else None
        if is_sequence:
            if isinstance(entry, tuple):  # every item, each read by its own spec
                return self.sequence(pos, length, (), entry[1], None, values.setdefault(entry[0], []))
            below = values is not None and any(k[:len(key)] == key for k in spec)
            return self.sequence(pos, length, key, spec if below else {}, values if below else None)
        if length == _UNDEFINED or pos + length > len(self.buf):
            raise Unparsed
        if isinstance(entry, str):
            values[entry] = self.buf[pos:pos + length]
        return pos + length

    def sequence(self, pos: int, length: int, path: tuple[int, ...], spec: Spec, values: Values | None,
                 items: list | None = None) -> int:
        """A sequence's items from ``pos`` (``length`` may be undefined); the position after it. ``items``: each
        item read into a dict of its own appended to it; else the first item's elements go into ``values``."""
        end = None if length == _UNDEFINED else pos + length
        first = True
        while end is None or pos < end:
            tag, item_length = _tag(self.buf, pos), struct.unpack_from("<I", self.buf, pos + 4)[0]
            pos += 8
            if tag == _SEQUENCE_END:
                return pos
            if tag != _ITEM:
                raise Unparsed
            if items is not None:
                items.append({})
            target = items[-1] if items is not None else (values if first else None)
            item_end = None if item_length == _UNDEFINED else pos + item_length
            while item_end is None or pos < item_end:
                if _tag(self.buf, pos) == _ITEM_END:
                    pos += 8
                    break
                pos = self.element(pos, path, spec, target)
            if item_end is not None and pos != item_end:
                raise Unparsed
            first = False
        if pos != end:
            raise Unparsed
        return pos

    def header(self, pos: int) -> tuple[int, bool, int, int]:
        """The element at ``pos``: its tag, whether it is a sequence, its value's length and position."""
        buf, tag = self.buf, _tag(self.buf, pos)
        if self.implicit and tag >> 16 != 0x0002:
            length = struct.unpack_from("<I", buf, pos + 4)[0]
            return tag, length == _UNDEFINED or _dictionary_vr(tag) == "SQ", length, pos + 8
        vr = buf[pos + 4:pos + 6]
        if vr in _LONG_VRS:
            return tag, vr == b"SQ", struct.unpack_from("<I", buf, pos + 8)[0], pos + 12
        if vr.isalpha() and vr.isupper():
            return tag, False, struct.unpack_from("<H", buf, pos + 6)[0], pos + 8
        raise Unparsed

    @staticmethod
    def _implicit(values: Values) -> bool:
        """Whether the data set after the file meta group is implicit VR (its transfer syntax, read by then)."""
        found = text(values.get("transfer_syntax"))
        if found not in (EXPLICIT_VR_LITTLE_ENDIAN, IMPLICIT_VR_LITTLE_ENDIAN):
            raise Unparsed
        return found == IMPLICIT_VR_LITTLE_ENDIAN


@lru_cache(maxsize=None)
def _dictionary_vr(tag: int) -> str:
    """The VR the DICOM dictionary gives ``tag`` ('' for a tag it does not know: a private one)."""
    from pydicom.datadict import dictionary_VR

    try:
        return dictionary_VR(tag)
    except KeyError:
        return ""


def _tag(buf: bytes, pos: int) -> int:
    group, element = struct.unpack_from("<HH", buf, pos)
    return group << 16 | element



__all__ = ["EXPLICIT_VR_LITTLE_ENDIAN", "IMPLICIT_VR_LITTLE_ENDIAN", "Unparsed", "numbers", "read_raw", "text",
           "unsigned_short"]
