"""A seeded random MedSAM2 checkpoint (no real weights can be downloaded here).

Builds MedSAM2's model, SAM2.1 Hiera-Tiny at 512x512 (the ``sam2.1_hiera_t512.yaml``
shipped in ``napari_medsam_eval/models/configs``), on the CPU with the pinned torch and
sam2, after ``torch.manual_seed(SEED)``, and saves ``{"model": state_dict}`` (the layout of
MedSAM2_latest.pt) to the path given; prints the file's SHA-256.

    python scripts/make_random_medsam2_checkpoint.py RANDOM_MEDSAM2.pt [--seed 0]
"""
from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

SEED = 0
CONFIG = Path(__file__).resolve().parents[1] / "napari_medsam_eval" / "models" / "configs" / "sam2.1_hiera_t512.yaml"


def build_state_dict(seed: int = SEED, config: Path = CONFIG) -> dict:
    """The state dict of ``config``'s ``model`` (sam2's SAM2Base) built after ``torch.manual_seed(seed)``."""
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(config)
    OmegaConf.resolve(cfg)
    torch.manual_seed(seed)
    with torch.device("cpu"):
        model = instantiate(cfg.model, _recursive_=True)
    return {name: tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items()}


def tensor_digest(state_dict: dict) -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of the tensors (independent of torch.save)."""
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name]
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> None:
    import torch

    from napari_medsam_eval.core.checksum import sha256_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="where to write the checkpoint (.pt)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"torch.manual_seed before construction (default {SEED})")
    parser.add_argument("--config", type=Path, default=CONFIG, help="model config YAML (default: MedSAM2's 512 config)")
    args = parser.parse_args(argv)

    state_dict = build_state_dict(args.seed, args.config)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    # saved through a file handle: the zip's root folder is then always "archive" (given a
    # path, torch.save names it after the file's stem and the bytes depend on the name)
    with open(args.output, "wb") as handle:
        torch.save({"model": state_dict}, handle)
    print(f"sha256 {sha256_file(args.output)}  {args.output}")
    print(f"tensor-sha256 {tensor_digest(state_dict)}  ({len(state_dict)} tensors, seed {args.seed}, "
          f"config {args.config.name}, torch {torch.__version__})")


if __name__ == "__main__":
    main()
