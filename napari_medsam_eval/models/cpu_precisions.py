"""Which precisions LiteMedSAM's encoder computes on this CPU, asked of OpenVINO and ``/proc/cpuinfo``.

Apart from the precision code (:mod:`.litemedsam_precision`, which imports torch) so that a form listing the
precisions (the Segment dock's *first look at*) loads neither torch nor the model code on napari's GUI thread.
"""
from __future__ import annotations

from pathlib import Path

#: LiteMedSAM's encoder precisions
PRECISIONS = ("fp32", "bf16", "int8")


#: OpenVINO's answer, asked once per process (the CPU does not change; asking loads OpenVINO, ~0.1 s)
_capabilities: list[str] | None = None


def openvino_cpu_capabilities() -> list[str]:
    """What OpenVINO's CPU plugin computes in here (``OPTIMIZATION_CAPABILITIES``: FP32, INT8, BF16, ...)."""
    global _capabilities
    if _capabilities is None:
        try:
            from .openvino_quiet import import_openvino
            ov = import_openvino()

            _capabilities = [str(c) for c in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")]
        except Exception:  # pragma: no cover - no CPU plugin: the engine will fail to load and say so
            _capabilities = []
    return list(_capabilities)


def cpu_has_bf16() -> bool:
    """True when OpenVINO's CPU plugin computes in bf16 here (AVX-512 BF16 or AMX)."""
    return "BF16" in openvino_cpu_capabilities()


def precisions_here() -> tuple[str, ...]:
    """The precisions LiteMedSAM's OpenVINO encoder computes on this CPU: fp32 and int8, and bf16 where the
    CPU has bf16 arithmetic (elsewhere :func:`check_precision_here` refuses it)."""
    return tuple(p for p in PRECISIONS if p != "bf16" or cpu_has_bf16())


#: the instructions that give int8 its speed on a CPU (``/proc/cpuinfo`` flag: name)
INT8_DOT_PRODUCT = {"amx_int8": "AMX-INT8", "avx512_vnni": "AVX-512 VNNI", "avx_vnni": "AVX-VNNI"}


def int8_dot_product(cpuinfo: str | None = None) -> str | None:
    """The int8 dot-product instructions this CPU has (e.g. "AVX-512 VNNI"); None when it has none;
    "unknown" where ``/proc/cpuinfo`` is not there to tell (not Linux). ``cpuinfo``: its text, else read."""
    try:
        text = Path("/proc/cpuinfo").read_text() if cpuinfo is None else cpuinfo
    except OSError:
        return "unknown"
    flags = set(next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []))
    found = [name for flag, name in INT8_DOT_PRODUCT.items() if flag in flags]
    return ", ".join(found) or None


__all__ = ["INT8_DOT_PRODUCT", "PRECISIONS", "cpu_has_bf16", "int8_dot_product", "openvino_cpu_capabilities",
           "precisions_here"]
