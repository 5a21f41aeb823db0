"""Where LiteMedSAM's image encoder runs: eager PyTorch, OpenVINO or ONNX Runtime.

The TinyViT encoder is ~85% of a LiteMedSAM slice on a CPU. On 2 cores
(AVX-512) eager PyTorch takes about 0.55 s per 256x256 pass (with the glibc
``MALLOC_*`` settings; several seconds without them); the same graph compiled
by OpenVINO in fp32 takes about 0.25 s, with embeddings within ~4e-6 relative
error of torch's and identical masks (``benchmarks/encoder_variants.py``).
OpenVINO's bf16 (and torch bf16 autocast) are faster but move masks (per-case
DSC down to 0.65 on hippocampus), so fp32 is the default. ONNX Runtime fp32 is
slower than OpenVINO here. With the OpenVINO encoder the mask decoder runs on
OpenVINO too (:mod:`.litemedsam_decoder`); the prompt encoder stays in PyTorch.

An exported graph is made *locally, at first use*, from the loaded torch module
(nothing is downloaded) and cached under :func:`cache_dir` (:mod:`.litemedsam_exports`), keyed by the
checkpoint's SHA-256 and the versions of torch and of the runtime. It is
written to a temporary name and renamed, with a manifest of its files'
SHA-256 and a fingerprint of the torch encoder's output on a fixed input
(:mod:`.litemedsam_fingerprint`). A load runs the engine on that input
and compares (once per process for files unchanged since). A cached export that fails the hash check, fails to load or
gives another output is removed and rebuilt with a warning; when the rebuilt
one is wrong too, or the cache folder cannot be written (read-only, not a
folder), the encoder runs in torch instead, with a warning, and
:meth:`~TorchEncoder.describe` records why.

``engine="auto"`` (the default) is OpenVINO when it is importable and the
device is a CPU, else PyTorch. ``engine="torch"`` is the plain path, kept to
compare against and as the fallback.
"""
from __future__ import annotations

import shutil
import threading
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ..core.errors import MedsamEvalError
from ..core.cache import cache_dir
from .checkpoint_files import ModelOptionError
from .litemedsam_exports import (  # noqa: F401 - re-exported: the precision module and tests use them from here
    _EXPORTERS, EXPORT_FORMAT, INPUT_SHAPE, ExportVariant, _export, _export_openvino, _UseTorch, _verified_entry,
    cached_export, export_counts, export_key, first_line, publish_export, unwritable_cache, verified_or_made)
from .litemedsam_fingerprint import fingerprint_mismatch, manifest_fingerprint

from ..core.options import ENGINE_CHOICES  # noqa: E402 - the ``engine`` option's values, defined with the CLI's choices


class EngineUnavailableError(MedsamEvalError, ImportError):
    """The engine asked for by name needs a package that is not installed."""


def _importable(module: str) -> bool:
    from .openvino_quiet import import_openvino

    try:
        import_openvino() if module == "openvino" else __import__(module)
    except ImportError:
        return False
    return True


def resolve_engine(engine: str | None, device: torch.device) -> str:
    """The concrete engine for an ``engine`` option on ``device``.

    ``None``/``"auto"``: OpenVINO on a CPU when the package imports, else torch.
    An exported engine on a non-CPU device, or an unknown name, is a ValueError;
    a named engine whose package is missing is an :class:`EngineUnavailableError`.
    """
    name = "auto" if engine is None else str(engine).strip().lower()
    if name not in ENGINE_CHOICES:
        raise ModelOptionError(f"engine must be one of {', '.join(ENGINE_CHOICES)}, got {engine!r}")
    if name == "auto":
        return "openvino" if device.type == "cpu" and _importable("openvino") else "torch"
    if name != "torch" and device.type != "cpu":
        raise ModelOptionError(f"engine {name!r} runs on the CPU only; use --engine torch (engine='torch') "
                               f"for device {device}")
    module = {"openvino": "openvino", "onnxruntime": "onnxruntime"}.get(name)
    if module and not _importable(module):
        raise EngineUnavailableError(f"engine {name!r} needs the {module!r} package: pip install {module}")
    return name


