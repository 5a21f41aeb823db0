"""LiteMedSAM's exported graphs on disk: made locally at first use, cached atomically, verified by their files' hashes.

An export (the encoder for OpenVINO or ONNX Runtime, an INT8 variant of it, the mask decoder) is
written into a temporary sibling folder with a manifest of its files' SHA-256 and renamed into place
(:func:`publish_export`): another process never sees half an export, and two processes racing keep
one. :func:`verified_or_made` answers the cached one when its files match the manifest, else removes
it (with a warning) and makes it again. The folder's name (:func:`export_key`) holds the checkpoint's
SHA-256, the runtime's and torch's versions and the recipe's version, so any change makes a new one.
Loading and checking an export's output is the engines' part (:mod:`.litemedsam_engines`).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from ..core.cache import cache_dir
from .base import sha256_file
from .litemedsam_fingerprint import reference_fingerprint

#: bump when the export recipe changes, so old cached exports are not reused
EXPORT_FORMAT = 2  # 2: the manifest holds the torch encoder's fingerprint
#: the encoder's input (batch 1, RGB, 256 x 256)
INPUT_SHAPE = (1, 3, 256, 256)
#: exports made by this process, per engine (and ``engine-variant``: tests check the cache is reused)
export_counts: dict[str, int] = {"openvino": 0, "onnxruntime": 0}


@dataclass(frozen=True)
class ExportVariant:
    """Another export derived from the plain one (e.g. the INT8 encoder of :mod:`.litemedsam_precision`).

    ``name`` enters the cache key (so a variant never shares a folder with the plain export or with
    another variant); ``export(encoder, folder)`` writes it into ``folder`` and returns its entry file
    and extra manifest entries (a ``fingerprint`` there replaces the torch encoder's: the variant's own
    output on the fixed input, checked at every load with ``TOLERANCE[tolerance]``); ``facts`` are added
    to the engine's ``describe()`` (and so to the embedding-store key); ``hint`` is the inference precision
    of what the variant leaves unquantized.
    """

    name: str
    export: Callable[[torch.nn.Module, Path], tuple[str, dict[str, Any]]]
    facts: dict[str, object] = field(default_factory=dict)
    hint: str = "f32"
    tolerance: str = "f32"


def _export_openvino(encoder: torch.nn.Module, folder: Path) -> str:
    from .openvino_quiet import import_openvino
    ov = import_openvino()

    from .openvino_quiet import convert_model

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer and deprecation warnings of the torch frontend
        model = convert_model(encoder, example_input=torch.zeros(INPUT_SHAPE))
    ov.save_model(model, str(folder / "encoder.xml"), compress_to_fp16=False)
    return "encoder.xml"


def _export_onnx(encoder: torch.nn.Module, folder: Path) -> str:
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about python control flow on shapes
        torch.onnx.export(encoder, (torch.zeros(INPUT_SHAPE),), str(folder / "encoder.onnx"), opset_version=17,
                          dynamo=False, input_names=["image"], output_names=["embedding"])
    return "encoder.onnx"


_EXPORTERS: dict[str, Callable[[torch.nn.Module, Path], str]] = {
    "openvino": _export_openvino,
    "onnxruntime": _export_onnx,
}


def export_key(engine: str, checkpoint_sha256: str, variant: str = "", part: str = "encoder",
               recipe: int = EXPORT_FORMAT) -> str:
    """Folder name of a cached export of ``part``: checkpoint, torch, runtime, recipe version (and the variant's name)."""
    from .openvino_quiet import import_openvino

    runtime = (import_openvino() if engine == "openvino" else __import__("onnxruntime")).__version__
    key = f"litemedsam-{part}-{checkpoint_sha256[:16]}-{engine}{runtime}-torch{torch.__version__}-v{recipe}"
    key += f"-{variant}" if variant else ""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", key)  # OpenVINO's version holds '/' ("...-releases/2026/4")


def _verified_entry(folder: Path) -> Path | None:
    """The model file of a complete cached export whose files match its manifest, else None."""
    manifest_path = folder / "manifest.json"
    if not manifest_path.is_file():
        return None
    try:
        manifest = json.loads(manifest_path.read_text())
        for name, sha in manifest["files"].items():
            if sha256_file(folder / name) != sha:
                return None
        return folder / manifest["entry"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _export_to_cache(engine: str, encoder: torch.nn.Module, folder: Path, variant: ExportVariant | None = None) -> Path:
    """Export into a temporary sibling folder, write the manifest, rename into place."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=folder.parent))
    try:
        extra: dict[str, Any] = {}
        if variant is None:
            entry = _EXPORTERS[engine](encoder, tmp)
        else:
            entry, extra = variant.export(encoder, tmp)
        counted = engine if variant is None else f"{engine}-{variant.name}"
        export_counts[counted] = export_counts.get(counted, 0) + 1
        publish_export(tmp, folder, {"entry": entry, "fingerprint": reference_fingerprint(encoder), **extra})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder / entry


def publish_export(tmp: Path, folder: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest`` (with the SHA-256 of every file in ``tmp``) into ``tmp`` and rename ``tmp`` to
    ``folder``, atomically; another process's complete export already there is kept."""
    files = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
    (tmp / "manifest.json").write_text(json.dumps({**manifest, "files": files}, indent=1))
    try:
        os.rename(tmp, folder)  # atomic; fails when another process renamed its export first
    except OSError:
        if _verified_entry(folder) is None:
            raise


def cached_export(engine: str, encoder: torch.nn.Module, checkpoint_sha256: str,
                  root: Path | None = None, variant: ExportVariant | None = None) -> tuple[Path, bool]:
    """The model file of the cached export (made now when missing); and whether it was made now.

    A cached export whose files do not match its manifest is removed and
    rebuilt with a warning.
    """
    folder = (root or cache_dir()) / export_key(engine, checkpoint_sha256, variant.name if variant else "")
    return verified_or_made(folder, lambda: _export_to_cache(engine, encoder, folder, variant), f"{engine} export")


def verified_or_made(folder: Path, make: Callable[[], Path], what: str) -> tuple[Path, bool]:
    """The model file of the complete export in ``folder``, or the one ``make()`` makes now (a damaged
    one removed first, with a warning); and whether it was made now."""
    entry = _verified_entry(folder)
    if entry is not None:
        return entry, False
    if folder.exists():
        warnings.warn(f"cached {what} at {folder} is incomplete or corrupt; rebuilding it", RuntimeWarning,
                      stacklevel=3)
        shutil.rmtree(folder, ignore_errors=True)
    return make(), True


class _UseTorch(Exception):
    """Internal: the exported engine cannot be used; the message says why."""


def _export(engine: str, encoder: torch.nn.Module, checkpoint_sha256: str, root: Path | None,
            variant: ExportVariant | None = None) -> tuple[Path, bool]:
    try:
        return cached_export(engine, encoder, checkpoint_sha256, root, variant)
    except OSError as exc:  # a read-only or unwritable cache folder
        raise _UseTorch(unwritable_cache(exc, root or cache_dir(), "the export")) from exc


def unwritable_cache(exc: OSError, folder: Path, what: str) -> str:
    """Why ``what`` cannot be cached: the path ``exc`` names (else ``folder``), its error, and the remedy."""
    where = Path(exc.filename) if getattr(exc, "filename", None) else folder
    return (f"{what} cannot be written to the cache folder {where} ({exc.strerror or type(exc).__name__}; "
            "set NAPARI_MEDSAM_EVAL_CACHE to a writable folder)")


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (160 characters at most), for a one-line reason."""
    return f"{type(exc).__name__}: {(str(exc).strip() or '-').splitlines()[0][:160]}"
