"""SAM2 and MedSAM2 backends: SAM2's video predictor fed from memory.

MedSAM2 (github.com/bowang-lab/MedSAM2) is SAM2.1 Hiera-Tiny fine-tuned at 512x512;
its config (``configs/sam2.1_hiera_t512.yaml``, shipped in this package) differs from
the stock ``sam2.1/sam2.1_hiera_t.yaml`` in ``image_size`` and the two RoPE
``feat_sizes`` only. Both backends work the way MedSAM2's ``medsam2_infer_3D_CT.py``
does:

* every slice/frame is scaled to uint8 (when it is not uint8 already), resized to the
  model's square input with PIL (bicubic, aspect not kept), made 3-channel, divided by
  255 and normalised with the ImageNet mean/std, all in memory (no JPEG round trip);
* :func:`init_state_from_frames` builds the video predictor's ``inference_state`` from
  that tensor, field for field as the stock ``SAM2VideoPredictor.init_state`` of sam2
  1.1.0 builds it from a JPEG folder;
* 3D: prompt the key slice, ``propagate_in_video`` forward, ``reset_state``, prompt
  again, propagate backward, and merge the two passes by union of ``logits > 0``
  (``seed="mask"``: both passes start from the key slice's mask, the RECIST script).

The model is built with the video-predictor post-processing of sam2's
``build_sam2_video_predictor`` (dynamic multimask fallback, binarised prompted masks in
memory, holes up to 8 low-res pixels filled); videos run without it by default, as
``medsam2_infer_video.py`` builds its model. Hole filling needs sam2's CUDA extension;
where it is missing (CPU, or sam2 built with ``SAM2_BUILD_CUDA=0``) the same rule runs
on the CPU with SciPy, so results do not depend on how sam2 was installed
(``fill_holes=False``: off, as MedSAM2's scripts run without the extension).

With these, the frame arithmetic of :func:`prepare_frames` and MedSAM2's attention
kernels (:func:`.sam2_build.attention_as_medsam2`), the masks equal those of MedSAM2's
own scripts voxel for voxel (docs/protocols.md, "MedSAM2";
``tests/test_medsam2_reference.py``).

This module is ~530 lines on purpose: the backend and its two registered
builders (MedSAM2, SAM2.1) share one option set and are read together; the
checkpoint/config helpers (:mod:`.sam2_build`) and in-memory frames
(:mod:`.sam2_frames`) are split out.

torch and sam2 are imported only when a model is built, so this module (and its error
classes, which :mod:`napari_medsam_eval.models.sam_backend` reuses) imports cheaply.
"""
from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Hashable, Iterator, Sequence

import numpy as np

from ..core.prompt import Prompt
from ..core.options import check_call_options
from ..core.postprocess import SEEDS
from .base import SliceProgress, SegmentationBackend, SegmentResult
from .checkpoint_files import shape_text
from .sam2_features import DEFAULT_LIMIT, FrameFeatures, features_kept, parameters_digest, parse_limit, shared_cache

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: folder of the model configs shipped with the package

from .sam2_build import (  # noqa: F401 - re-exported: callers and tests import them from here
    CONFIG_DIR,
    MEDSAM2_CONFIG,
    IMAGENET_MEAN,
    IMAGENET_STD,
    MEDSAM2_CHECKPOINT_SOURCE,
    SAM2_CHECKPOINT_SOURCE,
    VIDEO_POSTPROCESSING,
    _STOCK_CONFIG_BY_CHECKPOINT,
    DEFAULT_SAM2_CONFIG,
    MEDSAM2_EXPECTED,
    SAM2_EXPECTED,
    CheckpointError,
    MissingCheckpointError,
    ModelConfigError,
    sha256_file,
    check_checkpoint_file,
    load_checkpoint_file,
    load_state_dict_strict,
    resolve_device,
    _autocast,
    _parse_dtype,
    _has_sam2_cuda_extension,
    fill_holes_cpu,
    POSTPROCESSING_MODES,
    check_postprocessing,
    postprocessing_off,
    _sam2_package_dir,
    resolve_config,
    load_model_config,
    _predictor_class,
    instantiate_video_predictor,
    build_video_predictor,
)
from .sam2_frames import (  # noqa: F401 - re-exported
    to_uint8,
    _check_frames,
    prepare_frames,
    init_state_from_frames,
)
from ..core.errors import InputError

