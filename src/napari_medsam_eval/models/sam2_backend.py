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
  again, propagate backward, and merge the two passes by union of ``logits > 0``.

The model is built with the video-predictor post-processing of sam2's
``build_sam2_video_predictor`` (dynamic multimask fallback, binarised prompted masks in
memory, holes up to 8 low-res pixels filled). Hole filling needs sam2's CUDA extension;
where it is missing (CPU, or sam2 built with ``SAM2_BUILD_CUDA=0``) the same rule runs
on the CPU with SciPy, so results do not depend on how sam2 was installed.

torch and sam2 are imported only when a model is built, so this module (and its error
classes, which :mod:`napari_medsam_eval.models.sam_backend` reuses) imports cheaply.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Hashable, Iterator, Mapping

import numpy as np

from ..errors import DataError
from ..prompt import Prompt
from .base import ProgressCallback, SegmentationBackend, SegmentResult

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: folder of the model configs shipped with the package
CONFIG_DIR = Path(__file__).resolve().with_name("configs")
#: MedSAM2's 512x512 SAM2.1 Hiera-Tiny config
MEDSAM2_CONFIG = CONFIG_DIR / "sam2.1_hiera_t512.yaml"

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

MEDSAM2_CHECKPOINT_SOURCE = (
    "MedSAM2 checkpoints (MedSAM2_latest.pt, MedSAM2_CTLesion.pt, MedSAM2_MRI_LiverLesion.pt, "
    "MedSAM2_US_Heart.pt, MedSAM2_2411.pt) are published by the MedSAM2 authors on Hugging Face "
    "(https://huggingface.co/wanglab/MedSAM2; see github.com/bowang-lab/MedSAM2, "
    "checkpoints/download_medsam2_models.py); nothing is downloaded automatically"
)
SAM2_CHECKPOINT_SOURCE = (
    "SAM2/SAM2.1 checkpoints (e.g. sam2.1_hiera_tiny.pt) come from Meta "
    "(github.com/facebookresearch/sam2, checkpoints/download_ckpts.sh); "
    "nothing is downloaded automatically"
)

#: what sam2's build_sam2_video_predictor adds to the config (apply_postprocessing=True);
#: MedSAM2's build_sam2_video_predictor_npz adds the same
VIDEO_POSTPROCESSING: dict[str, Any] = {
    "model.sam_mask_decoder_extra_args.dynamic_multimask_via_stability": True,
    "model.sam_mask_decoder_extra_args.dynamic_multimask_stability_delta": 0.05,
    "model.sam_mask_decoder_extra_args.dynamic_multimask_stability_thresh": 0.98,
    "model.binarize_mask_from_pts_for_mem_enc": True,
    "model.fill_hole_area": 8,
}

#: stock sam2 configs by the checkpoint names Meta publishes
_STOCK_CONFIG_BY_CHECKPOINT = {
    "sam2.1_hiera_tiny": "configs/sam2.1/sam2.1_hiera_t.yaml",
    "sam2.1_hiera_small": "configs/sam2.1/sam2.1_hiera_s.yaml",
    "sam2.1_hiera_base_plus": "configs/sam2.1/sam2.1_hiera_b+.yaml",
    "sam2.1_hiera_large": "configs/sam2.1/sam2.1_hiera_l.yaml",
    "sam2_hiera_tiny": "configs/sam2/sam2_hiera_t.yaml",
    "sam2_hiera_small": "configs/sam2/sam2_hiera_s.yaml",
    "sam2_hiera_base_plus": "configs/sam2/sam2_hiera_b+.yaml",
    "sam2_hiera_large": "configs/sam2/sam2_hiera_l.yaml",
}
DEFAULT_SAM2_CONFIG = "configs/sam2.1/sam2.1_hiera_t.yaml"


# --------------------------------------------------------------------------- errors


class CheckpointError(DataError):
    """A model checkpoint that is missing, unreadable or does not fit the model."""


