"""SAM (ViT-B/L/H) backend through segment_anything's ``SamPredictor``.

What the 2D prompt-mode study (Mazurowski et al. 2023) needs: every call asks for all
three mask candidates (``multimask_output=True``); the result's ``candidates`` and
``candidate_scores`` hold them in SAM's order and ``mask`` is candidate 0 (the
protocol's "first candidate"; the oracle choice picks among the candidates later).
Several boxes are segmented one call per box and the candidates are OR-ed index by
index (candidate i of the result = union of candidate i of every box); their logits
are merged by maximum (so ``logits > 0`` is that union) and their scores averaged.
Points go with a single box, or on their own. Images are embedded once per
``cache_key``; with the ``embeddings`` option (or ``MEDSAM_EVAL_EMBEDDINGS``)
also kept on disk (:mod:`napari_medsam_eval.embeddings`), keyed by the hash of
the resized image the encoder is given, so a later process skips the encoder
(``encoder_calls`` counts its passes).

torch and segment_anything are imported only when a model is built.
"""
from __future__ import annotations

import re
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Hashable, Mapping

import numpy as np

from ..embeddings import EmbeddingKey, EmbeddingStore, content_hash, engine_identity, open_store, sha256_once
from ..core.prompt import Prompt
from .base import SegmentationBackend, SegmentResult
from .sam2_build import (
    CheckpointError,
    MissingCheckpointError,
    check_checkpoint_file,
    load_checkpoint_file,
    load_state_dict_strict,
    resolve_device,
)
from .checkpoint_files import ModelOptionError, names_text, shape_text, tensor_state_dict
from .sam2_frames import to_uint8
from ..core.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    import torch

MODEL_TYPES = ("vit_b", "vit_l", "vit_h")
#: model types with no published checkpoint, built with random weights only (``random_init=True``): SAM's
#: whole code path (the ViT image encoder with windowed and global attention, its neck, the prompt encoder,
#: the mask decoder's three candidates) in a 2-block encoder of width 96, about 1/100 of ViT-B's encoder
#: work. For tests and trying the tool's SAM path (a ViT-B pass of random weights takes 15-30 s on 2 CPU
#: cores); its masks mean nothing, as any random model's. The keyword arguments of segment_anything's
#: ``_build_sam`` (the builder its registry's ViT-B/L/H call).
RANDOM_ONLY_TYPES = {
    "vit_tiny": {"encoder_embed_dim": 96, "encoder_depth": 2, "encoder_num_heads": 3,
                 "encoder_global_attn_indexes": [1]},
}
#: image-encoder width -> model type (to recognise a checkpoint by its weights)
_TYPE_BY_EMBED_DIM = {768: "vit_b", 1024: "vit_l", 1280: "vit_h"}
_TYPE_IN_NAME = re.compile(r"vit[_-]?([bhl])(?![a-z0-9])", re.IGNORECASE)

SAM_CHECKPOINT_SOURCE = (
    "SAM checkpoints (sam_vit_b_01ec64.pth, sam_vit_l_0b3195.pth, sam_vit_h_4b8939.pth) are published by "
    "Meta (github.com/facebookresearch/segment-anything, 'Model Checkpoints'); nothing is downloaded "
    "automatically"
)

#: what a SAM checkpoint file holds (said when a file is not one)
SAM_EXPECTED = "a SAM state dict saved by torch.save, as sam_vit_b_01ec64.pth"
#: the preprocessing's version in stored embeddings' keys (the content hash covers the
#: resized image; the model's normalisation and padding stay those of segment_anything)
SAM_EMBEDDING_PREPROCESSING = "segment_anything ResizeLongestSide + Sam.preprocess/1"

__all__ = ["MODEL_TYPES", "RANDOM_ONLY_TYPES", "SAMBackend", "build", "model_type_from_name", "model_type_from_state_dict"]


def model_type_from_name(path: str | Path) -> str | None:
    """``vit_b``/``vit_l``/``vit_h`` when the file name says so (``sam_vit_b_01ec64.pth``)."""
    match = _TYPE_IN_NAME.search(Path(path).name)
    return None if match is None else f"vit_{match.group(1).lower()}"


