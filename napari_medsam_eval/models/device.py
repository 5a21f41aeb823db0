"""Choosing the torch device, CPU threads and mixed precision for the model backends.

>>> resolve_device(None)          # CUDA when present, else CPU
>>> resolve_device("cuda:1")      # DeviceUnavailableError when that GPU is missing

Only the backends import this module (it imports torch).
"""
from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext

import torch

from ..core.errors import MedsamEvalError
from ..core.errors import InputError
from ..core.options import DEVICE_CHOICES



class DeviceUnavailableError(MedsamEvalError, ValueError):
    """The requested device does not exist on this machine (or the name is not a device)."""


def resolve_device(requested: "str | torch.device | None" = None) -> torch.device:
    """The :class:`torch.device` for a ``device`` option.

    ``None``, ``""`` and ``"auto"`` give the first CUDA GPU when one is usable and
    the CPU otherwise. An explicit ``"cuda"``/``"cuda:N"``/``"mps"`` that this
    machine lacks raises :class:`DeviceUnavailableError` naming the option, rather
    than failing later inside the model.
    """
    if isinstance(requested, torch.device):
        text = str(requested)
    elif requested is None:
        text = "auto"
    elif isinstance(requested, str):
        text = requested.strip().lower() or "auto"
    else:
        raise DeviceUnavailableError(f"device option must be a string such as 'cpu' or 'cuda', got {requested!r}")

    if text == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise DeviceUnavailableError(
            f"device option {requested!r} is not a device; choose one of {', '.join(DEVICE_CHOICES)}"
        ) from None
    if device.type == "cpu":
        return device
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceUnavailableError(
                f"device option {requested!r} asks for CUDA, but no CUDA GPU is usable on this machine "
                f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}); "
                "use --device cpu (device='cpu' in Python) or auto"
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise DeviceUnavailableError(
                f"device option {requested!r}: only {count} CUDA device(s) present (indices 0..{count - 1})"
            )
        return device
    if device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise DeviceUnavailableError(f"device option {requested!r} asks for Apple MPS, which is not available "
                                         "on this machine; use --device cpu (device='cpu' in Python) or auto")
        return device
    raise DeviceUnavailableError(
        f"device option {requested!r}: device type {device.type!r} is not supported; "
        f"choose one of {', '.join(DEVICE_CHOICES)}"
    )


def bf16_supported(device: torch.device) -> bool:
    """True when ``device`` is a CUDA GPU that computes in bfloat16."""
    if device.type != "cuda":
        return False
    try:
        return bool(torch.cuda.is_bf16_supported())
    except Exception:  # pragma: no cover - driver oddities
        return False


def autocast_context(device: torch.device, enabled: bool = True) -> AbstractContextManager:
    """bfloat16 autocast on a CUDA GPU that supports it; a no-op context elsewhere.

    CPU inference always runs in float32 (bf16 autocast on CPU is slower on most
    machines and changes the numbers the reproduction tests compare against).
    """
    if enabled and bf16_supported(device):
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return nullcontext()


def available_cpus() -> int:
    """CPUs this process may run on (affinity/cgroup aware where the OS says)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def configure_cpu_threads(num_threads: int | None = None) -> int:
    """Set torch's intra-op thread count; returns the count in force afterwards.

    With ``num_threads=None`` the count is only lowered when torch would use more
    threads than the CPUs this process may run on (oversubscription in containers
    and CI slows inference down a lot); otherwise torch's default (one per
    physical core) is kept. Torch's thread count is process-wide.
    """
    if num_threads is not None:
        if int(num_threads) < 1:
            raise InputError(f"num_threads must be >= 1, got {num_threads}")
        torch.set_num_threads(int(num_threads))
    else:
        limit = available_cpus()
        if torch.get_num_threads() > limit:
            torch.set_num_threads(limit)
    return torch.get_num_threads()


__all__ = [
    "DEVICE_CHOICES",
    "DeviceUnavailableError",
    "autocast_context",
    "available_cpus",
    "bf16_supported",
    "configure_cpu_threads",
    "resolve_device",
]