class MissingCheckpointError(CheckpointError):
    """A model that needs weights was built without a checkpoint."""


class ModelConfigError(DataError):
    """A model config that cannot be found or read."""


# --------------------------------------------------------------------------- helpers


def sha256_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """SHA-256 of a file, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_checkpoint_file(checkpoint: str | Path) -> Path:
    """The checkpoint as a Path; CheckpointError naming it when it is not a readable file."""
    path = Path(checkpoint).expanduser()
    if not path.exists():
        raise CheckpointError("checkpoint file not found", path)
    if not path.is_file():
        raise CheckpointError("checkpoint is not a file", path)
    if path.stat().st_size == 0:
        raise CheckpointError("checkpoint file is empty", path)
    return path


def load_checkpoint_file(path: Path) -> Any:
    """``torch.load(path, map_location='cpu', weights_only=True)``, errors naming the file."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises RuntimeError, UnpicklingError, EOFError, ...
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(
            f"cannot be read as a PyTorch checkpoint (corrupt, truncated or not a checkpoint): {first_line}", path
        ) from error


def load_state_dict_strict(model: Any, state_dict: Mapping[str, Any], path: Path, hint: str = "") -> None:
    """``model.load_state_dict(state_dict, strict=True)``, a mismatch reported as CheckpointError."""
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        detail = "; ".join(lines[:4])
        if len(detail) > 600:
            detail = detail[:600] + " ..."
        raise CheckpointError(f"weights do not fit the model{hint}: {detail}", path) from error


def resolve_device(requested: Any = None) -> "torch.device":
    """The torch device for a ``device`` option (:func:`models.device.resolve_device`)."""
    from .device import resolve_device as _resolve

    return _resolve(requested)


def _autocast(device: "torch.device", dtype: "torch.dtype | None") -> contextlib.AbstractContextManager:
    """Autocast on CUDA only, as MedSAM2 runs: ``dtype`` None is bfloat16 where the GPU
    supports it (:func:`models.device.autocast_context`), float32 is off."""
    import torch

    from .device import autocast_context

    if device.type != "cuda" or dtype == torch.float32:
        return contextlib.nullcontext()
    if dtype is None:
        return autocast_context(device, True)
    return torch.autocast("cuda", dtype=dtype)


def _parse_dtype(dtype: Any) -> "torch.dtype | None":
    """Autocast dtype on CUDA: None/'auto' -> bfloat16 where supported (None), 'bfloat16',
    'float16', 'float32' (off)."""
    import torch

    if dtype is None or (isinstance(dtype, str) and dtype.lower() == "auto"):
        return None
    if isinstance(dtype, str) and dtype.lower() in ("bf16", "bfloat16"):
        return torch.bfloat16
    if isinstance(dtype, torch.dtype):
        return dtype
    names = {"float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
             "float32": torch.float32, "fp32": torch.float32, "float": torch.float32}
    try:
        return names[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"dtype must be bfloat16, float16 or float32, got {dtype!r}") from None


def _has_sam2_cuda_extension() -> bool:
    try:
        from sam2 import _C  # noqa: F401
    except Exception:
        return False
    return True


def fill_holes_cpu(mask_scores: "torch.Tensor", max_area: int) -> "torch.Tensor":
    """sam2's ``fill_holes_in_mask_scores`` without its CUDA extension: background
    (score <= 0) 8-connected components of at most ``max_area`` pixels get score 0.1."""
    import torch
    from scipy import ndimage

    scores = mask_scores.detach().float().cpu().numpy()
    filled = None
    structure = np.ones((3, 3), dtype=bool)
    for index in np.ndindex(*scores.shape[:-2]):
        background = scores[index] <= 0
        labels, count = ndimage.label(background, structure=structure)
        if count == 0:
            continue
        areas = np.bincount(labels.ravel())
        small = areas <= max_area
        small[0] = False
        if not small.any():
            continue
        if filled is None:
            filled = scores.copy()
        filled[index][small[labels]] = 0.1
    if filled is None:
        return mask_scores
    return torch.from_numpy(filled).to(device=mask_scores.device, dtype=mask_scores.dtype)