def model_type_from_state_dict(state_dict: Mapping[str, Any]) -> str | None:
    """The model type from the width of the patch embedding, None when unknown."""
    weight = state_dict.get("image_encoder.patch_embed.proj.weight")
    if weight is None or not hasattr(weight, "shape"):
        return None
    return _TYPE_BY_EMBED_DIM.get(int(weight.shape[0]))


def _unwrap_state_dict(loaded: Any, path: Path) -> Mapping[str, Any]:
    if isinstance(loaded, Mapping):
        if any(str(k).startswith("image_encoder.") for k in loaded):
            return loaded
        for key in ("model", "state_dict"):
            inner = loaded.get(key)
            if isinstance(inner, Mapping) and any(str(k).startswith("image_encoder.") for k in inner):
                return inner
        raise CheckpointError(f"not a SAM checkpoint: no image_encoder weights (found {names_text(loaded)}); "
                              f"expected {SAM_EXPECTED}", path)
    raise CheckpointError(f"not a SAM checkpoint: it holds a {type(loaded).__name__}, not a state dict", path)


def to_rgb_uint8(image: np.ndarray) -> np.ndarray:
    """(H, W), (H, W, 1) or (H, W, 3) as uint8 RGB (min-max scaled when not uint8)."""
    array = np.asarray(image)
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if not (array.ndim == 2 or (array.ndim == 3 and array.shape[-1] == 3)):
        raise InputError(f"sam: image must be H x W or H x W x 3, got shape {shape_text(array.shape)}")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise InputError(f"sam: image is empty: shape {shape_text(array.shape)}")
    array = to_uint8(array)
    if array.ndim == 2:
        array = np.repeat(array[..., None], 3, axis=-1)
    return np.ascontiguousarray(array)


