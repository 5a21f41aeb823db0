"""Where a speed figure comes from: the CPU, its estimated fp32 peak, and the encoder's FLOP.

Every script in ``benchmarks/`` prints :func:`cpu_line`; the scripts that time the
LiteMedSAM image encoder also print :func:`encoder_gflop` (counted once with
``torch.utils.flop_counter.FlopCounterMode`` on the eager torch encoder) and
:func:`gflops_text` (GFLOP per pass / seconds per pass, and the share of the
estimated peak). One place for these helpers: the scripts import them.

The peak is an estimate: physical cores x fp32 FLOP per cycle (from the ISA
flags, see :func:`flop_per_cycle`) x the clock :func:`cpu_facts` found. On a VM
the clock is usually the one ``/proc/cpuinfo`` reports (the host's nominal/TSC
rate); turbo can run the cores faster, so the share can exceed what the
nominal-clock peak suggests. A figure above the peak at the highest clock the
CPU reaches is not a measurement of this CPU.
"""
from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

#: the LiteMedSAM image encoder's input (one 256 x 256 RGB slice, batch 1)
ENCODER_INPUT = (1, 3, 256, 256)


@dataclass(frozen=True)
class CpuFacts:
    model_name: str = "unknown"
    vendor: str = "unknown"
    family: int | None = None
    model: int | None = None
    logical: int | None = None
    usable: int | None = None  # CPUs this process may run on (affinity)
    physical: int | None = None
    base_mhz: float | None = None
    base_source: str = ""
    max_mhz: float | None = None
    flags: frozenset[str] = field(default_factory=frozenset)


