"""Which SAM2 model config a checkpoint needs, found and read: a YAML file, one shipped here, or a stock sam2 name.

torch and sam2 are not imported here (sam2 only to find its own config folder).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..core.errors import DataError

CONFIG_DIR = Path(__file__).resolve().with_name("configs")
#: MedSAM2's 512x512 SAM2.1 Hiera-Tiny config
MEDSAM2_CONFIG = CONFIG_DIR / "sam2.1_hiera_t512.yaml"

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
#: how a config is given, on the command line and in Python
CONFIG_OPTION_HINT = ("""give the config: medsam-eval run|segment ... --model-options '{"config": "NAME_OR_YAML"}', """
                      "or config=... when building the backend in Python")


class ModelConfigError(DataError):
    """A model config that cannot be found or read."""


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