# ----------------------------------------------------------------------------
# the engines
# ----------------------------------------------------------------------------

def to_batch(padded: np.ndarray) -> np.ndarray:
    """A preprocessed ``(256, 256, 3)`` slice as the contiguous ``(1, 3, 256, 256)`` float32 input."""
    return np.ascontiguousarray(np.asarray(padded).transpose(2, 0, 1)[None], dtype=np.float32)


class EncoderEngine:
    """Runs the image encoder on one preprocessed ``(256, 256, 3)`` slice in [0, 1]
    (:func:`~.litemedsam_preprocess.preprocess_slice`); returns the ``(1, 256, 64, 64)`` float32 embedding."""

    name = "base"
    #: True for exported engines, whose output is checked against the manifest's fingerprint
    verifiable = False

    def __call__(self, padded: np.ndarray) -> torch.Tensor:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> dict[str, object]:
        return {"engine": self.name}


class TorchEncoder(EncoderEngine):
    """The plain path: the torch module, eager, under ``inference_mode``.

    The input tensor is built as the official script builds it (a permuted,
    i.e. channels-last, view), so this path reproduces it bit for bit.
    """

    name = "torch"

    def __init__(self, encoder: torch.nn.Module, device: torch.device,
                 autocast: Callable[[], object] | None = None, fallback_from: str | None = None,
                 fallback_reason: str | None = None) -> None:
        self.encoder = encoder
        self.device = device
        self._autocast = autocast
        #: the engine asked for, and why torch runs instead (None: torch was asked for)
        self.fallback_from = fallback_from
        self.fallback_reason = fallback_reason

    def __call__(self, padded: np.ndarray) -> torch.Tensor:
        tensor = torch.tensor(padded).float().permute(2, 0, 1).unsqueeze(0).to(self.device)
        with torch.inference_mode():
            if self._autocast is None:
                return self.encoder(tensor).float()
            with self._autocast():
                return self.encoder(tensor).float()

    def describe(self) -> dict[str, object]:
        if self.fallback_from is None:
            return {"engine": self.name}
        return {"engine": self.name, "engine_requested": self.fallback_from, "engine_fallback": self.fallback_reason}


def cpu_config(num_threads: int, precision: str = "f32") -> dict[str, object]:
    """How an exported graph is compiled for the CPU: ``precision`` as the inference precision, one
    stream, latency hint, ``num_threads`` threads, unpinned."""
    return {
        "INFERENCE_PRECISION_HINT": precision,
        "PERFORMANCE_HINT": "LATENCY",
        "NUM_STREAMS": "1",
        "INFERENCE_NUM_THREADS": str(int(num_threads)),
        # pinning puts every process's threads on the first cores: two
        # benchmark workers with one thread each then share one core
        # (measured: 1.04 s/pass each instead of 0.49); unpinned costs
        # nothing for a single process (0.272 vs 0.277 s with 2 threads)
        "ENABLE_CPU_PINNING": False,
    }


class OpenVINOEncoder(EncoderEngine):
    """The encoder compiled by OpenVINO for the CPU, one stream, latency hint.

    ``precision`` is passed as ``INFERENCE_PRECISION_HINT`` explicitly: on CPUs
    with bf16 instructions OpenVINO would otherwise pick bf16, which moves the
    embedding by ~6% (relative) and changes masks.
    """

    name = "openvino"
    verifiable = True  # checked against the manifest's fingerprint at every load

    def __init__(self, model_path: Path, num_threads: int, precision: str = "f32",
                 facts: dict[str, object] | None = None) -> None:
        from .openvino_quiet import import_openvino
        ov = import_openvino()

        self.model_path = model_path
        self.precision = precision
        self.facts = dict(facts or {})  # a variant's facts (quantization, calibration): part of describe()
        self.num_threads = int(num_threads)
        self.compiled = ov.Core().compile_model(str(model_path), "CPU", cpu_config(self.num_threads, precision))
        self._request = self.compiled.create_infer_request()
        self._lock = threading.Lock()  # one infer request: the GUI and a worker may both encode
        self.version = ov.__version__

    def __call__(self, padded: np.ndarray) -> torch.Tensor:
        batch = to_batch(padded)
        with self._lock:
            out = self._request.infer([batch])[0]
            return torch.from_numpy(np.array(out, dtype=np.float32, copy=True))

    def describe(self) -> dict[str, object]:
        return {"engine": self.name, "openvino": self.version, "inference_precision": self.precision,
                **self.facts, "engine_threads": self.num_threads, "export": str(self.model_path)}


