"""The CVPR challenges' prompt keys of an npz (``boxes``, ``bbox``, ``clicks``, ``clicks_order``), read safely.

The CVPR 2025 interactive challenge stores its prompts as pickled object arrays: ``boxes`` is a list of
dictionaries (``{"z_min": 27, "z_max": 396, "z_mid": 311, "z_mid_x_min": 175, ...}`` per class), ``clicks``
a list of ``{"fg": [...], "bg": [...]}``. ``np.load(allow_pickle=False)`` refuses them, and a plain
``pickle.load`` of a user's file can run any code. Here the member is unpickled by an unpickler that
builds only numpy arrays, numpy scalars and Python's plain containers and numbers: anything else in the
pickle is refused with a :class:`DataError` naming the key.
"""
from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import DataError

#: the object keys read (any other object array in an npz is refused)
PROMPT_KEYS = ("boxes", "bbox", "clicks", "clicks_order")
#: the only callables the unpickler may build: numpy's array and scalar reconstruction
_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
            ("numpy", "ndarray"), ("numpy", "dtype")}


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not a plain array, number or container")


def read_object_array(path: Path, key: str) -> np.ndarray:
    """The object array ``key`` of the npz at ``path``, unpickled safely (module doc)."""
    with zipfile.ZipFile(path) as archive, archive.open(f"{key}.npy") as member:
        version = np.lib.format.read_magic(member)
        readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            raise DataError(f"array '{key}' has an npy format version {version} this tool does not read", path)
        _shape, _fortran, dtype = readers[version](member)
        if not dtype.hasobject:
            raise DataError(f"array '{key}' holds no Python objects", path)
        try:
            value = _PlainUnpickler(io.BytesIO(member.read()), encoding="latin1").load()
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as error:
            raise DataError(f"array '{key}' is a pickle this tool does not unpickle ({error}); only the "
                            f"challenge's prompt keys ({', '.join(PROMPT_KEYS)}) as plain lists and "
                            "dictionaries are read", path) from None
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


def challenge_boxes(boxes: Any) -> list[dict[str, int]] | None:
    """The CVPR 2025 box dictionaries of an npz's ``boxes`` (one per class, in label order); None when
    ``boxes`` is not that (the CVPR 2024 array of 2D/3D boxes, say)."""
    items = plain(boxes)
    wanted = {"z_min", "z_max", "z_mid", "z_mid_x_min", "z_mid_y_min", "z_mid_x_max", "z_mid_y_max"}
    if isinstance(items, list) and items and all(isinstance(b, dict) and wanted <= set(b) for b in items):
        return [{k: int(b[k]) for k in sorted(wanted)} for b in items]
    return None


__all__ = ["PROMPT_KEYS", "challenge_boxes", "plain", "read_object_array"]
