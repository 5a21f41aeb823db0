"""Where LiteMedSAM's mask decoder runs: eager PyTorch, or OpenVINO beside the OpenVINO encoder.

Once a slice is encoded, every prompt on it (a re-prompt, a correction, each slice of a walk with
its embedding stored) costs the prompt encoder (~0.05 ms) and the mask decoder: ~43 ms in eager
torch on 2 cores, ~26 ms compiled by OpenVINO at fp32 (the two-way transformer over the 64 x 64
grid; measured on an AMD EPYC family 26, 2 vCPUs, ``benchmarks/latency.py``). The logits differ by
~2e-5 at most, so masks are identical but for a pixel whose logit sits that close to 0.

The OpenVINO decoder is the graph of :class:`DecoderGraph` (the torch decoder with its two constant
inputs, the grid's positional encoding and the no-mask dense embedding, inside), exported locally at
first use and cached beside the encoder's export, keyed by the checkpoint's SHA-256 and the versions
(:func:`decoder_key`), written atomically with its files' SHA-256 in a manifest. Every load checks
the files and runs both decoders on a fixed input: an export that fails either is rebuilt once, with
a warning; when that fails too, or the cache cannot be written, the torch decoder runs instead and
:meth:`describe` says why. It is loaded at the first decode, so a process that never decodes never
pays for it. ``engine="torch"`` keeps the torch decoder: that path is the official script's, bit for bit.
"""
from __future__ import annotations

import shutil
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ..core.cache import cache_dir
from .litemedsam_engines import cpu_config
from .litemedsam_exports import _UseTorch, export_key, first_line, publish_export, unwritable_cache, verified_or_made

#: bump when the export recipe changes, so old cached exports are not reused
DECODER_FORMAT = 1
#: the fixed check input: seed of the embedding noise, and the box (256 scale) prompting it
CHECK_SEED = 20261202
CHECK_BOX = (48.0, 64.0, 176.0, 200.0)
#: relative L2 difference allowed between the exported decoder's low-res logits and torch's on the
#: check input (measured ~1e-6; a wrong graph or damaged weights give order 1)
CHECK_TOLERANCE = 1e-3
#: exports made by this process (tests check the cache is reused)
export_count = 0


class DecoderGraph(torch.nn.Module):
    """The mask decoder for one prompt (``multimask_output=False``) with its constant inputs inside:
    ``(embedding (1, 256, 64, 64), sparse (1, N, 256)) -> (low-res logits (1, 1, 256, 256), IoU (1, 1))``."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.mask_decoder = model.mask_decoder
        with torch.no_grad():
            image_pe = model.prompt_encoder.get_dense_pe()
            _, dense = model.prompt_encoder(points=None, boxes=torch.tensor([[CHECK_BOX]]), masks=None)
            check_sparse, _ = model.prompt_encoder(points=None, boxes=torch.tensor([[CHECK_BOX]]), masks=None)
        self.register_buffer("image_pe", image_pe.detach().clone())
        self.register_buffer("dense", dense.detach().clone().contiguous())
        #: the check input's prompt (:func:`check_input`); not part of the graph
        self.check_sparse = check_sparse.detach().clone()

    def forward(self, embedding: torch.Tensor, sparse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.mask_decoder(image_embeddings=embedding, image_pe=self.image_pe, sparse_prompt_embeddings=sparse,
                                 dense_prompt_embeddings=self.dense, multimask_output=False)


class TorchDecoder:
    """The torch decoder, called as the official script calls it (the caller holds inference mode and autocast)."""

    name = "torch"

    def __init__(self, model: torch.nn.Module, image_pe: torch.Tensor, fallback_reason: str | None = None) -> None:
        self.model = model
        self.image_pe = image_pe
        self.fallback_reason = fallback_reason

    def __call__(self, embedding: torch.Tensor, sparse: torch.Tensor,
                 dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.mask_decoder(image_embeddings=embedding, image_pe=self.image_pe,
                                       sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense,
                                       multimask_output=False)

    def describe(self) -> dict[str, object]:
        if self.fallback_reason is None:
            return {"decoder": self.name}
        return {"decoder": self.name, "decoder_requested": "openvino", "decoder_fallback": self.fallback_reason}


class OpenVINODecoder:
    """The exported decoder compiled by OpenVINO for the CPU at fp32 (one stream, latency hint, unpinned)."""

    name = "openvino"

    def __init__(self, model_path: Path, num_threads: int) -> None:
        from .openvino_quiet import import_openvino
        ov = import_openvino()

        self.model_path = model_path
        self.num_threads = int(num_threads)
        self._request = ov.Core().compile_model(str(model_path), "CPU", cpu_config(num_threads)).create_infer_request()
        self._lock = threading.Lock()  # one infer request: the GUI and a worker may both decode

    def __call__(self, embedding: torch.Tensor, sparse: torch.Tensor,
                 dense: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = [np.ascontiguousarray(t.detach().float().cpu().numpy()) for t in (embedding, sparse)]
        with self._lock:
            out = self._request.infer(inputs)
            low, iou = (np.array(out[i], dtype=np.float32, copy=True) for i in range(2))
        return torch.from_numpy(low), torch.from_numpy(iou)

    def describe(self) -> dict[str, object]:
        return {"decoder": self.name, "decoder_export": str(self.model_path)}


class LazyDecoder:
    """A decoder made by ``load`` at the first decode (once, whichever thread asks first)."""

    def __init__(self, load: Callable[[], "TorchDecoder | OpenVINODecoder"]) -> None:
        self._load = load
        self._decoder: TorchDecoder | OpenVINODecoder | None = None
        self._lock = threading.Lock()

    def decoder(self) -> "TorchDecoder | OpenVINODecoder":
        with self._lock:
            if self._decoder is None:
                self._decoder = self._load()
            return self._decoder

    def __call__(self, embedding: torch.Tensor, sparse: torch.Tensor,
                 dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.decoder()(embedding, sparse, dense)

    def describe(self) -> dict[str, object]:
        return self._decoder.describe() if self._decoder is not None else {"decoder": "openvino"}


def decoder_key(checkpoint_sha256: str) -> str:
    """Folder name of the cached export: checkpoint, OpenVINO, torch, recipe version."""
    return export_key("openvino", checkpoint_sha256, part="decoder", recipe=DECODER_FORMAT)


def _export(graph: DecoderGraph, folder: Path) -> Path:
    """Export into a temporary sibling folder with a manifest of file hashes, then rename into place."""
    global export_count
    from .openvino_quiet import import_openvino
    ov = import_openvino()

    from .openvino_quiet import convert_model

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=folder.parent))
    try:
        embedding, sparse = check_input(graph)
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's warnings about python values
            model = convert_model(graph, example_input=(embedding, sparse),
                                  input=[ov.PartialShape([1, 256, 64, 64]), ov.PartialShape([1, -1, 256])])
        ov.save_model(model, str(tmp / "decoder.xml"), compress_to_fp16=False)
        export_count += 1
        publish_export(tmp, folder, {"entry": "decoder.xml"})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder / "decoder.xml"


def check_input(graph: DecoderGraph) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed check input: seeded normal noise as the embedding, :data:`CHECK_BOX`'s sparse embedding."""
    embedding = np.random.default_rng(CHECK_SEED).standard_normal((1, 256, 64, 64), np.float32)
    return torch.from_numpy(embedding), graph.check_sparse


