"""The CVPR challenges' prompt keys of an npz (``boxes``, ``bbox``, ``clicks``, ``clicks_order``), read safely.

The CVPR 2025 interactive challenge stores its prompts as pickled object arrays: ``boxes`` is a list of
dictionaries (``{"z_min": 27, "z_max": 396, "z_mid": 311, "z_mid_x_min": 175, ...}`` per class), ``clicks``
a list of ``{"fg": [...], "bg": [...]}``. ``np.load(allow_pickle=False)`` refuses them, and a plain
``pickle.load`` of a user's file can run any code. Here the member is unpickled by an unpickler that
builds only numpy arrays, numpy scalars and Python's plain containers and numbers: anything else in the
pickle is refused with a :class:`DataError` naming the key.

A pickle also costs what it builds, and a few hundred bytes can build a lot: a list nested 40 levels as
``[x, x]`` (shared references) is 2**40 items once copied, a list holding itself never ends, a bytes object
or an array header can ask for gigabytes. So the prompts are bounded, each bound checked before what it
guards is built (:data:`MAX_PICKLE_BYTES` before the member is read, :data:`MAX_OPCODES` before anything is
unpickled, :data:`MAX_ARRAY_BYTES` before an array is allocated, :data:`MAX_DEPTH`, :data:`MAX_OBJECTS`,
:data:`MAX_DATA_BYTES` and self-references before anything is copied or converted). A challenge's prompts
are a few kilobytes; a pickle past a bound is a DataError naming the file, the key and the bound.
"""
from __future__ import annotations

import io
import math
import pickle
import pickletools
import zipfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..core.decoded_limit import human_bytes
from ..core.errors import DataError

#: the object keys read (any other object array in an npz is refused)
PROMPT_KEYS = ("boxes", "bbox", "clicks", "clicks_order")
#: the largest pickled prompt member read (a challenge's prompts are a few kilobytes)
MAX_PICKLE_BYTES = 64 << 20
#: the most pickle operations (each builds at most one object) unpickled
MAX_OPCODES = 1_000_000
#: the most values the prompts may hold, a value reached twice (a shared reference) counted twice
MAX_OBJECTS = 1_000_000
#: the deepest nesting of lists, tuples, dictionaries and object arrays (a challenge's: 4)
MAX_DEPTH = 32
#: the most bytes of text, bytes and array data the prompts may hold, shared references counted each time
MAX_DATA_BYTES = 64 << 20
#: the widest integer a prompt may hold (a coordinate or count: 64 bits; Python's have no limit)
MAX_INT_BITS = 1024
#: the largest array one pickle operation may allocate
MAX_ARRAY_BYTES = 64 << 20
_NUMPY_RECONSTRUCT = np.ndarray.__reduce__(np.zeros(1))[0]


class PickleBoundError(pickle.UnpicklingError):
    """A prompt pickle past one of the module's bounds (refused before it costs what it asks)."""


def _check_array(shape: Any, dtype: Any) -> tuple[tuple[int, ...], np.dtype]:
    """``shape`` and ``dtype`` of an array the pickle asks for, refused above :data:`MAX_ARRAY_BYTES`."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    if not isinstance(dims, tuple) or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                                              and d >= 0 for d in dims):
        raise PickleBoundError(f"an array shape {str(shape)[:60]} is not a tuple of sizes")
    dtype = np.dtype(dtype)
    size = math.prod(int(d) for d in dims) * max(dtype.itemsize, 1)
    if size > MAX_ARRAY_BYTES:
        raise PickleBoundError(f"an array of shape {tuple(int(d) for d in dims)} {dtype} ({human_bytes(size)}) "
                               f"is above the {human_bytes(MAX_ARRAY_BYTES)} a prompt array may take")
    return tuple(int(d) for d in dims), dtype


class _CheckedArray(np.ndarray):
    """The ndarray the unpickler builds: its size is checked before numpy allocates it, and its pickled state
    (a list of objects must have one item per element: numpy reads past a shorter list) before it is set."""

    def __new__(cls, shape: Any, dtype: Any = float, *args: Any, **kwargs: Any) -> "_CheckedArray":
        dims, dtype = _check_array(shape, dtype)
        return super().__new__(cls, dims, dtype, *args, **kwargs)

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise PickleBoundError("an array's state is not numpy's (shape, dtype, order, data)")
        shape, dtype, data = state[-4], state[-3], state[-1]
        if not isinstance(dtype, np.dtype):
            raise PickleBoundError("an array's state names no dtype")
        dims, dtype = _check_array(shape, dtype)
        if dtype.hasobject:
            if dtype != np.dtype(object):
                raise PickleBoundError(f"a structured array holding objects ({dtype}) is not read")
            if not isinstance(data, list) or len(data) != math.prod(dims):
                raise PickleBoundError(f"an object array of shape {dims} does not list one item per element")
        elif not isinstance(data, (bytes, bytearray)) or len(data) != math.prod(dims) * dtype.itemsize:
            raise PickleBoundError(f"an array of shape {dims} {dtype} does not hold its data")
        super().__setstate__(state)


def _reconstruct(_subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    """numpy's ``_reconstruct``, the size checked first and the array a :class:`_CheckedArray`."""
    dims, dtype = _check_array(shape, dtype)
    return _NUMPY_RECONSTRUCT(_CheckedArray, dims, dtype)