# --------------------------------------------------------------------------- config


def _sam2_package_dir() -> Path:
    import sam2

    return Path(sam2.__file__).resolve().parent


def resolve_config(config: str | Path | None, checkpoint: str | Path | None = None) -> Path:
    """The YAML file of a SAM2 model config.

    ``config`` may be a path to a YAML file, a config shipped here (``sam2.1_hiera_t512``),
    or a stock sam2 config name (``configs/sam2.1/sam2.1_hiera_t.yaml``,
    ``sam2.1_hiera_t``). Without ``config`` it is inferred from a checkpoint named as
    Meta publishes them (``sam2.1_hiera_tiny.pt`` -> ``sam2.1_hiera_t.yaml``).
    """
    if config is None:
        if checkpoint is None:
            config = DEFAULT_SAM2_CONFIG
        else:
            stem = Path(checkpoint).name.split(".pt")[0]
            config = _STOCK_CONFIG_BY_CHECKPOINT.get(stem)
            if config is None:
                raise ModelConfigError(
                    "cannot tell the SAM2 model config from the checkpoint name; pass --config / config= "
                    f"(e.g. {DEFAULT_SAM2_CONFIG}, or a YAML file)",
                    checkpoint,
                )
    text = str(config)
    path = Path(text).expanduser()
    if path.is_file():
        return path.resolve()
    names = [text] if text.endswith((".yaml", ".yml")) else [text + ".yaml", text]
    candidates: list[Path] = []
    for name in names:
        candidates.append(CONFIG_DIR / name)
        try:
            package_dir = _sam2_package_dir()
        except ImportError:
            continue
        candidates += [
            package_dir / name,
            package_dir / "configs" / name,
            package_dir / "configs" / "sam2.1" / name,
            package_dir / "configs" / "sam2" / name,
        ]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    raise ModelConfigError("model config not found (give a YAML file or a sam2 config name such as "
                           f"{DEFAULT_SAM2_CONFIG})", path)


def load_model_config(config_path: str | Path, overrides: Mapping[str, Any] | None = None) -> Any:
    """The config as an OmegaConf DictConfig with ``overrides`` (dotted key -> value,
    like hydra's ``++key=value``) applied and interpolations resolved.

    The SAM2 configs are single files without a defaults list, so they are read with
    OmegaConf directly; hydra's global state (which ``import sam2`` initialises with
    sam2's own config module) is left untouched.
    """
    from omegaconf import OmegaConf

    path = Path(config_path)
    try:
        cfg = OmegaConf.load(path)
    except Exception as error:
        raise ModelConfigError(f"cannot read the model config: {error}", path) from error
    if "model" not in cfg:
        raise ModelConfigError("not a SAM2 model config (no 'model' section)", path)
    for key, value in (overrides or {}).items():
        OmegaConf.update(cfg, key, value, force_add=True)
    OmegaConf.resolve(cfg)
    return cfg


@functools.lru_cache(maxsize=None)
def _predictor_class() -> type:
    """SAM2VideoPredictor plus CPU hole filling (defined lazily: importing sam2 is heavy)."""
    from sam2.sam2_video_predictor import SAM2VideoPredictor

    class InMemorySAM2VideoPredictor(SAM2VideoPredictor):
        """The stock video predictor; when ``cpu_fill_hole_area`` > 0 (sam2's CUDA
        extension unavailable, ``fill_hole_area`` then 0) the predicted low-res mask
        scores get the same hole filling on the CPU."""

        cpu_fill_hole_area: int = 0

        def _run_single_frame_inference(self, inference_state, *args, **kwargs):
            compact_out, pred_masks = super()._run_single_frame_inference(inference_state, *args, **kwargs)
            if self.cpu_fill_hole_area > 0:
                filled = fill_holes_cpu(pred_masks, self.cpu_fill_hole_area)
                if filled is not pred_masks:
                    pred_masks = filled
                    compact_out["pred_masks"] = filled.to(inference_state["storage_device"], non_blocking=True)
            return compact_out, pred_masks

    return InMemorySAM2VideoPredictor


