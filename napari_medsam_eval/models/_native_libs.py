"""Loading native libraries safely next to a napari viewer.

The model backends import torch's compiler stack (timm -> torch._dynamo ->
triton). Loading ``libtriton`` (which embeds LLVM) into a process that already
maps Mesa's ``libLLVM`` - a napari viewer drawn by llvmpipe, as under Xvfb, in
VMs and remote desktops - crashes the process with a segmentation fault.
:func:`load_triton_isolated` binds triton to its own symbols first; every
backend builder goes through it (see :func:`napari_medsam_eval.models.build_backend`).
"""
from __future__ import annotations


def _llvm_loaded() -> bool:
    """Whether a shared libLLVM is mapped into this process (Mesa's software OpenGL brings one)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any("libLLVM" in line for line in maps)
    except OSError:
        return False


def load_triton_isolated() -> bool:
    """Import ``triton`` with its own LLVM symbols (``RTLD_DEEPBIND``) when another LLVM is loaded.

    The model backends import torch's compiler stack (timm -> torch._dynamo ->
    triton). Loading ``libtriton`` (which embeds LLVM) into a process that
    already maps Mesa's ``libLLVM`` - a napari viewer drawn by llvmpipe, as
    under Xvfb, in VMs and remote desktops - crashes the process with a
    segmentation fault. Binding triton to its own symbols avoids the clash.
    Does nothing when triton is imported already, absent, or no libLLVM is
    mapped, and off Linux. Returns True when it imported triton.
    """
    import importlib.util
    import os
    import sys

    if "triton" in sys.modules or not hasattr(os, "RTLD_DEEPBIND") or not _llvm_loaded():
        return False
    try:
        if importlib.util.find_spec("triton") is None:
            return False
    except (ImportError, ValueError):
        return False
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | os.RTLD_DEEPBIND)
    try:
        import triton  # noqa: F401
    except Exception:  # a broken triton: torch copes with its absence
        return False
    finally:
        sys.setdlopenflags(flags)
    return True
