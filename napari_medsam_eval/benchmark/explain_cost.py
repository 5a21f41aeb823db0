"""What ``explain`` will cost, said before it starts: an estimate from the run's own timings.

Explain segments each result again three ways (:mod:`napari_medsam_eval.studies.counterfactuals`): about
three decoder passes on every slice holding the object (or its prediction), one more for the prompt slice's
check, and an encoder pass on every slice it needs that is not at hand. With the run's embedding store the
slices the run encoded are read from it, so only the slices the run never reached are encoded; without a
store every slice is encoded again (once for all the variants). A row's encoder and decoder seconds per
slice come from its ``time_encoder_s`` / ``time_decoder_s`` over the slices it segmented (``slice_scores``);
a row without them is counted at its ``time_total_s`` times :data:`FALLBACK_FACTOR`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

#: decoder passes per object slice: the true extent, the best prompt slice and the true box
DECODER_PASSES = 3
#: a row without encoder/decoder timings: its run time times this (with a store, without one)
FALLBACK_FACTOR = {True: 0.5, False: 2.0}


@dataclass(frozen=True)
class ExplainCost:
    """The estimate: ``seconds`` for ``results`` results of ``cases`` cases, the run's ``run_seconds`` on them,
    and the embedding store explain reads (None: none)."""

    seconds: float
    run_seconds: float
    results: int
    cases: int
    store: str | None

    def words(self) -> str:
        """``explain: 40 results of 20 cases, about 1.5 min (the run took 62 s on them); embedding store ...``"""
        if not self.results:
            return "explain: every result is explained already (explain.csv); nothing to run"
        ran = f"the run took {_duration(self.run_seconds)} on them" if self.run_seconds else "the run's time unknown"
        store = (f"the run's embedding store {self.store} is read: only slices the run never reached are encoded"
                 if self.store else "no embedding store: every slice is encoded again (--embeddings DIR keeps them)")
        about = _duration(self.seconds)
        return (f"explain: {self.results} result{'s' if self.results != 1 else ''} of {self.cases} "
                f"case{'s' if self.cases != 1 else ''}, {'' if about.startswith('under') else 'about '}{about} "
                f"({ran}); {store}")


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _count(cell: Any, finite: bool) -> int | None:
    """How many entries of a JSON list cell are numbers (``finite``: and finite); None when unreadable."""
    try:
        values = json.loads(cell) if isinstance(cell, str) else cell
    except ValueError:
        return None
    if not isinstance(values, list):
        return None
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(1 for v in numbers if np.isfinite(v)) if finite else len(numbers)


def row_seconds(row: dict[str, Any], store: bool) -> float:
    """One result's estimate (module doc)."""
    total = _number(row.get("time_total_s"))
    encoder, decoder = _number(row.get("time_encoder_s")), _number(row.get("time_decoder_s"))
    segmented = _count(row.get("slice_scores"), finite=False)
    present = _count(row.get("slice_dice"), finite=True)
    if str(row.get("kind")) == "image" or None in (encoder, decoder, segmented, present) or not segmented:
        return (total or 0.0) * FALLBACK_FACTOR[store]
    per_encode, per_decode = encoder / segmented, decoder / segmented
    encodes = max(0, present - segmented) if store else max(present, segmented)
    return per_encode * encodes + per_decode * (DECODER_PASSES * present + 1)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if np.isfinite(number) else None


def estimate_cost(rows: pd.DataFrame, store: str | None) -> ExplainCost:
    """The cost of explaining ``rows`` (the run's rows still to explain) with embedding store ``store``."""
    records = rows.to_dict("records")
    seconds = sum(row_seconds(r, bool(store)) for r in records)
    ran = sum(_number(r.get("time_total_s")) or 0.0 for r in records)
    cases = len(set(str(r.get("case_id")) for r in records))
    return ExplainCost(seconds, ran, len(records), cases, store)


__all__ = ["DECODER_PASSES", "ExplainCost", "FALLBACK_FACTOR", "estimate_cost", "row_seconds"]