def instantiate_video_predictor(cfg: Any) -> Any:
    """Instantiate ``cfg.model`` (its sub-modules through hydra) as our video predictor."""
    from hydra.utils import instantiate
    from omegaconf import DictConfig, OmegaConf

    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    assert isinstance(model_cfg, dict)
    model_cfg.pop("_target_", None)
    kwargs = {}
    for key, value in model_cfg.items():
        if isinstance(value, dict) and "_target_" in value:
            value = instantiate(DictConfig(value), _recursive_=True)
        kwargs[key] = value
    return _predictor_class()(**kwargs)


def build_video_predictor(
    config_path: str | Path,
    checkpoint: str | Path | None,
    device: "torch.device",
    *,
    postprocessing: bool = True,
    seed: int = 0,
) -> Any:
    """Build the video predictor from a config, load ``checkpoint`` (strict) or keep
    seeded random weights when it is None, move it to ``device``, eval mode."""
    import torch

    cfg = load_model_config(config_path, VIDEO_POSTPROCESSING if postprocessing else None)
    state_dict = None
    path = None
    if checkpoint is not None:
        path = check_checkpoint_file(checkpoint)
        loaded = load_checkpoint_file(path)
        if not isinstance(loaded, Mapping) or "model" not in loaded:
            keys = list(loaded)[:5] if isinstance(loaded, Mapping) else type(loaded).__name__
            raise CheckpointError(f"not a SAM2 checkpoint: no 'model' entry (found {keys})", path)
        state_dict = loaded["model"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = instantiate_video_predictor(cfg)
    if state_dict is not None:
        load_state_dict_strict(model, state_dict, path, hint=f" of config {Path(config_path).name}")
        del state_dict
    model = model.to(device)
    model.eval()
    fill_area = int(getattr(model, "fill_hole_area", 0) or 0)
    if fill_area > 0 and not (device.type == "cuda" and _has_sam2_cuda_extension()):
        model.fill_hole_area = 0
        model.cpu_fill_hole_area = fill_area
    return model


# --------------------------------------------------------------------------- frames


def to_uint8(frames: np.ndarray) -> np.ndarray:
    """uint8 as is; anything else min-max scaled to 0..255 over the whole array and
    truncated (``np.uint8((x - min) / (max - min) * 255)``, as MedSAM2's script does after
    windowing); a constant array gives zeros."""
    array = np.asarray(frames)
    if array.dtype == np.uint8:
        return array
    values = array.astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError("frames contain NaN or infinite values")
    low, high = float(values.min()), float(values.max())
    if high <= low:
        return np.zeros(array.shape, dtype=np.uint8)
    return ((values - low) / (high - low) * 255.0).astype(np.uint8)


def _check_frames(frames: np.ndarray) -> np.ndarray:
    array = np.asarray(frames)
    if array.ndim == 4 and array.shape[-1] == 1:
        array = array[..., 0]
    if not (array.ndim == 3 or (array.ndim == 4 and array.shape[-1] == 3)):
        raise ValueError(f"frames must be (T, H, W) or (T, H, W, 3), got shape {array.shape}")
    if array.shape[0] == 0 or array.shape[1] == 0 or array.shape[2] == 0:
        raise ValueError(f"frames are empty: shape {array.shape}")
    return array


def prepare_frames(frames: np.ndarray, image_size: int) -> tuple["torch.Tensor", int, int]:
    """Frames (T, H, W) or (T, H, W, 3) as the model's normalised input (T, 3, S, S) float32.

    As MedSAM2: uint8 (see :func:`to_uint8`), each frame to RGB and resized to SxS with
    PIL (bicubic, aspect not kept), /255, ImageNet mean/std. Returns the CPU tensor and
    the original height and width.
    """
    import torch
    from PIL import Image

    array = to_uint8(_check_frames(frames))
    count, height, width = array.shape[:3]
    resized = np.empty((count, image_size, image_size, 3), dtype=np.uint8)
    for index in range(count):
        image = Image.fromarray(np.ascontiguousarray(array[index])).convert("RGB")
        resized[index] = np.asarray(image.resize((image_size, image_size), Image.Resampling.BICUBIC))
    images = torch.from_numpy(resized).permute(0, 3, 1, 2).float().div_(255.0)
    mean = torch.tensor(IMAGENET_MEAN, dtype=torch.float32)[:, None, None]
    std = torch.tensor(IMAGENET_STD, dtype=torch.float32)[:, None, None]
    images -= mean
    images /= std
    return images.contiguous(), height, width


def init_state_from_frames(
    predictor: Any,
    images: "torch.Tensor",
    video_height: int,
    video_width: int,
    *,
    offload_video_to_cpu: bool = False,
    offload_state_to_cpu: bool = False,
    warm_up: bool = True,
) -> dict[str, Any]:
    """The ``inference_state`` that ``SAM2VideoPredictor.init_state`` (sam2 1.1.0) builds,
    from in-memory frames instead of a JPEG folder.

    ``images`` is the normalised (T, 3, S, S) tensor of :func:`prepare_frames`; it is
    moved to the model's device unless ``offload_video_to_cpu`` (then each frame moves
    when it is encoded, as in the stock predictor). Every field is the stock one;
    ``warm_up`` encodes frame 0 as the stock ``init_state`` does (skip it when the
    caller fills ``cached_features`` itself).
    """
    import torch

    compute_device = predictor.device
    if images.ndim != 4 or images.shape[1] != 3 or images.shape[-1] != predictor.image_size:
        raise ValueError(f"images must be (T, 3, {predictor.image_size}, {predictor.image_size}), got {tuple(images.shape)}")
    if not offload_video_to_cpu:
        images = images.to(compute_device)
    inference_state: dict[str, Any] = {}
    inference_state["images"] = images
    inference_state["num_frames"] = len(images)
    inference_state["offload_video_to_cpu"] = offload_video_to_cpu
    inference_state["offload_state_to_cpu"] = offload_state_to_cpu
    inference_state["video_height"] = int(video_height)
    inference_state["video_width"] = int(video_width)
    inference_state["device"] = compute_device
    if offload_state_to_cpu:
        inference_state["storage_device"] = torch.device("cpu")
    else:
        inference_state["storage_device"] = compute_device
    inference_state["point_inputs_per_obj"] = {}
    inference_state["mask_inputs_per_obj"] = {}
    inference_state["cached_features"] = {}
    inference_state["constants"] = {}
    inference_state["obj_id_to_idx"] = OrderedDict()
    inference_state["obj_idx_to_id"] = OrderedDict()
    inference_state["obj_ids"] = []
    inference_state["output_dict_per_obj"] = {}
    inference_state["temp_output_dict_per_obj"] = {}
    inference_state["frames_tracked_per_obj"] = {}
    if warm_up:
        predictor._get_image_feature(inference_state, frame_idx=0, batch_size=1)
    return inference_state


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
    ) -> None:
        self.model = model
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
        #: facts about the last propagate() call: frames visited per pass, seconds
        self.last_run: dict[str, Any] = {}

    @property
    def image_size(self) -> int:
        return int(self.model.image_size)

    # ------------------------------------------------------------------ helpers
    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        import torch

        with torch.inference_mode(), _autocast(self.device, self.autocast_dtype):
            yield

    def _offload_video(self, images: "torch.Tensor") -> bool:
        if self.offload_video_to_cpu is not None:
            return bool(self.offload_video_to_cpu)
        # keep big videos in host memory (each frame moves to the GPU when encoded)
        return self.device.type != "cpu" and images.numel() * 4 > (2 << 30)

    def _check_sam2_prompt(self, prompt: Prompt) -> None:
        self.check_prompt(prompt)
        if prompt.mask is not None and (prompt.boxes or prompt.points):
            raise ValueError(f"{self.name}: a mask prompt cannot be combined with boxes or points")
        if len(prompt.boxes) > 1 and prompt.points:
            raise ValueError(f"{self.name}: points can be combined with one box only, got {len(prompt.boxes)} boxes")

    def _add_prompt(self, state: dict[str, Any], frame_idx: int, prompt: Prompt) -> "torch.Tensor":
        """Prompt ``frame_idx``: one object per box (several boxes are merged by union
        later), points with the single box or on their own, or a mask. Returns the
        video-resolution logits of all objects (N, 1, H, W)."""
        if prompt.mask is not None:
            mask = np.asarray(prompt.mask)
            if mask.ndim != 2:
                raise ValueError(f"{self.name}: a mask prompt must be 2D, got shape {mask.shape}")
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
            raise ValueError(f"{self.name}: image must be (H, W) or (H, W, 3), got shape {array.shape}")
        timings: dict[str, float] = {}
        with self._inference():
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
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        """Segment every frame from a prompt on ``prompt.slice_index``.

        Forward pass from the prompted frame to the last; with ``reverse`` (volumes) the
        state is reset, the frame prompted again and a backward pass runs to frame 0;
        the passes are merged by union of ``logits > 0`` (MedSAM2's 3D inference).
        ``reverse=False`` is the forward-only video protocol. ``progress(done, total)``
        is called after every frame (the key frame counted once, so ``total`` is T, or
        T - slice_index forward-only); returning False raises
        :class:`napari_medsam_eval.propagation.Cancelled` with the partial result.
        Returns a bool array (T, H, W).
        """
        self._check_sam2_prompt(prompt)
        array = _check_frames(frames)
        count, height, width = array.shape[:3]
        key = prompt.slice_index
        if key is None:
            if count != 1:
                raise ValueError(f"{self.name}: the prompt has no slice_index for {count} frames")
            key = 0
        if not 0 <= int(key) < count:
            raise ValueError(f"{self.name}: slice_index {key} is outside the {count} frames")
        key = int(key)
        passes = [False] + ([True] if reverse and key > 0 else [])
        total = count if len(passes) == 2 else count - key  # frames, the key frame counted once
        segmentation = np.zeros((count, height, width), dtype=bool)
        visited: dict[str, list[int]] = {"forward": [], "reverse": []}
        done = 0
        started = time.perf_counter()
        from ..propagation import Cancelled

        images, height, width = prepare_frames(array, self.image_size)
        with self._inference():
            state = init_state_from_frames(
                self.model, images, height, width,
                offload_video_to_cpu=self._offload_video(images),
                offload_state_to_cpu=self.offload_state_to_cpu,
                warm_up=False,
            )
            del images
            key_features = None
            try:
                for backward in passes:
                    if key_features is not None:  # the key frame's features from the first pass
                        state["cached_features"] = {key: key_features}
                    self._add_prompt(state, key, prompt)
                    key_features = state["cached_features"].get(key)
                    for frame_idx, _, logits in self.model.propagate_in_video(
                        state, start_frame_idx=key, reverse=backward
                    ):
                        segmentation[frame_idx] |= (logits > 0).any(dim=0)[0].cpu().numpy()
                        visited["reverse" if backward else "forward"].append(int(frame_idx))
                        if backward and frame_idx == key:
                            continue  # the key frame was counted by the forward pass
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
    dtype: Any,
    random_init: bool,
    seed: int,
    offload_video_to_cpu: bool | None,
    offload_state_to_cpu: bool,
    cache_size: int,
    num_threads: int | None,
) -> SAM2Backend:
    from .device import configure_cpu_threads

    torch_device = resolve_device(device)
    if torch_device.type == "cpu" or num_threads is not None:
        configure_cpu_threads(num_threads)  # None: only avoid oversubscribing the CPUs we may use
    path = None if checkpoint is None else check_checkpoint_file(checkpoint)
    digest = None if path is None else sha256_file(path)
    model = build_video_predictor(config_path, path, torch_device, seed=seed)
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
    )


