"""Reading model checkpoints safely, with messages that say what the file is.

Every backend that loads weights reads them with :func:`read_torch_checkpoint`:
``torch.load(..., weights_only=True)``, so a file is never unpickled. When torch
refuses a file, its own message advises re-running with ``weights_only=False``
("... will likely succeed"), which would execute whatever the file holds; that
advice is never passed on. The error says instead what the file looks like
(text, a plain Python pickle, a damaged zip archive, random bytes, a pickle
holding objects that are not weights) and what was expected.

Also here: :func:`plain` and :func:`shape_text`, to put numbers and shapes in
messages without numpy reprs (``np.float64(2.0)``) or Python tuples, and
:func:`warn_unused_model_options` for the weight-free baselines.
"""
from __future__ import annotations

import re
import warnings
import zipfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.errors import DataError, MedsamEvalError, ModelOptionError  # noqa: F401 - models import it from here
from ..core.options import plain


class CheckpointError(DataError):
    """A model checkpoint that is missing, unreadable, or not the model's (any model's checkpoint)."""


class MissingCheckpointError(CheckpointError):
    """A model that needs weights was built without a checkpoint."""


# --------------------------------------------------------------------------- message formatting

# plain (a number as people write it) lives in ..core.options, where the option checks use it too


def shape_text(shape: Iterable[Any]) -> str:
    """An array shape as ``512 x 512 x 3`` (``scalar`` for ``()``)."""
    dims = [plain(d) for d in shape]
    return " x ".join(dims) if dims else "scalar"


def names_text(names: Iterable[Any], limit: int = 5) -> str:
    """Up to ``limit`` names, comma separated, with ``...`` when there are more."""
    items = [str(n) for n in names]
    text = ", ".join(items[:limit])
    return text + (", ..." if len(items) > limit else "") if items else "nothing"


# --------------------------------------------------------------------------- what a file is

_PICKLE_GLOBAL = re.compile(r"GLOBAL ([A-Za-z_][\w.]*)")


def describe_file(path: Path) -> str:
    """What the first bytes of ``path`` say it is, in words (no unpickling)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError as error:
        return f"unreadable ({error.strerror or error})"
    if not head:
        return "an empty file"
    if head.startswith(b"PK\x03\x04"):
        return "a zip archive (the format torch.save writes)"
    if len(head) > 9 and head[8:9] == b"{" and b'"' in head[9:64]:
        return "a safetensors file (not a PyTorch .pt/.pth checkpoint)"
    if head[:1] == b"\x80" and len(head) > 1 and 1 <= head[1] <= 5:
        return "a Python pickle (not the format torch.save writes)"
    if head.startswith(b"\x93NUMPY"):
        return "a NumPy .npy array"
    if head.startswith((b"\x89HDF", b"\x89PNG", b"\x1f\x8b")):
        return {b"\x89H": "an HDF5 file", b"\x89P": "a PNG image", b"\x1f\x8b": "a gzip file"}[head[:2]]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and sum(ch.isprintable() or ch in "\r\n\t" for ch in text) >= 0.95 * len(text):
        return "a text file"
    return "unrecognised binary data"


def _load_failure_reason(path: Path, error: BaseException) -> str:
    """Why torch could not read ``path``, in words; torch's unsafe advice left out."""
    kind = describe_file(path)
    message = str(error)
    if "Weights only load failed" in message or type(error).__name__ == "UnpicklingError":
        found = _PICKLE_GLOBAL.search(message)
        if found:
            return f"{kind} that holds Python objects ({found.group(1)}), not only tensors"
        if kind.startswith("a zip archive"):
            return f"{kind} with a damaged or unsupported pickle inside"
        if kind.startswith("a Python pickle"):
            return kind
        return f"{kind}, not a PyTorch checkpoint"
    if kind.startswith("a zip archive"):
        if "central directory" in message or isinstance(error, zipfile.BadZipFile):
            return f"{kind}, truncated or damaged"
        return f"{kind}, but not a readable PyTorch checkpoint"
    if kind.startswith(("a text file", "unrecognised", "an empty", "a safetensors", "a NumPy", "an HDF5",
                        "a PNG", "a gzip", "unreadable")):
        return f"{kind}, not a PyTorch checkpoint"
    if kind.startswith("a Python pickle"):
        return f"{kind}, damaged or truncated"
    return kind  # pragma: no cover - describe_file covers every case above


def read_torch_checkpoint(
    path: Path, model: str, expected: str, error_class: type[DataError] = DataError
) -> Any:
    """``torch.load(path, map_location='cpu', weights_only=True)``; a file torch cannot read
    raises ``error_class`` naming the file: ``not a readable PyTorch checkpoint of <model>:
    <what the file is>; expected <expected>``. The file is never unpickled."""
    import torch

    try:
        with warnings.catch_warnings():
            # e.g. "Detected pickle protocol 4 ...": torch's remark, not the user's concern
            warnings.simplefilter("ignore", UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises UnpicklingError, RuntimeError, KeyError, EOFError, ...
        raise error_class(
            f"not a readable PyTorch checkpoint of {model}: {_load_failure_reason(path, error)}; expected {expected}",
            path,
        ) from None


def tensor_state_dict(obj: Any, path: Path, model: str, error_class: type[DataError] = DataError) -> Mapping[str, Any]:
    """``obj`` when it is a non-empty mapping of names to tensors, else ``error_class`` naming the file."""
    import torch

    if not isinstance(obj, Mapping):
        raise error_class(f"not a {model} checkpoint: it holds a {type(obj).__name__}, not a state dict", path)
    if not obj:
        raise error_class(f"not a {model} checkpoint: its state dict is empty", path)
    others = [str(k) for k, v in obj.items() if not isinstance(v, torch.Tensor)]
    if others:
        raise error_class(f"not a {model} checkpoint: entries that are not tensors ({names_text(others)})", path)
    return obj


# --------------------------------------------------------------------------- weight-free models


def _explicit(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and value.strip().lower() in ("", "auto"))


def warn_unused_model_options(model: str, device: Any = None, options: Mapping[str, Any] | None = None) -> None:
    """Warn that a model without a network ignores ``device`` (other than None/'auto') and ``options``."""
    if _explicit(device):
        warnings.warn(f"model {model!r} runs no network; --device {device} is ignored", UserWarning, stacklevel=3)
    ignored = sorted(k for k, v in (options or {}).items() if v is not None)
    if ignored:
        warnings.warn(f"model {model!r} runs no network; option(s) {', '.join(ignored)} are ignored", UserWarning,
                      stacklevel=3)


__all__ = [
    "ModelOptionError",
    "describe_file",
    "names_text",
    "plain",
    "read_torch_checkpoint",
    "shape_text",
    "tensor_state_dict",
    "warn_unused_model_options",
]
