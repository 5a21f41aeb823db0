"""A ``cvpr25-interactive`` case in a run: its classes segmented together and each row's columns.

The challenge scores one label map per case (:mod:`napari_medsam_eval.studies.cvpr25`); the runner still
writes one row per target. Each row gets its class's scores in the case's map (``dice_after``,
``nsd_after``, ``dsc_auc`` ...), its own mask's (``own_*``) and the case's, the script's row
(``case_*``, the same on every row of the case); the time columns are the class's own model calls (the
scoring is not in them). The row's ``dice``, ``nsd`` ... are its own final mask's, as for every protocol.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import numpy as np

from ..core.case import Case
from ..core.prompt import Prompt, prompts_to_json
from ..core.targets import Target
from ..evaluation import cvpr25
from ..evaluation.interaction_effort import noc_columns
from ..propagation.anchors import AnchoredSegmentation
from ..studies.cvpr25 import run_challenge_case
from .schema import json_dumps
from .timing import SegmentTimer, with_rest


def scored_targets(targets: list[Target], prompts: dict[int, list[Prompt]]) -> list[Target]:
    """The targets the case's map holds: those with a prompt that asks something (an absent target's row
    is ``empty_gt``, a replayed log's missing one fails, as for any protocol)."""
    def asks(p: Prompt) -> bool:
        return not (p.is_empty or p.info.get("empty") or p.info.get("no_prompt"))
    return [t for t in targets if prompts.get(t.key) and asks(prompts[t.key][0])]


def _rounded(values: list[float]) -> str:
    return json_dumps([None if v != v else round(v, 4) for v in values])


def _summed(times: list[dict[str, float]]) -> dict[str, float]:
    if not times:
        return with_rest({"time_encoder_s": float("nan"), "time_decoder_s": float("nan"), "time_total_s": 0.0})
    return with_rest({name: float(sum(t[name] for t in times))
                      for name in ("time_encoder_s", "time_decoder_s", "time_total_s")})


def challenge_case(backend: Any, protocol: Any, case: Case, image: np.ndarray, prompts: dict[int, list[Prompt]],
                   targets: list[Target], *, rules: Any = None,
                   progress: Callable[[Target, int], Any] | None = None) -> dict[int, tuple[np.ndarray, dict]]:
    """Each scored target's final own mask and row columns, by key (module doc)."""
    chosen = scored_targets(targets, prompts)
    if not chosen:
        return {}
    spacing = cvpr25.scoring_spacing(case, getattr(protocol, "nsd_spacing", "as-stored"))
    sessions = {t.key: AnchoredSegmentation(backend, image, case.kind, rules=rules, case_id=case.case_id)
                for t in chosen}
    times: dict[int, list[dict[str, float]]] = {t.key: [] for t in chosen}

    @contextlib.contextmanager
    def timed(key: int) -> Iterator[None]:
        with SegmentTimer(backend) as timer:
            yield
        times[key].append(timer.columns())

    reports = {t.key: progress(t, i) if progress else None for i, t in enumerate(chosen)}
    done = run_challenge_case(sessions, {t.key: prompts[t.key][0] for t in chosen},
                              {t.key: t.mask(case.label) for t in chosen}, protocol, spacing,
                              progress=reports, timed=timed)
    case_cols = cvpr25.prefixed("case_", [s["dice"] for s in done.case], [s["nsd"] for s in done.case])
    out = {}
    for t in chosen:
        dice, nsd = done.steps(t.key), done.steps(t.key, score="nsd")
        own_dice, own_nsd = done.steps(t.key, "own"), done.steps(t.key, "own", "nsd")
        row = {**_summed(times[t.key]), "prompt": prompts_to_json(done.anchors[t.key]),
               "dice_after": _rounded(dice), "nsd_after": _rounded(nsd), **noc_columns(dice),
               **cvpr25.columns(dice, nsd), **case_cols,
               "own_dice_after": _rounded(own_dice), "own_nsd_after": _rounded(own_nsd),
               **cvpr25.prefixed("own_", own_dice, own_nsd)}
        out[t.key] = (done.masks[t.key], row)
    return out


__all__ = ["challenge_case", "scored_targets"]