# --------------------------------------------------------------------------- backend


class SAM2Backend(SegmentationBackend):
    """A SAM2-family model (MedSAM2, SAM2.1) with native bidirectional propagation.

    Build it with :func:`build_medsam2` or :func:`build_sam2`. :meth:`segment` runs the
    video predictor on one frame (the same preprocessing and decoding as the key slice
    of :meth:`propagate`) and caches the image features per ``cache_key``.
    """

    accepts = frozenset({"box", "points", "mask"})
    propagates_natively = True

    def __init__(
        self,
        model: Any,
        *,
        name: str,
        config_path: Path,
        checkpoint: Path | None,
        checkpoint_sha256: str | None,
        device: "torch.device",
        autocast_dtype: "torch.dtype | None",
        random_init: bool = False,
        offload_video_to_cpu: bool | None = None,
        offload_state_to_cpu: bool = False,
        cache_size: int = 8,
        postprocessing: str = "auto",
        features: FrameFeatures | None = None,
    ) -> None:
        self.model = model
        self.postprocessing = check_postprocessing(postprocessing)
        self.name = name
        self.config_path = Path(config_path)
        self.checkpoint = checkpoint
        self.checkpoint_sha256 = checkpoint_sha256
        self.device = device
        self.autocast_dtype = autocast_dtype
        self.random_init = random_init
        self.offload_video_to_cpu = offload_video_to_cpu
        self.offload_state_to_cpu = offload_state_to_cpu
        self.cache_size = max(0, int(cache_size))
        self._cache: OrderedDict[Hashable, tuple[Any, Any]] = OrderedDict()
        #: frames' image features kept across calls (:mod:`.sam2_features`); None: each call encodes
        self.features = features
        self._weights_id = checkpoint_sha256 or parameters_digest(model)  # random weights: their own bytes
        #: facts about the last propagate() call: frames visited per pass, seconds
        self.last_run: dict[str, Any] = {}

    @property
    def image_size(self) -> int:
        return int(self.model.image_size)

    # ------------------------------------------------------------------ helpers
    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        import torch

        with torch.inference_mode(), _autocast(self.device, self.autocast_dtype), \
                features_kept(self.model, self._feature_identity(), self.features):
            yield

    def _feature_identity(self) -> tuple:
        """Everything a frame's features depend on besides the frame (:mod:`.sam2_features`)."""
        import torch

        kernels = tuple(getattr(torch.backends.cuda, f"{k}_sdp_enabled")() for k in ("flash", "mem_efficient", "math"))
        return (self.name, str(self.config_path), self._weights_id, str(self.device), str(self.autocast_dtype),
                torch.get_num_threads(), torch.get_float32_matmul_precision(), kernels)

    def _offload_video(self, images: "torch.Tensor") -> bool:
        if self.offload_video_to_cpu is not None:
            return bool(self.offload_video_to_cpu)
        # keep big videos in host memory (each frame moves to the GPU when encoded)
        return self.device.type != "cpu" and images.numel() * 4 > (2 << 30)

    def _check_sam2_prompt(self, prompt: Prompt) -> None:
        self.check_prompt(prompt)
        if prompt.mask is not None and (prompt.boxes or prompt.points):
            raise InputError(f"{self.name}: a mask prompt cannot be combined with boxes or points")
        if len(prompt.boxes) > 1 and prompt.points:
            raise InputError(f"{self.name}: points can be combined with one box only, got {len(prompt.boxes)} boxes")

    def _add_prompt(self, state: dict[str, Any], frame_idx: int, prompt: Prompt) -> "torch.Tensor":
        """Prompt ``frame_idx``: one object per box (several boxes are merged by union
        later), points with the single box or on their own, or a mask. Returns the
        video-resolution logits of all objects (N, 1, H, W)."""
        if prompt.mask is not None:
            mask = np.asarray(prompt.mask)
            if mask.ndim != 2:
                raise InputError(f"{self.name}: a mask prompt must be 2D, got shape {shape_text(mask.shape)}")
            _, _, logits = self.model.add_new_mask(state, frame_idx, 1, mask.astype(bool))
            return logits
        points = prompt.points_array().astype(np.float32) if prompt.points else None
        labels = prompt.labels_array().astype(np.int32) if prompt.points else None
        if not prompt.boxes:
            _, _, logits = self.model.add_new_points_or_box(state, frame_idx, 1, points=points, labels=labels)
            return logits
        for obj_id, box in enumerate(prompt.boxes, start=1):
            _, _, logits = self.model.add_new_points_or_box(
                state, frame_idx, obj_id, points=points, labels=labels, box=np.asarray(box, dtype=np.float32)
            )
        return logits

    # ------------------------------------------------------------------ 2D
    def segment(self, image: np.ndarray, prompt: Prompt, *, cache_key: Hashable | None = None) -> SegmentResult:
        self._check_sam2_prompt(prompt)
        array = np.asarray(image)
        if not (array.ndim == 2 or (array.ndim == 3 and array.shape[-1] in (1, 3))):
            raise InputError(f"{self.name}: image must be H x W or H x W x 3, got shape {shape_text(array.shape)}")
        timings: dict[str, float] = {}
        plain = self.postprocessing == "off"  # one image: MedSAM2's scripts have no 2D case, "auto" keeps it
        with self._inference(), (postprocessing_off(self.model) if plain else contextlib.nullcontext()):
            start = time.perf_counter()
            images, height, width = prepare_frames(array[None], self.image_size)
            state = init_state_from_frames(
                self.model, images, height, width,
                offload_video_to_cpu=False, offload_state_to_cpu=self.offload_state_to_cpu, warm_up=False,
            )
            cached = self._cache.get(cache_key) if cache_key is not None else None
            if cached is None:
                frame = state["images"][0].to(self.device).float().unsqueeze(0)
                cached = (frame, self.model.forward_image(frame))
                if cache_key is not None and self.cache_size:
                    self._cache[cache_key] = cached
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
            elif cache_key is not None:
                self._cache.move_to_end(cache_key)
            state["cached_features"] = {0: cached}
            self._sync()
            timings["encoder"] = time.perf_counter() - start
            start = time.perf_counter()
            logits = self._add_prompt(state, 0, prompt)
            merged = logits.float().amax(dim=0)[0].cpu().numpy()
            timings["decoder"] = time.perf_counter() - start
        return SegmentResult(mask=merged > 0, logits=merged.astype(np.float32), timings=timings)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.device)

    # ------------------------------------------------------------------ 3D / video
    def propagate(
        self,
        frames: np.ndarray,
        prompt: Prompt,
        *,
        reverse: bool = True,
        progress: SliceProgress | None = None,
        seed: str = "box",
        anchors: Sequence[Prompt] = (),
    ) -> np.ndarray:
        """Segment every frame from a prompt on ``prompt.slice_index``.

        Forward pass from the prompted frame to the last; with ``reverse`` (volumes) the
        state is reset, the frame prompted again and a backward pass runs to frame 0;
        the passes are merged by union of ``logits > 0`` (MedSAM2's 3D inference,
        ``medsam2_infer_3D_CT.py``). ``reverse=False`` is the forward-only video protocol
        (``medsam2_infer_video.py``). ``seed="mask"`` is MedSAM2's RECIST / npz script
        (``medsam2_infer_CT_lesion_npz_recist.py``): the prompt's own mask on the key frame
        (``logits > 0``) is added with ``add_new_mask`` and seeds both passes instead of
        the prompt. Volumes are normalised in float64, videos in float32, as those
        scripts do (:func:`prepare_frames`); with ``postprocessing="auto"`` a video runs
        without the video post-processing, as ``medsam2_infer_video.py`` builds its model.
        ``anchors``: prompts on other frames (corrections, :mod:`napari_medsam_eval.propagation.anchors`),
        added to the state in every pass before it propagates; the forward pass then starts at
        the first prompted frame and the reverse pass at the last. ``progress(done, total)``
        is called after every frame (the key frame counted once, so ``total`` is T, or
        T - slice_index forward-only); returning False raises
        :class:`napari_medsam_eval.propagation.Cancelled` with the partial result.
        Returns a bool array (T, H, W).
        """
        self._check_sam2_prompt(prompt)
        if seed not in SEEDS:
            raise InputError(f"{self.name}: seed must be one of {SEEDS}, got {seed!r}")
        array = _check_frames(frames)
        count, height, width = array.shape[:3]
        key = prompt.slice_index
        if key is None:
            if count != 1:
                raise InputError(f"{self.name}: the prompt has no slice_index for {count} frames")
            key = 0
        if not 0 <= int(key) < count:
            raise InputError(f"{self.name}: slice_index {key} is outside the {count} frames")
        key = int(key)
        anchors = list(anchors)
        for anchor in anchors:
            self._check_sam2_prompt(anchor)
            if anchor.slice_index is None or not 0 <= int(anchor.slice_index) < count:
                raise InputError(f"{self.name}: an anchor's slice_index {anchor.slice_index} is outside the {count} frames")
        indices = [key] + [int(a.slice_index) for a in anchors]
        first, last = min(indices), max(indices)  # the forward pass starts at the first prompt, the reverse at the last
        passes = [False] + ([True] if reverse and last > 0 else [])
        total = count if len(passes) == 2 else count - first  # frames, each counted once
        segmentation = np.zeros((count, height, width), dtype=bool)
        visited: dict[str, list[int]] = {"forward": [], "reverse": []}
        done = 0
        started = time.perf_counter()
        from ..core.errors import Cancelled

        images, height, width = prepare_frames(array, self.image_size, float64=reverse)
        plain = self.postprocessing == "off" or (self.postprocessing == "auto" and not reverse)
        with self._inference(), (postprocessing_off(self.model) if plain else contextlib.nullcontext()):
            state = init_state_from_frames(
                self.model, images, height, width,
                offload_video_to_cpu=self._offload_video(images),
                offload_state_to_cpu=self.offload_state_to_cpu,
                warm_up=False,
            )
            del images
            key_features = None
            seed_mask = None
            try:
                for backward in passes:
                    if key_features is not None:  # the key frame's features from the first pass
                        state["cached_features"] = {key: key_features}
                    if seed_mask is None:
                        logits = self._add_prompt(state, key, prompt)
                        if seed == "mask":  # one mask per object (box), at video resolution
                            seed_mask = (logits > 0)[:, 0].cpu().numpy()
                    for obj_id, mask in enumerate(() if seed_mask is None else seed_mask, start=1):
                        self.model.add_new_mask(state, key, obj_id, mask)
                    key_features = state["cached_features"].get(key)
                    for anchor in anchors:  # prompts on other frames: all in the state before propagating
                        self._add_prompt(state, int(anchor.slice_index), anchor)
                    for frame_idx, _, logits in self.model.propagate_in_video(
                        state, start_frame_idx=last if backward else first, reverse=backward
                    ):
                        segmentation[frame_idx] |= (logits > 0).any(dim=0)[0].cpu().numpy()
                        visited["reverse" if backward else "forward"].append(int(frame_idx))
                        if backward and frame_idx >= first:
                            continue  # counted by the forward pass
                        done += 1
                        if progress is not None and progress(done, total) is False:
                            raise Cancelled(segmentation, done, total)
                    self.model.reset_state(state)
            finally:
                state.clear()
        self.last_run = {
            "frames": count,
            "key_frame": key,
            "forward_frames": visited["forward"],
            "reverse_frames": visited["reverse"],
            "seconds": time.perf_counter() - started,
        }
        return segmentation

    def clear_cache(self) -> None:
        self._cache.clear()

    def _effective_autocast(self) -> str | None:
        import torch

        from .device import bf16_supported

        if self.device.type != "cuda" or self.autocast_dtype == torch.float32:
            return None
        if self.autocast_dtype is None:
            return "bfloat16" if bf16_supported(self.device) else None
        return str(self.autocast_dtype).replace("torch.", "")

    def describe(self) -> dict[str, object]:
        from importlib import metadata

        import torch

        try:
            sam2_version = metadata.version("sam2")
        except metadata.PackageNotFoundError:  # pragma: no cover
            sam2_version = None
        if int(getattr(self.model, "fill_hole_area", 0) or 0) > 0:
            fill = "sam2 CUDA extension"
        elif getattr(self.model, "cpu_fill_hole_area", 0):
            fill = "scipy (sam2 CUDA extension unavailable)"
        else:
            fill = "off"
        return {
            "name": self.name,
            "config": str(self.config_path),
            "config_sha256": sha256_file(self.config_path),
            "checkpoint": None if self.checkpoint is None else str(self.checkpoint),
            "checkpoint_sha256": self.checkpoint_sha256,
            "random_init": self.random_init,
            "device": str(self.device),
            "autocast_dtype": self._effective_autocast(),
            "image_size": self.image_size,
            "hole_filling": fill,
            "postprocessing": self.postprocessing,
            "sam2_version": sam2_version,
            "torch_version": torch.__version__,
        }


