"""Building SAM2-family models: checkpoints, device and dtype, the video predictor (configs: :mod:`.sam2_config`).

Split from :mod:`napari_medsam_eval.models.sam2_backend` (which re-exports these
names); torch and sam2 are imported only inside the functions that need them.
"""
from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from .base import sha256_file  # noqa: F401 - re-exported for sam_backend and sam2_backend
from .checkpoint_files import CheckpointError, MissingCheckpointError  # noqa: F401 - the backends import them here
from .sam2_config import (  # noqa: F401 - re-exported: the backends import them here
    _STOCK_CONFIG_BY_CHECKPOINT, _sam2_package_dir, CONFIG_DIR, CONFIG_OPTION_HINT, DEFAULT_SAM2_CONFIG, MEDSAM2_CONFIG, ModelConfigError,
    load_model_config, resolve_config)

if TYPE_CHECKING:  # pragma: no cover
    import torch

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

#: what a SAM2-family checkpoint file holds (said when a file is not one)
SAM2_EXPECTED = "a dict saved by torch.save whose 'model' entry is the state dict (as sam2.1_hiera_tiny.pt)"
MEDSAM2_EXPECTED = "a dict saved by torch.save whose 'model' entry is the state dict (as MedSAM2_latest.pt)"


# --------------------------------------------------------------------------- helpers


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


def load_checkpoint_file(path: Path, model: str = "SAM2", expected: str = SAM2_EXPECTED) -> Any:
    """``torch.load(path, map_location='cpu', weights_only=True)``; a file torch cannot read
    raises CheckpointError naming it, saying what it is and that ``expected`` was expected
    (:func:`.checkpoint_files.read_torch_checkpoint`; the file is never unpickled)."""
    from .checkpoint_files import read_torch_checkpoint

    return read_torch_checkpoint(path, model, expected, CheckpointError)


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
        from .checkpoint_files import ModelOptionError, plain

        raise ModelOptionError(f"dtype must be bfloat16, float16 or float32, got {plain(dtype)}") from None


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


#: when the video predictor's post-processing (:data:`VIDEO_POSTPROCESSING`) runs: "auto" as
#: MedSAM2's scripts (its 3D scripts build with it, ``medsam2_infer_video.py`` with
#: ``apply_postprocessing=False``), or always / never
POSTPROCESSING_MODES = ("auto", "on", "off")


def check_postprocessing(mode: Any) -> str:
    """A ``postprocessing`` option as one of :data:`POSTPROCESSING_MODES` (true/false read as on/off)."""
    if isinstance(mode, bool):
        return "on" if mode else "off"
    if mode not in POSTPROCESSING_MODES:
        from .checkpoint_files import ModelOptionError, plain

        raise ModelOptionError(f"postprocessing must be one of {', '.join(POSTPROCESSING_MODES)}, got {plain(mode)}")
    return str(mode)


@contextlib.contextmanager
def postprocessing_off(model: Any) -> Any:
    """The model without the video post-processing while the block runs: no dynamic multimask
    fallback, no binarised prompted masks in memory, no hole filling (sam2's
    ``build_sam2_video_predictor(apply_postprocessing=False)``); restored afterwards."""
    decoder = model.sam_mask_decoder
    saved = (decoder.dynamic_multimask_via_stability, model.binarize_mask_from_pts_for_mem_enc,
             model.fill_hole_area, getattr(model, "cpu_fill_hole_area", 0))
    decoder.dynamic_multimask_via_stability = False
    model.binarize_mask_from_pts_for_mem_enc = False
    model.fill_hole_area = 0
    model.cpu_fill_hole_area = 0
    try:
        yield model
    finally:
        (decoder.dynamic_multimask_via_stability, model.binarize_mask_from_pts_for_mem_enc,
         model.fill_hole_area, model.cpu_fill_hole_area) = saved


def attention_as_medsam2(model: Any, device: "torch.device") -> None:
    """Run the attention of ``model``'s SAM decoder and memory attention with the kernels
    MedSAM2's ``sam2`` package picks, so its masks are reproduced to the bit.

    MedSAM2's ``sam2/modeling/sam/transformer.py`` (github.com/bowang-lab/MedSAM2 at 332f30d)
    wraps each ``scaled_dot_product_attention`` in ``sdp_kernel(enable_flash=use_flash_attn,
    enable_math=..., ...)`` from ``get_sdpa_settings()``: without CUDA, flash attention is
    off and the math kernel runs; the image encoder (Hiera) is not wrapped. sam2 1.1.0
    dropped the wrapper, so on the CPU torch picks its flash kernel there, whose sums differ
    in the last bit (about 1e-6 in the decoder's tokens). On CUDA (Ampere or newer, where
    MedSAM2 asks for flash attention) torch's own choice is kept.
    """
    if device.type != "cpu":
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def with_math_kernel(forward: Any) -> Any:
        @functools.wraps(forward)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with sdpa_kernel([SDPBackend.MATH]):
                return forward(*args, **kwargs)
        return wrapped

    for module in (model.memory_attention, model.sam_mask_decoder.transformer):
        module.forward = with_math_kernel(module.forward)


def build_video_predictor(
    config_path: str | Path,
    checkpoint: str | Path | None,
    device: "torch.device",
    *,
    postprocessing: bool = True,
    seed: int = 0,
    model_name: str = "SAM2",
    expected: str = SAM2_EXPECTED,
    fill_holes: bool = True,
    medsam2_attention: bool = False,
) -> Any:
    """Build the video predictor from a config, load ``checkpoint`` (strict) or keep
    seeded random weights when it is None, move it to ``device``, eval mode.

    ``fill_holes``: the post-processing's hole filling (holes up to 8 low-res pixels),
    with sam2's CUDA extension where it is there, else on the CPU with SciPy;
    False turns it off, as MedSAM2's and sam2's own code run without the extension
    (they skip it with a warning, e.g. on the CPU). ``medsam2_attention``: attention
    kernels as MedSAM2's own sam2 package picks them (:func:`attention_as_medsam2`)."""
    import torch

    cfg = load_model_config(config_path, VIDEO_POSTPROCESSING if postprocessing else None)
    state_dict = None
    path = None
    if checkpoint is not None:
        from .checkpoint_files import names_text, tensor_state_dict

        path = check_checkpoint_file(checkpoint)
        loaded = load_checkpoint_file(path, model_name, expected)
        if not isinstance(loaded, Mapping) or "model" not in loaded:
            found = names_text(loaded) if isinstance(loaded, Mapping) else f"a {type(loaded).__name__}"
            raise CheckpointError(f"not a {model_name} checkpoint: no 'model' entry (found {found}); "
                                  f"expected {expected}", path)
        state_dict = tensor_state_dict(loaded["model"], path, model_name, CheckpointError)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = instantiate_video_predictor(cfg)
    if state_dict is not None:
        load_state_dict_strict(model, state_dict, path, hint=f" of config {Path(config_path).name} (for a checkpoint "
                               f"trained with another config, {CONFIG_OPTION_HINT})")
        del state_dict
    model = model.to(device)
    model.eval()
    if medsam2_attention:
        attention_as_medsam2(model, device)
    fill_area = int(getattr(model, "fill_hole_area", 0) or 0)
    if not fill_holes:
        model.fill_hole_area = 0
    elif fill_area > 0 and not (device.type == "cuda" and _has_sam2_cuda_extension()):
        model.fill_hole_area = 0
        model.cpu_fill_hole_area = fill_area
    return model