def _cpuinfo() -> list[dict[str, str]]:
    """The processor blocks of /proc/cpuinfo (empty when absent)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    blocks = []
    for chunk in text.strip().split("\n\n"):
        block = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                block[key.strip()] = value.strip()
        if block:
            blocks.append(block)
    return blocks


def _lscpu() -> dict[str, str]:
    if not shutil.which("lscpu"):
        return {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10, env={**os.environ, "LC_ALL": "C"}).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    facts = {}
    for line in out.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            facts.setdefault(key.strip(), value.strip())
    return facts


def _sysfs_mhz(name: str) -> float | None:
    try:
        return int(Path(f"/sys/devices/system/cpu/cpu0/cpufreq/{name}").read_text()) / 1000.0  # kHz
    except (OSError, ValueError):
        return None


def _int(value: str | None) -> int | None:
    try:
        return int(value, 0) if value is not None else None
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


@functools.cache
def cpu_facts() -> CpuFacts:
    """The CPU as /proc/cpuinfo, lscpu and sysfs describe it (fields they lack stay None/"unknown")."""
    blocks, ls = _cpuinfo(), _lscpu()
    first = blocks[0] if blocks else {}
    model_name = first.get("model name") or ls.get("Model name") or platform.processor() or "unknown"
    vendor = first.get("vendor_id") or ls.get("Vendor ID") or "unknown"
    family = _int(first.get("cpu family") or ls.get("CPU family"))
    model = _int(first.get("model") or ls.get("Model"))
    flags = frozenset((first.get("flags") or ls.get("Flags") or "").split())
    logical = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    cores = {(b.get("physical id", "0"), b["core id"]) for b in blocks if "core id" in b}
    physical = len(cores) or None
    if physical is None and ls.get("Core(s) per socket") and ls.get("Socket(s)"):
        physical = (_int(ls["Core(s) per socket"]) or 0) * (_int(ls["Socket(s)"]) or 0) or None
    # base clock: the "@ 2.60GHz" of the model name (Intel), sysfs base_frequency, else what
    # /proc/cpuinfo reports (under a hypervisor: the host's nominal/TSC rate, not a measured clock)
    base, source = None, ""
    match = re.search(r"@\s*([\d.]+)\s*GHz", model_name)
    if match:
        base, source = float(match.group(1)) * 1000.0, "model name"
    elif _sysfs_mhz("base_frequency"):
        base, source = _sysfs_mhz("base_frequency"), "sysfs base_frequency"
    elif _float(first.get("cpu MHz")):
        base = _float(first.get("cpu MHz"))
        source = "/proc/cpuinfo cpu MHz" + (", under a hypervisor" if "hypervisor" in flags else "")
    max_mhz = _sysfs_mhz("cpuinfo_max_freq") or _float(ls.get("CPU max MHz"))
    return CpuFacts(model_name, vendor, family, model, logical, usable, physical, base, source, max_mhz, flags)


def flop_per_cycle(facts: CpuFacts | None = None) -> tuple[int | None, str]:
    """fp32 FLOP per cycle per core from the ISA flags (an FMA counts 2), and why; (None, why) when unknown.

    avx512f: 64 on Intel (two 512-bit FMA units; one-unit Xeons reach 32) and AMD Zen 5;
    32 on AMD Zen 4 (family 25), which runs 512-bit FMAs on two 256-bit pipes.
    avx2 + fma: 32 (two 256-bit FMA units). avx without fma: 16.
    """
    facts = facts or cpu_facts()
    flags, amd = facts.flags, facts.vendor == "AuthenticAMD"
    if "avx512f" in flags:
        if amd and facts.family is not None and facts.family <= 25:
            return 32, "avx512f on AMD Zen 4: 2 x 256-bit FMA pipes"
        return 64, "avx512f: 2 x 512-bit FMA units assumed"
    if "avx2" in flags and "fma" in flags:
        if amd and facts.family == 23 and (facts.model or 0) < 0x30:
            return 16, "avx2+fma on AMD Zen 1: 2 x 128-bit FMA pipes"
        return 32, "avx2+fma: 2 x 256-bit FMA units"
    if "avx" in flags:
        return 16, "avx, no fma: 8-wide add + 8-wide mul"
    return None, "no avx/avx2/avx512f flag found"


def peak_gflops(facts: CpuFacts | None = None, mhz: float | None = None) -> float | None:
    """Estimated fp32 peak: physical cores (at most the usable ones) x FLOP/cycle x clock; None when unknown."""
    facts = facts or cpu_facts()
    per_cycle, _ = flop_per_cycle(facts)
    cores = min(c for c in (facts.physical, facts.usable) if c) if (facts.physical or facts.usable) else None
    clock = mhz if mhz is not None else facts.base_mhz
    if not (per_cycle and cores and clock):
        return None
    return cores * per_cycle * clock / 1000.0


def _mhz_text(mhz: float | None) -> str:
    return "unknown" if mhz is None else f"{mhz / 1000:.2f} GHz"


@functools.cache
def cpu_line() -> str:
    """One line naming the CPU: model, family/model, cores, clock, ISA and the estimated fp32 peak."""
    f = cpu_facts()
    fam = "unknown" if f.family is None else str(f.family)
    mod = "unknown" if f.model is None else str(f.model)
    usable = "" if f.usable in (None, f.logical) else f", {f.usable} usable"
    clock = _mhz_text(f.base_mhz) + (f" ({f.base_source})" if f.base_source else "")
    if f.max_mhz:
        clock += f", max {_mhz_text(f.max_mhz)}"
    per_cycle, why = flop_per_cycle(f)
    peak = peak_gflops(f)
    if peak is None:
        peak_text = f"fp32 peak unknown ({why})"
    else:
        cores = min(c for c in (f.physical, f.usable) if c)
        peak_text = (f"fp32 peak est. {peak:.0f} GFLOP/s = {cores} cores x {per_cycle} FLOP/cycle ({why}) "
                     f"x {_mhz_text(f.base_mhz)}")
        if f.max_mhz and f.max_mhz > (f.base_mhz or 0):
            peak_text += f"; {peak_gflops(f, f.max_mhz):.0f} at max clock"
    return (f"CPU: {f.model_name} ({f.vendor} family {fam} model {mod}); {f.logical or 'unknown'} logical / "
            f"{f.physical or 'unknown'} physical cores{usable}; base clock {clock}; {peak_text}")


@functools.cache
def encoder_gflop(encoder=None) -> float:
    """GFLOP of one LiteMedSAM image-encoder pass (batch 1, 256 x 256), counted by torch's FlopCounterMode
    on the eager torch encoder (matrix products and convolutions; elementwise work is not counted).
    Builds the torch model when ``encoder`` is None."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    if encoder is None:
        from napari_medsam_eval.models.litemedsam import build

        encoder = build(device="cpu", cache_size=0, engine="torch", embeddings=False).model.image_encoder
    counter = FlopCounterMode(display=False)
    with torch.inference_mode(), counter:
        encoder(torch.zeros(ENCODER_INPUT))
    return counter.get_total_flops() / 1e9


def gflops_text(gflop_per_pass: float, seconds_per_pass: float) -> str:
    """``"126 GFLOP/s (76% of the est. peak)"``: the rate a median pass reached and its share of the peak."""
    if not seconds_per_pass or seconds_per_pass <= 0:
        return "GFLOP/s n/a"
    rate = gflop_per_pass / seconds_per_pass
    peak = peak_gflops()
    share = "" if peak is None else f" ({100 * rate / peak:.0f}% of the est. peak {peak:.0f})"
    return f"{rate:.0f} GFLOP/s{share}"


if __name__ == "__main__":
    print(cpu_line())