# --------------------------------------------------------------------------- builders


def _build(
    *,
    name: str,
    config_path: Path,
    checkpoint: str | Path | None,
    device: Any,
    dtype: Any = None,
    random_init: bool = False,
    seed: int = 0,
    offload_video_to_cpu: bool | None = None,
    offload_state_to_cpu: bool = False,
    cache_size: int = 8,
    num_threads: int | None = None,
    fill_holes: bool = True,
    postprocessing: Any = "auto",
    feature_cache: Any = DEFAULT_LIMIT,
) -> SAM2Backend:
    from .device import configure_cpu_threads

    torch_device = resolve_device(device)
    if torch_device.type == "cpu" or num_threads is not None:
        configure_cpu_threads(num_threads)  # None: only avoid oversubscribing the CPUs we may use
    path = None if checkpoint is None else check_checkpoint_file(checkpoint)
    digest = None if path is None else sha256_file(path)
    label, expected = ("MedSAM2", MEDSAM2_EXPECTED) if name == "medsam2" else ("SAM2", SAM2_EXPECTED)
    if not isinstance(fill_holes, bool):
        from .checkpoint_files import ModelOptionError, plain

        raise ModelOptionError(f"fill_holes must be true or false, got {plain(fill_holes)}")
    postprocessing = check_postprocessing(postprocessing)
    features = shared_cache(parse_limit(feature_cache))
    model = build_video_predictor(config_path, path, torch_device, seed=seed, model_name=label, expected=expected,
                                  fill_holes=fill_holes, medsam2_attention=name == "medsam2")
    return SAM2Backend(
        model,
        name=name,
        config_path=config_path,
        checkpoint=None if path is None else path.resolve(),
        checkpoint_sha256=digest,
        device=torch_device,
        autocast_dtype=_parse_dtype(dtype),
        random_init=random_init,
        offload_video_to_cpu=offload_video_to_cpu,
        offload_state_to_cpu=offload_state_to_cpu,
        cache_size=cache_size,
        postprocessing=postprocessing,
        features=features,
    )