class SAMBackend(SegmentationBackend):
    """Segment Anything (ViT) with three mask candidates per prompt."""

    name = "sam"
    accepts = frozenset({"box", "points"})
    propagates_natively = False

    def __init__(
        self,
        model: Any,
        *,
        model_type: str,
        checkpoint: Path | None,
        checkpoint_sha256: str | None,
        device: "torch.device",
        random_init: bool = False,
        cache_size: int = 8,
        seed: int = 0,
        embedding_store: EmbeddingStore | None = None,
    ) -> None:
        from segment_anything import SamPredictor

        self.model = model
        self.predictor = SamPredictor(model)
        self.model_type = model_type
        self.checkpoint = checkpoint
        self.checkpoint_sha256 = checkpoint_sha256
        self.device = device
        self.random_init = random_init
        self.cache_size = max(0, int(cache_size))
        self._cache: OrderedDict[Hashable, tuple[Any, tuple[int, int], tuple[int, int]]] = OrderedDict()
        self._current_key: Any = object()  # the cache key of the image now set in the predictor
        self.seed = seed
        self.embedding_store = embedding_store
        self.encoder_calls = 0

    def embedding_key(self, input_image: np.ndarray) -> EmbeddingKey:
        """The persistent store's key of an image resized by the predictor's transform."""
        import torch

        checkpoint = self.checkpoint_sha256 or f"random-init {self.model_type} seed={self.seed}"
        return EmbeddingKey(
            model=f"sam {self.model_type}", checkpoint=checkpoint,
            engine=engine_identity({"engine": "torch"}, device=self.device.type, torch_version=torch.__version__),
            preprocessing=f"{SAM_EMBEDDING_PREPROCESSING} img_size={self.model.image_encoder.img_size}",
            content=content_hash(input_image), dtype=self.embedding_store.dtype if self.embedding_store else "float32",
        )

    def _encode(self, rgb: np.ndarray) -> None:
        """``SamPredictor.set_image``, taking the features from the store when it has them."""
        import torch

        predictor, store = self.predictor, self.embedding_store
        if store is None:
            with torch.inference_mode():
                predictor.set_image(rgb, image_format="RGB")
            self.encoder_calls += 1
            return
        input_image = predictor.transform.apply_image(rgb)  # what set_image does before the encoder

        def compute() -> tuple[np.ndarray, dict[str, object]]:
            tensor = torch.as_tensor(input_image, device=self.device).permute(2, 0, 1).contiguous()[None]
            with torch.inference_mode():
                predictor.set_torch_image(tensor, rgb.shape[:2])
            self.encoder_calls += 1
            return predictor.features.float().cpu().numpy(), {"input_size": list(input_image.shape[:2])}

        shape = (1, self.model.prompt_encoder.embed_dim, *self.model.prompt_encoder.image_embedding_size)
        features, _ = store.cached(self.embedding_key(input_image), shape, compute)
        predictor.reset_image()
        predictor.features = torch.from_numpy(np.array(features, dtype=np.float32, copy=True)).to(self.device)
        predictor.original_size, predictor.input_size = rgb.shape[:2], tuple(input_image.shape[:2])
        predictor.is_image_set = True

    def _set_image(self, rgb: np.ndarray, cache_key: Hashable | None) -> None:
        predictor = self.predictor
        if cache_key is not None:
            if cache_key == self._current_key and predictor.is_image_set:
                return
            cached = self._cache.get(cache_key)
            if cached is not None:
                self._cache.move_to_end(cache_key)
                predictor.features, predictor.original_size, predictor.input_size = cached
                predictor.is_image_set = True
                self._current_key = cache_key
                return
        self._encode(rgb)
        self._current_key = cache_key if cache_key is not None else object()
        if cache_key is not None and self.cache_size:
            self._cache[cache_key] = (predictor.features, predictor.original_size, predictor.input_size)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def encode(self, image: np.ndarray, cache_key: Hashable) -> bool:
        """Set ``image`` in the predictor and keep its features under ``cache_key``."""
        self._set_image(to_rgb_uint8(image), cache_key)
        return self.cache_size > 0

    def segment(self, image: np.ndarray, prompt: Prompt, *, cache_key: Hashable | None = None) -> SegmentResult:
        import torch

        self.check_prompt(prompt)
        if len(prompt.boxes) > 1 and prompt.points:
            raise InputError(f"sam: points can be combined with one box only, got {len(prompt.boxes)} boxes")
        rgb = to_rgb_uint8(image)
        timings: dict[str, float] = {}
        start = time.perf_counter()
        self._set_image(rgb, cache_key)
        self._sync()
        timings["encoder"] = time.perf_counter() - start

        start = time.perf_counter()
        points = prompt.points_array().astype(np.float32) if prompt.points else None
        labels = prompt.labels_array().astype(np.int32) if prompt.points else None
        boxes: list[Any] = [np.asarray(box, dtype=np.float32) for box in prompt.boxes] or [None]
        logits = None
        score_sum = np.zeros(0)
        with torch.inference_mode():
            for box in boxes:
                box_logits, box_scores, _ = self.predictor.predict(
                    point_coords=points, point_labels=labels, box=box, multimask_output=True, return_logits=True
                )
                box_logits = np.asarray(box_logits, dtype=np.float32)
                if logits is None:
                    logits, score_sum = box_logits, np.asarray(box_scores, dtype=np.float64).copy()
                else:
                    np.maximum(logits, box_logits, out=logits)
                    score_sum += box_scores
        timings["decoder"] = time.perf_counter() - start
        assert logits is not None
        candidates = logits > self.model.mask_threshold
        candidate_scores = (score_sum / len(boxes)).astype(np.float32)
        return SegmentResult(
            mask=candidates[0].copy(),
            logits=logits[0].copy(),
            score=float(candidate_scores[0]),
            candidates=candidates,
            candidate_scores=candidate_scores,
            timings=timings,
        )

    def _sync(self) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    def clear_cache(self) -> None:
        self._cache.clear()
        self.predictor.reset_image()
        self._current_key = object()

    def describe(self) -> dict[str, object]:
        from importlib import metadata

        import torch

        try:
            version = metadata.version("segment-anything")
        except metadata.PackageNotFoundError:  # pragma: no cover
            version = None
        return {
            "name": self.name,
            "model_type": self.model_type,
            "checkpoint": None if self.checkpoint is None else str(self.checkpoint),
            "checkpoint_sha256": self.checkpoint_sha256,
            "random_init": self.random_init,
            "device": str(self.device),
            "multimask_output": True,
            **({} if self.embedding_store is None else
               {"embeddings": str(self.embedding_store.root), "embeddings_dtype": self.embedding_store.dtype}),
            "segment_anything_version": version,
            "torch_version": torch.__version__,
        }