class OnnxRuntimeEncoder(EncoderEngine):
    """The encoder exported to ONNX and run by ONNX Runtime's CPU provider."""

    name = "onnxruntime"
    verifiable = True

    def __init__(self, model_path: Path, num_threads: int) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = int(num_threads)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        self.model_path = model_path
        self.num_threads = int(num_threads)
        self.version = ort.__version__

    def __call__(self, padded: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(self.session.run(None, {"image": to_batch(padded)})[0])

    def describe(self) -> dict[str, object]:
        return {"engine": self.name, "onnxruntime": self.version, "engine_threads": self.num_threads,
                "export": str(self.model_path)}


def _load(engine: str, path: Path, num_threads: int, precision: str,
          variant: ExportVariant | None = None) -> EncoderEngine:
    if engine == "openvino":
        if variant is not None:
            return OpenVINOEncoder(path, num_threads, variant.hint, variant.facts)
        return OpenVINOEncoder(path, num_threads, precision)
    return OnnxRuntimeEncoder(path, num_threads)


#: exports whose fingerprint this process has checked, with the state of their files then: a later load
#: of the same unchanged files skips the check pass (a file rewritten since, even to the same bytes, is
#: checked again: its change time differs)
_CHECKED_EXPORTS: set[tuple[str, str, tuple]] = set()


def _files_signature(folder: Path) -> tuple:
    """Each file's name, size, inode and modification and change times (ns) in ``folder``."""
    stats = []
    for file in sorted(folder.iterdir()):
        info = file.stat()
        stats.append((file.name, info.st_size, info.st_ino, info.st_mtime_ns, info.st_ctime_ns))
    return tuple(stats)


def _verified_engine(engine: str, encoder: torch.nn.Module, checkpoint_sha256: str, num_threads: int,
                     precision: str, root: Path | None, variant: ExportVariant | None = None) -> EncoderEngine:
    """The cached export (made now when missing), loaded and checked; a cached export that fails
    is rebuilt once, with a warning; :class:`_UseTorch` when no sound export can be had."""
    path, fresh = _export(engine, encoder, checkpoint_sha256, root, variant)
    tolerance = variant.tolerance if variant is not None else precision
    while True:
        what = "gives a wrong embedding"
        try:
            loaded = (_load(engine, path, num_threads, precision) if variant is None
                      else _load(engine, path, num_threads, precision, variant))
        except Exception as exc:  # the runtimes raise their own error types for unreadable models
            what, problem = "failed to load", first_line(exc)
        else:
            if not getattr(loaded, "verifiable", False):
                return loaded
            checked = (engine, str(tolerance), _files_signature(path.parent))
            problem = None if checked in _CHECKED_EXPORTS else fingerprint_mismatch(
                loaded, manifest_fingerprint(path.parent), tolerance)
            if problem is None:
                _CHECKED_EXPORTS.add(checked)
                return loaded
            del loaded
        if fresh:
            shutil.rmtree(path.parent, ignore_errors=True)  # never leave a known-bad export to be loaded later
            raise _UseTorch(f"the {engine} export made now {what} ({problem})")
        warnings.warn(f"cached {engine} export {path} {what} ({problem}); rebuilding it", RuntimeWarning,
                      stacklevel=3)
        shutil.rmtree(path.parent, ignore_errors=True)
        path, fresh = _export(engine, encoder, checkpoint_sha256, root, variant)


class LazyEncoder(EncoderEngine):
    """An exported engine that is loaded (exported, checked, compiled) at its first pass.

    Used with an embedding store: a run that finds every slice stored never
    pays the load (about a second: hashing the export, the fingerprint pass,
    compiling). Until then :meth:`describe` gives the facts the loaded engine
    will give unless it falls back to torch; afterwards, the loaded engine's.
    """

    def __init__(self, load: Callable[[], EncoderEngine], planned: dict[str, object]) -> None:
        self._load = load
        self._planned = dict(planned)
        self._engine: EncoderEngine | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:  # type: ignore[override]
        return str(self.describe()["engine"])

    @property
    def loaded(self) -> bool:
        return self._engine is not None

    def engine(self) -> EncoderEngine:
        """The engine, loaded now if it was not yet (once, whichever thread asks first)."""
        with self._lock:
            if self._engine is None:
                self._engine = self._load()
            return self._engine

    def __call__(self, padded: np.ndarray) -> torch.Tensor:
        return self.engine()(padded)

    def describe(self) -> dict[str, object]:
        return self._engine.describe() if self._engine is not None else dict(self._planned)


def planned_description(engine: str, checkpoint_sha256: str, num_threads: int, precision: str = "f32",
                        root: Path | None = None, variant: ExportVariant | None = None) -> dict[str, object]:
    """What :meth:`describe` of the exported ``engine`` will say once loaded (a sound export assumed)."""
    folder = (root or cache_dir()) / export_key(engine, checkpoint_sha256, variant.name if variant else "")
    if engine == "openvino":
        from .openvino_quiet import import_openvino
        ov = import_openvino()

        return {"engine": engine, "openvino": ov.__version__,
                "inference_precision": variant.hint if variant else precision, **(variant.facts if variant else {}),
                "engine_threads": int(num_threads), "export": str(folder / "encoder.xml")}
    import onnxruntime as ort

    return {"engine": engine, "onnxruntime": ort.__version__, "engine_threads": int(num_threads),
            "export": str(folder / "encoder.onnx")}


def build_encoder(
    engine: str,
    encoder: torch.nn.Module,
    *,
    device: torch.device,
    checkpoint_sha256: str,
    num_threads: int,
    precision: str = "f32",
    autocast: Callable[[], object] | None = None,
    root: Path | None = None,
    lazy: bool = False,
    variant: ExportVariant | None = None,
) -> EncoderEngine:
    """The encoder engine named ``engine`` (already resolved by :func:`resolve_engine`).

    ``lazy``: a :class:`LazyEncoder` that loads the exported engine at its first pass.
    ``variant``: an :class:`ExportVariant` of the OpenVINO export (the INT8 encoder) instead of the plain one.

    An exported engine is checked at every load: its files against the
    manifest's hashes, its output on a fixed input against the torch
    encoder's fingerprint. A cached export failing either, or failing to
    load, is re-exported once, with a warning. When the export made now is
    wrong as well, or cannot be written (a read-only cache folder), the
    torch encoder is returned, with a warning; its ``describe()`` says why.
    """
    if engine == "torch":
        return TorchEncoder(encoder, device, autocast)
    if lazy:
        planned = planned_description(engine, checkpoint_sha256, num_threads, precision, root, variant)
        return LazyEncoder(lambda: build_encoder(engine, encoder, device=device, checkpoint_sha256=checkpoint_sha256,
                                                 num_threads=num_threads, precision=precision, autocast=autocast,
                                                 root=root, variant=variant), planned)
    try:
        return _verified_engine(engine, encoder, checkpoint_sha256, num_threads, precision, root, variant)
    except _UseTorch as reason:
        if variant is not None:  # a quantized encoder replaced by fp32 torch would be recorded as what it is not
            raise MedsamEvalError(f"the {variant.name} encoder cannot be used: {reason}") from None
        warnings.warn(f"{reason}; the LiteMedSAM image encoder runs in torch instead of {engine} "
                      "(same masks, slower)", RuntimeWarning, stacklevel=2)
        return TorchEncoder(encoder, device, autocast, fallback_from=engine, fallback_reason=str(reason))


__all__ = [
    "ENGINE_CHOICES",
    "EncoderEngine",
    "EngineUnavailableError",
    "ExportVariant",
    "LazyEncoder",
    "OnnxRuntimeEncoder",
    "OpenVINOEncoder",
    "TorchEncoder",
    "build_encoder",
    "cache_dir",
    "cached_export",
    "export_counts",
    "export_key",
    "resolve_engine",
    "to_batch",
]