def check_difference(decoder: "OpenVINODecoder", graph: DecoderGraph) -> float:
    """Relative L2 difference of ``decoder``'s low-res logits from torch's on the check input (inf if not finite)."""
    embedding, sparse = check_input(graph)
    with torch.inference_mode():
        expected = graph(embedding, sparse)[0].float()
    got = decoder(embedding, sparse)[0]
    if got.shape != expected.shape or not bool(torch.isfinite(got).all()):
        return float("inf")
    return float(torch.linalg.vector_norm(got - expected) / max(float(torch.linalg.vector_norm(expected)), 1e-12))


def load_openvino_decoder(model: torch.nn.Module, image_pe: torch.Tensor, checkpoint_sha256: str,
                          num_threads: int, root: Path | None = None) -> "OpenVINODecoder | TorchDecoder":
    """The OpenVINO decoder from the cache (exported now when missing), checked against torch on the
    check input; a cached export that fails is rebuilt once, with a warning; the torch decoder (saying
    why) when no sound export can be had."""
    graph = DecoderGraph(model).eval()
    folder = (root or cache_dir()) / decoder_key(checkpoint_sha256)
    try:
        path, fresh = verified_or_made(folder, lambda: _export(graph, folder), "OpenVINO decoder")
        while True:
            try:
                decoder = OpenVINODecoder(path, num_threads)
                difference = check_difference(decoder, graph)
            except Exception as exc:  # noqa: BLE001 - the runtime raises its own types for unreadable models
                problem = f"failed to load ({first_line(exc)})"
            else:
                if difference <= CHECK_TOLERANCE:
                    return decoder
                problem = (f"gives logits {difference:.3g} away from torch's on the check input "
                           f"(relative; allowed {CHECK_TOLERANCE:g})")
            shutil.rmtree(path.parent, ignore_errors=True)  # never leave a known-bad export to be loaded later
            if fresh:
                raise _UseTorch(f"the OpenVINO decoder made now {problem}")
            warnings.warn(f"cached OpenVINO decoder {path} {problem}; rebuilding it", RuntimeWarning, stacklevel=2)
            path, fresh = _export(graph, folder), True
    except OSError as exc:  # a read-only or unwritable cache folder
        reason = unwritable_cache(exc, folder.parent, "the decoder export")
    except _UseTorch as exc:
        reason = str(exc)
    warnings.warn(f"LiteMedSAM's mask decoder runs in torch: {reason}", RuntimeWarning, stacklevel=2)
    return TorchDecoder(model, image_pe, fallback_reason=reason)


__all__ = ["DecoderGraph", "LazyDecoder", "OpenVINODecoder", "TorchDecoder", "decoder_key", "load_openvino_decoder"]
