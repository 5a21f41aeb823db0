"""Building SAM2-family models: checkpoints, configs, device and dtype, the video predictor.

Split from :mod:`napari_medsam_eval.models.sam2_backend` (which re-exports these
names); torch and sam2 are imported only inside the functions that need them.
"""
from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..core.errors import DataError
from .base import sha256_file  # noqa: F401 - re-exported for sam_backend and sam2_backend
from .checkpoint_files import CheckpointError, MissingCheckpointError  # noqa: F401 - the backends import them here

if TYPE_CHECKING:  # pragma: no cover
    import torch

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
#: what a SAM2-family checkpoint file holds (said when a file is not one)
SAM2_EXPECTED = "a dict saved by torch.save whose 'model' entry is the state dict (as sam2.1_hiera_tiny.pt)"
MEDSAM2_EXPECTED = "a dict saved by torch.save whose 'model' entry is the state dict (as MedSAM2_latest.pt)"
#: how a config is given, on the command line and in Python
CONFIG_OPTION_HINT = ("""give the config: medsam-eval run|segment ... --model-options '{"config": "NAME_OR_YAML"}', """
                      "or config=... when building the backend in Python")


# --------------------------------------------------------------------------- errors




class ModelConfigError(DataError):
    """A model config that cannot be found or read."""


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
                    "cannot tell the SAM2 model config from the checkpoint name (Meta's names such as "
                    f"sam2.1_hiera_tiny.pt are recognised); {CONFIG_OPTION_HINT} (NAME_OR_YAML: e.g. "
                    f"{DEFAULT_SAM2_CONFIG}, sam2.1_hiera_t512, or a YAML file)",
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