#: the only callables the unpickler may build: numpy's array and scalar reconstruction (arrays checked)
_ALLOWED = {("numpy.core.multiarray", "_reconstruct"): _reconstruct,
            ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
            ("numpy.core.multiarray", "scalar"): None, ("numpy._core.multiarray", "scalar"): None,
            ("numpy", "ndarray"): _CheckedArray, ("numpy", "dtype"): None}


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return _ALLOWED[module, name] or super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not a plain array, number or container")


def _count_opcodes(data: bytes) -> None:
    """Refuse a pickle of more than :data:`MAX_OPCODES` operations, or more text than :data:`MAX_DATA_BYTES`,
    reading its operations only (nothing is built)."""
    text = 0
    for number, (_op, arg, _pos) in enumerate(pickletools.genops(data), start=1):
        if number > MAX_OPCODES:
            raise PickleBoundError(f"it takes more than {MAX_OPCODES:,} operations to build")
        if isinstance(arg, int) and arg.bit_length() > MAX_INT_BITS:
            raise PickleBoundError(f"it holds an integer of {arg.bit_length():,} bits (a coordinate needs 64)")
        if isinstance(arg, (bytes, bytearray, str)):
            text += len(arg)
            if text > MAX_DATA_BYTES:
                raise PickleBoundError(f"it holds more than {human_bytes(MAX_DATA_BYTES)} of text and bytes")


class _Budget:
    """What the values reached so far hold (:func:`_measure`)."""

    def __init__(self) -> None:
        self.objects = 0
        self.data = 0

    def add(self, objects: int, data: int) -> None:
        self.objects += objects
        self.data += data
        if self.objects > MAX_OBJECTS:
            raise PickleBoundError(f"it holds more than {MAX_OBJECTS:,} values once its shared references are "
                                   "counted where they occur")
        if self.data > MAX_DATA_BYTES:
            raise PickleBoundError(f"it holds more than {human_bytes(MAX_DATA_BYTES)} of text, bytes and array "
                                   "data once its shared references are counted where they occur")


def _children(value: Any) -> Iterable[Any] | None:
    if isinstance(value, dict):
        return (item for pair in value.items() for item in pair)
    if isinstance(value, (list, tuple, set, frozenset)):
        return value
    if isinstance(value, np.ndarray) and value.dtype.hasobject:
        return value.flat
    return None


def _data_bytes(value: Any) -> int:
    if isinstance(value, (bytes, bytearray, str)):
        return len(value)
    if isinstance(value, np.ndarray) and not value.dtype.hasobject:
        return int(value.nbytes)
    return 0


def _measure(value: Any, budget: _Budget, depth: int, path: set[int], done: dict[int, tuple[int, int]]) -> None:
    """Add ``value``'s expanded size to ``budget`` (a value shared counted where it occurs, with the cost of
    looking at it once: ``done``), refusing nesting past :data:`MAX_DEPTH` and a value holding itself."""
    key = id(value)
    if key in done:
        budget.add(*done[key])
        return
    if key in path:
        raise PickleBoundError("a list or dictionary holds itself (a self-reference never ends)")
    children = _children(value)
    if children is None:
        budget.add(1, _data_bytes(value))
        return
    if depth >= MAX_DEPTH:
        raise PickleBoundError(f"it nests lists, dictionaries or arrays more than {MAX_DEPTH} levels deep")
    before = (budget.objects, budget.data)
    path.add(key)
    budget.add(1, 0)
    for child in children:
        _measure(child, budget, depth + 1, path, done)
    path.discard(key)
    done[key] = (budget.objects - before[0], budget.data - before[1])