def _check_checkpoint_choice(checkpoint: Any, random_init: bool, model: str, source: str) -> None:
    if checkpoint is None and not random_init:
        raise MissingCheckpointError(
            f"{model} needs a checkpoint: pass --checkpoint PATH on the command line, or "
            f"checkpoint=PATH when building the backend. {source}."
        )
    if checkpoint is not None and random_init:
        raise InputError("give either a checkpoint or random_init=True, not both")


#: the builders' own parameters: every other keyword is one of :func:`_build`'s options
_BUILDER_ARGUMENTS = ("name", "config_path", "checkpoint", "device")


def _options_checked(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` when each is one of :func:`_build`'s, of its type; else OptionError naming it (before any work)."""
    check_call_options(_build, options, f"model {name}: options", ignore=_BUILDER_ARGUMENTS)
    return options


def build_medsam2(checkpoint: str | Path | None = None, device: Any = None, config: str | Path | None = None,
                  **options: Any) -> SAM2Backend:
    """MedSAM2: SAM2.1 Hiera-T at 512 (config shipped here) with a MedSAM2 checkpoint.

    ``checkpoint``: e.g. ``MedSAM2_latest.pt`` (a dict whose ``model`` entry is the state
    dict; loaded strictly). ``device``: None/'auto', 'cpu', 'cuda', 'cuda:1'. ``config``:
    another config (path or name) for checkpoints trained with one. The options (keywords,
    checked before any work; the defaults in :func:`_build`'s signature): ``dtype``: autocast
    on CUDA, bfloat16 by default as MedSAM2 runs; CPU runs float32.
    ``random_init=True`` builds seeded random weights (``seed``) - for tests only, the masks are
    meaningless. ``offload_video_to_cpu`` (None: only videos over 2 GiB) and
    ``offload_state_to_cpu`` are the stock predictor's memory options; ``cache_size``
    is the number of slices whose image features :meth:`SAM2Backend.segment` keeps;
    ``num_threads`` sets torch's CPU threads (:func:`models.device.configure_cpu_threads`);
    ``fill_holes=False`` turns off the post-processing's hole filling, as MedSAM2's scripts
    run without sam2's CUDA extension (on the CPU); by default it runs everywhere, as
    MedSAM2 runs it on a GPU. ``postprocessing``: when the video predictor's post-processing
    (dynamic multimask fallback, binarised prompted masks in memory, hole filling) runs:
    ``"auto"`` as MedSAM2's scripts (volumes yes, videos no), ``"on"`` or ``"off"``.
    ``feature_cache``: how much of the process's memory keeps frames' image features for the next
    propagation over the same frames (a correction, a repeat, another protocol; :mod:`.sam2_features`):
    bytes or a size such as ``"2GiB"`` (default 1 GiB), ``"off"`` to encode every frame every time.
    """
    options = _options_checked("medsam2", options)
    _check_checkpoint_choice(checkpoint, bool(options.get("random_init")), "MedSAM2", MEDSAM2_CHECKPOINT_SOURCE)
    config_path = MEDSAM2_CONFIG if config is None else resolve_config(config)
    return _build(name="medsam2", config_path=config_path, checkpoint=checkpoint, device=device, **options)


def build_sam2(checkpoint: str | Path | None = None, config: str | Path | None = None, device: Any = None,
               **options: Any) -> SAM2Backend:
    """A stock SAM2/SAM2.1 model (or any SAM2-architecture checkpoint with its config).

    ``config`` defaults to the one matching Meta's checkpoint name
    (``sam2.1_hiera_large.pt`` -> ``configs/sam2.1/sam2.1_hiera_l.yaml``); give it for
    other names. Other options as :func:`build_medsam2`; ``random_init=True`` (tests
    only) uses ``config`` or SAM2.1 Hiera-T.
    """
    options = _options_checked("sam2", options)
    _check_checkpoint_choice(checkpoint, bool(options.get("random_init")), "SAM2", SAM2_CHECKPOINT_SOURCE)
    config_path = resolve_config(config, checkpoint)
    return _build(name="sam2", config_path=config_path, checkpoint=checkpoint, device=device, **options)


__all__ = [
    "CONFIG_DIR",
    "MEDSAM2_CONFIG",
    "CheckpointError",
    "MissingCheckpointError",
    "ModelConfigError",
    "SAM2Backend",
    "build_medsam2",
    "build_sam2",
    "init_state_from_frames",
    "prepare_frames",
    "resolve_config",
    "sha256_file",
    "to_uint8",
]