def build(
    checkpoint: str | Path | None = None,
    model_type: str | None = None,
    device: Any = None,
    *,
    dtype: Any = None,
    random_init: bool = False,
    seed: int = 0,
    cache_size: int = 8,
    num_threads: int | None = None,
    embeddings: str | Path | bool | None = None,
    embeddings_dtype: str | None = None,
    embeddings_limit: int | str | None = None,
) -> SAMBackend:
    """SAM from a checkpoint (e.g. ``sam_vit_b_01ec64.pth``; a plain state dict, loaded strictly).

    ``model_type`` is ``vit_b``, ``vit_l`` or ``vit_h``; when omitted it is read from the
    checkpoint's file name, else from its weights. ``device``: None/'auto', 'cpu',
    'cuda'. SAM runs in float32 (``dtype`` may only be None/'auto'/'float32').
    ``random_init=True`` builds seeded random weights (``model_type`` default vit_b, or the
    much smaller ``vit_tiny`` of :data:`RANDOM_ONLY_TYPES`) - for tests only, the masks are
    meaningless. ``cache_size``: images whose embedding
    is kept, by ``cache_key``. ``num_threads``: torch's CPU threads.
    ``embeddings``, ``embeddings_dtype``, ``embeddings_limit``: the persistent
    embedding store, as for LiteMedSAM (:mod:`napari_medsam_eval.embeddings.config`;
    off unless given or ``$MEDSAM_EVAL_EMBEDDINGS`` is set).
    """
    import torch

    if dtype is not None and str(dtype).replace("torch.", "").lower() not in ("auto", "float32", "fp32", "float"):
        raise ModelOptionError(f"sam runs in float32; dtype {dtype} is not supported")
    if model_type is not None and model_type not in MODEL_TYPES and model_type not in RANDOM_ONLY_TYPES:
        raise ModelOptionError(f"model_type must be one of {', '.join(MODEL_TYPES)}, got {model_type}")
    if model_type in RANDOM_ONLY_TYPES and not random_init:
        raise ModelOptionError(f"model_type {model_type} has no checkpoint: it is built with random_init=True only "
                               f"(a checkpoint is one of {', '.join(MODEL_TYPES)})")
    if checkpoint is None and not random_init:
        raise MissingCheckpointError(
            "SAM needs a checkpoint: pass --checkpoint PATH on the command line, or checkpoint=PATH "
            f"when building the backend (model_type vit_b/vit_l/vit_h is read from the file name). "
            f"{SAM_CHECKPOINT_SOURCE}."
        )
    if checkpoint is not None and random_init:
        raise ModelOptionError("give either a checkpoint or random_init=True, not both")

    store = open_store(embeddings, dtype=embeddings_dtype, limit=embeddings_limit)
    from segment_anything import sam_model_registry

    from .device import configure_cpu_threads

    torch_device = resolve_device(device)
    if torch_device.type == "cpu" or num_threads is not None:
        configure_cpu_threads(num_threads)
    path = digest = state_dict = None
    if checkpoint is not None:
        path = check_checkpoint_file(checkpoint)
        loaded = load_checkpoint_file(path, "SAM", SAM_EXPECTED)
        state_dict = tensor_state_dict(_unwrap_state_dict(loaded, path), path, "SAM", CheckpointError)
        model_type = model_type or model_type_from_name(path) or model_type_from_state_dict(state_dict)
        if model_type is None:
            raise CheckpointError("cannot tell the SAM model type; pass model_type='vit_b', 'vit_l' or 'vit_h'", path)
        digest = sha256_once(path)
    model_type = model_type or "vit_b"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if model_type in RANDOM_ONLY_TYPES:
            from segment_anything.build_sam import _build_sam

            model = _build_sam(**RANDOM_ONLY_TYPES[model_type], checkpoint=None)
        else:
            model = sam_model_registry[model_type](checkpoint=None)
    if state_dict is not None:
        assert path is not None
        load_state_dict_strict(model, state_dict, path, hint=f" of SAM {model_type}")
        del state_dict
    model = model.to(torch_device)
    model.eval()
    return SAMBackend(
        model,
        model_type=model_type,
        checkpoint=None if path is None else path.resolve(),
        checkpoint_sha256=digest,
        device=torch_device,
        random_init=random_init,
        cache_size=cache_size,
        seed=seed,
        embedding_store=store,
    )
