"""Whether a run's first step reproduces: its prompt slice segmented again, compared like with like.

``explain`` (:mod:`.explain`) segments each result's prompt slice again before its variants: their gains
are against the run's result, which only holds if the model still gives the run's answer. The run's slice
went through the run's post-processing (the ``medsam2`` protocol keeps the largest 3D component), the fresh
one did not: :func:`reproduces` compares like with like, so a 2-pixel island the run's step removed is no
difference. A real one marks the row ``differs`` with :func:`what_changed` naming what the run recorded
(its manifest's model description and versions) that is not so now.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..studies.counterfactuals import CORRECTING, OFFICIAL_3D

#: a reproduced DSC this far from the run's is told (the model or its engine changed)
REPRODUCED_TOLERANCE = 1e-3


def check_prompt_slice(backend: Any, image: np.ndarray, case: Any, asked: list, gt: np.ndarray, row: Any,
                        protocol: str, run_mask: np.ndarray | None = None, changes: str = "") -> dict[str, Any]:
    """The run's first step again: the prompted slice (a 2D image: the whole result) segmented from the
    recorded prompt, its DSC against the run's (``prompt_slice_dice``; a 2D image's ``dice``), like with like:
    where the prompt asked for the largest 3D component, the run's slice is the fresh one less the islands
    that step removed (:func:`reproduces`). A real difference (the model, its engine or the data changed)
    makes the row ``differs``, its note naming what the run recorded that is not so now (``changes``): its
    gains are against the run's result, which this model would not give. Not checked where the prompt slice's
    DSC is not the first prompt's own (lesions, the official 3D loop, corrections)."""
    from ..core.postprocess import wants_largest_component
    from ..evaluation.metrics import compute_dice
    from ..propagation.segment import segment_by_kind

    if len(asked) != 1 or protocol in (*CORRECTING, OFFICIAL_3D):
        return {}
    prompt = asked[0]
    if case.kind == "image":
        mask = segment_by_kind(backend, image, case.kind, prompt, case_id=case.case_id).mask
        ran, now = float(row.dice), float(compute_dice(mask, gt))
        same = abs(now - ran) <= REPRODUCED_TOLERANCE
    else:
        ran = float(getattr(row, "prompt_slice_dice", np.nan))
        if prompt.slice_index is None or not np.isfinite(ran):
            return {}
        z = int(prompt.slice_index)
        mask = segment_by_kind(backend, image, case.kind, prompt, how="slice", case_id=case.case_id).mask[z]
        now = float(compute_dice(mask, gt[z]))
        islands = case.kind == "volume" and wants_largest_component(prompt.info)
        same = reproduces(mask, gt[z], ran, None if run_mask is None else run_mask[z], islands)
    found: dict[str, Any] = {"dice_reproduced": round(now, 4)} if case.kind == "image" else {}
    if not same:
        what = "DSC" if case.kind == "image" else "prompt slice's DSC"
        step = "" if case.kind == "image" or not islands else \
            " (the run's largest-3D-component step taken into account)"
        found.update(status="differs", note=f"the {what} is {now:.4f} now, {ran:.4f} in the run{step}: "
                                            f"{changes or NOTHING_RECORDED_CHANGED}; gains are against the run's "
                                            "result")
    return found


#: a ``differs`` note where nothing the run recorded is different now
NOTHING_RECORDED_CHANGED = ("nothing the run recorded differs now (the model's name, checkpoint, precision and "
                            "device, torch, numpy, the case's files): the model or its engine does not give the "
                            "same answer twice here")
#: the most islands whose every subset is tried against a run's prompt-slice DSC (2 ** 12 DSCs)
MAX_ISLANDS = 12


def reproduces(fresh: np.ndarray, truth: np.ndarray, ran: float, run_slice: np.ndarray | None,
               islands: bool) -> bool:
    """Whether a prompt slice segmented again (``fresh``, raw) is the run's, whose DSC was ``ran``.

    Without the largest-3D-component step (``islands`` False) the DSCs agree within
    :data:`REPRODUCED_TOLERANCE`. With it, the run's slice is ``fresh`` less some of its 8-connected parts (a
    part lies wholly in one 26-connected 3D component, kept or removed): with the run's saved slice
    (``run_slice``) that is checked exactly, else some set of the parts kept must give the run's DSC."""
    from itertools import combinations

    from scipy import ndimage

    from ..evaluation.metrics import compute_dice

    fresh, truth = np.asarray(fresh, dtype=bool), np.asarray(truth, dtype=bool)
    if abs(float(compute_dice(fresh, truth)) - ran) <= REPRODUCED_TOLERANCE:
        return True
    if not islands or not fresh.any():
        return False
    parts, count = ndimage.label(fresh, structure=np.ones((3, 3), dtype=bool))
    if run_slice is not None:
        run_slice = np.asarray(run_slice, dtype=bool)
        kept = np.isin(parts, np.unique(parts[run_slice & fresh]))
        return bool(np.array_equal(kept & fresh, run_slice) and abs(float(compute_dice(run_slice, truth)) - ran)
                    <= REPRODUCED_TOLERANCE)
    if count > MAX_ISLANDS:
        return False
    for size in range(count, 0, -1):  # the most parts kept first: the step removes few
        for subset in combinations(range(1, count + 1), size):
            if abs(float(compute_dice(np.isin(parts, subset), truth)) - ran) <= REPRODUCED_TOLERANCE:
                return True
    return False


def what_changed(manifest: dict[str, Any], run_options: dict[str, Any], backend: Any, options: dict[str, Any]) -> str:
    """What the run recorded that is different now, in words ("" when nothing): the model's description
    (name, checkpoint SHA-256, precision, device, engine), the versions of torch and numpy, model options
    added for explain."""
    from .manifest import environment

    before, now = manifest.get("model") or {}, {}
    try:
        now = backend.describe()
    except Exception:  # noqa: BLE001 - a backend that cannot describe itself names nothing
        pass
    changed = [f"the model's {key} {_short(before[key])} -> {_short(now[key])}" for key in sorted(before)
               if key in now and key != "embeddings" and before[key] != now[key] and not isinstance(now[key], dict)]
    env_before, env_now = manifest.get("environment") or {}, environment()
    changed += [f"{key} {env_before[key]} -> {env_now[key]}" for key in ("torch", "numpy")
                if env_before.get(key) and env_now.get(key) and env_before[key] != env_now[key]]
    added = {k: v for k, v in options.items() if k not in run_options and not k.startswith("embeddings")}
    changed += [f"the model option {key}={value!r} given to explain, not to the run" for key, value in added.items()]
    return "changed since the run: " + ", ".join(changed) if changed else ""


def _short(value: Any) -> str:
    text = str(value)
    return text[:12] + "..." if len(text) > 16 else text


__all__ = ["MAX_ISLANDS", "NOTHING_RECORDED_CHANGED", "REPRODUCED_TOLERANCE", "check_prompt_slice", "reproduces",
           "what_changed"]
