"""A cheap check that an exported LiteMedSAM encoder computes what the torch encoder computes.

A cached export is verified against its manifest's SHA-256 sums, but a file
damaged *and* re-hashed (or an exporter that silently produces a wrong graph)
passes that check, loads, and then gives empty masks. So, when an export is
made, the torch encoder is run once on a fixed input (:func:`fingerprint_input`:
seeded uniform noise, 1 x 3 x 256 x 256, the shape of a preprocessed slice) and
a small summary of its output is stored in the manifest
(:func:`reference_fingerprint`): the value at :data:`SAMPLE_COUNT` fixed
positions and the mean of every output channel. Every time an export is loaded
its engine runs on the same input and :func:`fingerprint_mismatch` compares
the summaries. That costs one encoder pass per load: ~0.25 s with OpenVINO
on 2 idle cores, 1.5 s measured on 2 cores shared with a load average of 5; a process that loads
the same unchanged files again (a widget rebuilding its model, a test suite) skips it
(``litemedsam_engines._CHECKED_EXPORTS``).

Tolerances, as the relative L2 error of the summaries (sampled values and
channel means, the larger of the two), measured on that input against eager
torch: OpenVINO fp32 differs by ~4e-6, OpenVINO bf16 by ~0.04; a damaged weight
file gives errors of order 1. :data:`TOLERANCE` is 1e-3 for fp32 (250 times the
normal difference) and 0.25 for bf16 (6 times).

The INT8 export (:mod:`.litemedsam_precision`) is ~0.9 away from torch on this noise input (it is
calibrated on real slices, and noise lies outside their range), so its manifest stores *its own*
summary, made when it was quantized, checked at every load with tolerance 1e-2 ("int8"); how far it
lies from torch on real calibration slices is checked once, when it is made (``INT8_ERROR_LIMIT``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

#: seed of the fixed input and of the sampled positions
FINGERPRINT_SEED = 20240617
#: output values stored in the manifest (plus one mean per output channel)
SAMPLE_COUNT = 512
#: relative L2 error allowed between an engine's summary and torch's, by inference precision
TOLERANCE = {"f32": 1e-3, "bf16": 0.25, "int8": 1e-2}
#: the encoder's input shape (batch 1, RGB, 256 x 256), as preprocess_slice makes it (H, W, 3)
INPUT_HW3 = (256, 256, 3)


def fingerprint_input() -> np.ndarray:
    """The fixed ``(256, 256, 3)`` float32 input in [0, 1): seeded uniform noise."""
    return np.random.default_rng(FINGERPRINT_SEED).random(INPUT_HW3, dtype=np.float32)


def summarize(output: Any, indices: np.ndarray | None = None) -> dict[str, Any]:
    """The summary of an encoder output ``(1, C, H, W)``: shape, values at ``indices``
    (seeded positions when None) and the mean of each channel."""
    array = np.asarray(output.detach().cpu() if isinstance(output, torch.Tensor) else output, dtype=np.float64)
    flat = array.reshape(-1)
    if indices is None:
        rng = np.random.default_rng(FINGERPRINT_SEED + 1)
        indices = np.sort(rng.choice(flat.size, size=min(SAMPLE_COUNT, flat.size), replace=False))
    channels = array.reshape(array.shape[0], array.shape[1], -1).mean(axis=(0, 2)) if array.ndim >= 2 else flat
    return {
        "shape": [int(d) for d in array.shape],
        "indices": [int(i) for i in indices],
        "values": [float(f"{v:.8g}") for v in flat[indices]],
        "channel_means": [float(f"{v:.8g}") for v in channels],
    }


def reference_fingerprint(encoder: torch.nn.Module) -> dict[str, Any]:
    """The torch encoder's summary on :func:`fingerprint_input` (CPU, float32), for the manifest."""
    tensor = torch.tensor(fingerprint_input()).float().permute(2, 0, 1).unsqueeze(0)
    with torch.inference_mode():
        output = encoder(tensor)
    summary = summarize(output.float())
    summary["input"] = f"numpy default_rng({FINGERPRINT_SEED}).random((256, 256, 3), float32)"
    return summary


def manifest_fingerprint(folder: Path) -> Any:
    """The reference fingerprint in ``folder``'s ``manifest.json`` (None when absent or unreadable)."""
    try:
        return json.loads((Path(folder) / "manifest.json").read_text()).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return None


def _relative_error(ours: np.ndarray, ref: np.ndarray) -> float:
    scale = float(np.linalg.norm(ref))
    diff = float(np.linalg.norm(ours - ref))
    return diff / scale if scale > 0 else diff


def fingerprint_error(engine: Callable[[np.ndarray], Any], reference: dict[str, Any]) -> float:
    """Relative L2 error of ``engine``'s summary on the fixed input against ``reference``
    (``inf`` when the shapes differ or the output is not finite)."""
    output = engine(fingerprint_input())
    array = np.asarray(output.detach().cpu() if isinstance(output, torch.Tensor) else output, dtype=np.float64)
    if [int(d) for d in array.shape] != list(reference["shape"]) or not np.isfinite(array).all():
        return float("inf")
    ours = summarize(array, np.asarray(reference["indices"], dtype=np.int64))
    return max(
        _relative_error(np.asarray(ours["values"]), np.asarray(reference["values"], dtype=np.float64)),
        _relative_error(np.asarray(ours["channel_means"]), np.asarray(reference["channel_means"], dtype=np.float64)),
    )


def fingerprint_mismatch(engine: Callable[[np.ndarray], Any], reference: dict[str, Any] | None,
                         precision: str = "f32") -> str | None:
    """None when ``engine`` reproduces ``reference`` within :data:`TOLERANCE`, else why not (one line)."""
    if not isinstance(reference, dict) or not {"shape", "indices", "values", "channel_means"} <= set(reference):
        return "its manifest holds no reference fingerprint"
    tolerance = TOLERANCE.get(precision, TOLERANCE["f32"])
    try:
        error = fingerprint_error(engine, reference)
    except Exception as exc:  # the runtime failing on the fixed input is a mismatch too
        return f"it fails on the check input ({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''})"
    if error <= tolerance:
        return None
    shown = "not finite or of the wrong shape" if error == float("inf") else f"{error:.3g}"
    return f"its output on the check input differs from the torch encoder's by {shown} (relative; allowed {tolerance:g})"


__all__ = [
    "FINGERPRINT_SEED",
    "SAMPLE_COUNT",
    "TOLERANCE",
    "fingerprint_error",
    "fingerprint_input",
    "fingerprint_mismatch",
    "manifest_fingerprint",
    "reference_fingerprint",
    "summarize",
]