def _check_checkpoint_choice(checkpoint: Any, random_init: bool, model: str, source: str) -> None:
    if checkpoint is None and not random_init:
        raise MissingCheckpointError(
            f"{model} needs a checkpoint: pass --checkpoint PATH on the command line, or "
            f"checkpoint=PATH when building the backend. {source}."
        )
    if checkpoint is not None and random_init:
        raise ValueError("give either a checkpoint or random_init=True, not both")


def build_medsam2(
    checkpoint: str | Path | None = None,
    device: Any = None,
    config: str | Path | None = None,
    *,
    dtype: Any = None,
    random_init: bool = False,
    seed: int = 0,
    offload_video_to_cpu: bool | None = None,
    offload_state_to_cpu: bool = False,
    cache_size: int = 8,
    num_threads: int | None = None,
) -> SAM2Backend:
    """MedSAM2: SAM2.1 Hiera-T at 512 (config shipped here) with a MedSAM2 checkpoint.

    ``checkpoint``: e.g. ``MedSAM2_latest.pt`` (a dict whose ``model`` entry is the state
    dict; loaded strictly). ``device``: None/'auto', 'cpu', 'cuda', 'cuda:1'. ``config``:
    another config (path or name) for checkpoints trained with one. ``dtype``: autocast
    on CUDA, bfloat16 by default as MedSAM2 runs; CPU runs float32.
    ``random_init=True`` builds seeded random weights - for tests only, the masks are
    meaningless. ``offload_video_to_cpu`` (None: only videos over 2 GiB) and
    ``offload_state_to_cpu`` are the stock predictor's memory options; ``cache_size``
    is the number of slices whose image features :meth:`SAM2Backend.segment` keeps;
    ``num_threads`` sets torch's CPU threads (:func:`models.device.configure_cpu_threads`).
    """
    _check_checkpoint_choice(checkpoint, random_init, "MedSAM2", MEDSAM2_CHECKPOINT_SOURCE)
    config_path = MEDSAM2_CONFIG if config is None else resolve_config(config)
    return _build(
        name="medsam2", config_path=config_path, checkpoint=checkpoint, device=device, dtype=dtype,
        random_init=random_init, seed=seed, offload_video_to_cpu=offload_video_to_cpu,
        offload_state_to_cpu=offload_state_to_cpu, cache_size=cache_size, num_threads=num_threads,
    )