def _plain_copy(value: Any) -> Any:
    """``value`` with the unpickler's checked arrays as plain ndarrays (its size measured first)."""
    if isinstance(value, dict):
        return {_plain_copy(k): _plain_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain_copy(v) for v in value)
    if isinstance(value, np.ndarray):
        array = value.view(np.ndarray)
        if array.dtype.hasobject:
            copy = np.empty(array.shape, dtype=object)
            for index, item in enumerate(array.flat):
                copy.flat[index] = _plain_copy(item)
            return copy
        return array
    return value


def bounded_unpickle(data: bytes) -> Any:
    """The plain value pickled in ``data``, every bound of the module doc checked before it costs anything;
    a :class:`PickleBoundError` (or pickle's own error) otherwise."""
    _count_opcodes(data)
    value = _PlainUnpickler(io.BytesIO(data), encoding="latin1").load()
    _measure(value, _Budget(), 0, set(), {})
    return _plain_copy(value)


def _member_name(archive: zipfile.ZipFile, key: str) -> str:
    """The archive member numpy reads as ``key`` (its own name first, as ``np.load`` does, then ``key.npy``)."""
    names = set(archive.namelist())
    return key if key in names else f"{key}.npy"


def read_object_array(path: Path, key: str) -> np.ndarray:
    """The object array ``key`` of the npz at ``path``, unpickled safely and within bounds (module doc)."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(_member_name(archive, key))
        if info.file_size > MAX_PICKLE_BYTES:
            raise DataError(f"array '{key}' holds a pickle of {human_bytes(info.file_size)}, above the "
                            f"{human_bytes(MAX_PICKLE_BYTES)} a prompt key may hold (a challenge's prompts are a "
                            "few kilobytes); refused before reading it", path)
        with archive.open(info) as member:
            version = np.lib.format.read_magic(member)
            readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in readers:
                raise DataError(f"array '{key}' has an npy format version {version} this tool does not read", path)
            _shape, _fortran, dtype = readers[version](member)
            if not dtype.hasobject:
                raise DataError(f"array '{key}' holds no Python objects", path)
            data = member.read(MAX_PICKLE_BYTES + 1)
    try:
        if len(data) > MAX_PICKLE_BYTES:  # the archive's size lied
            raise PickleBoundError(f"it is longer than the {human_bytes(MAX_PICKLE_BYTES)} a prompt key may hold")
        value = bounded_unpickle(data)
    except PickleBoundError as error:
        raise DataError(f"array '{key}' is a pickle beyond what a prompt key holds: {error}; refused before "
                        "building it", path) from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
            RecursionError, MemoryError, OverflowError) as error:
        raise DataError(f"array '{key}' is a pickle this tool does not unpickle ({type(error).__name__}: "
                        f"{str(error)[:200]}); only the challenge's prompt keys ({', '.join(PROMPT_KEYS)}) as "
                        "plain lists and dictionaries are read", path) from None
    return np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value


def plain(value: Any) -> Any:
    """``value`` with numpy scalars and arrays turned into Python numbers and lists (JSON-ready)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def challenge_boxes(boxes: Any, path: str | Path | None = None,
                    key: str = "boxes") -> list[dict[str, int]] | None:
    """The CVPR 2025 box dictionaries of an npz's ``boxes`` (one per class, in label order); None when
    ``boxes`` is not that (the CVPR 2024 array of 2D/3D boxes, say). A coordinate that is not a whole number
    (NaN, 2.5, text) is a DataError naming ``path``, ``key``, the box and the coordinate."""
    items = plain(boxes)
    wanted = {"z_min", "z_max", "z_mid", "z_mid_x_min", "z_mid_y_min", "z_mid_x_max", "z_mid_y_max"}
    if not (isinstance(items, list) and items and all(isinstance(b, dict) and wanted <= set(b) for b in items)):
        return None
    out = []
    for number, box in enumerate(items):
        checked = {}
        for name in sorted(wanted):
            value = box[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value != int(value):
                raise DataError(f"array '{key}' box {number} (class {number + 1}): {name} is {value!r}, not a whole "
                                "number of voxels", path)
            checked[name] = int(value)
        out.append(checked)
    return out


__all__ = ["MAX_DEPTH", "MAX_OBJECTS", "MAX_PICKLE_BYTES", "PROMPT_KEYS", "PickleBoundError", "bounded_unpickle",
           "challenge_boxes", "plain", "read_object_array"]