def build_sam2(
    checkpoint: str | Path | None = None,
    config: str | Path | None = None,
    device: Any = None,
    *,
    dtype: Any = None,
    random_init: bool = False,
    seed: int = 0,
    offload_video_to_cpu: bool | None = None,
    offload_state_to_cpu: bool = False,
    cache_size: int = 8,
    num_threads: int | None = None,
) -> SAM2Backend:
    """A stock SAM2/SAM2.1 model (or any SAM2-architecture checkpoint with its config).

    ``config`` defaults to the one matching Meta's checkpoint name
    (``sam2.1_hiera_large.pt`` -> ``configs/sam2.1/sam2.1_hiera_l.yaml``); give it for
    other names. Other options as :func:`build_medsam2`; ``random_init=True`` (tests
    only) uses ``config`` or SAM2.1 Hiera-T.
    """
    _check_checkpoint_choice(checkpoint, random_init, "SAM2", SAM2_CHECKPOINT_SOURCE)
    config_path = resolve_config(config, checkpoint)
    return _build(
        name="sam2", config_path=config_path, checkpoint=checkpoint, device=device, dtype=dtype,
        random_init=random_init, seed=seed, offload_video_to_cpu=offload_video_to_cpu,
        offload_state_to_cpu=offload_state_to_cpu, cache_size=cache_size, num_threads=num_threads,
    )


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
