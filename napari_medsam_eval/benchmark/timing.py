"""Encoder/decoder seconds of one target, summed over every slice the backend segmented.

The propagation functions return masks only, so the per-slice
:attr:`SegmentResult.timings` would be lost. :class:`SegmentTimer` wraps the
backend's ``segment`` (and LiteMedSAM's ``segment_box256``) *on the instance*
for the duration of a ``with`` block: the object stays the same (the official
LiteMedSAM protocol checks its type) and its class is untouched, so other
users of the backend are not affected once the block ends.

A backend that propagates natively (SAM2/MedSAM2) makes no per-slice
``segment`` calls; its encoder/decoder times are then unknown (NaN) and only
the wall time around the call is recorded. A cached embedding costs no
encoder time: the second target of a case usually shows less encoder time.

A backend that embeds slices outside ``segment`` too (LiteMedSAM's video rule reads each frame's
feature grid before its mask) reports every encoder pass through its ``embed`` method: where a backend
has one, it is wrapped as well and the encoder time is its sum (never counted twice). The columns add
up: ``time_other_s`` is the rest of the wall time (preparing slices, the propagation rules, copies).
"""
from __future__ import annotations

import functools
import time
from typing import Any

from ..models.base import SegmentationBackend

#: backend methods returning a SegmentResult whose timings are summed
TIMED_METHODS = ("segment", "segment_box256")
#: the backend method returning ``(embedding, encoder seconds)`` for every encoder pass, where there is one
EMBED_METHOD = "embed"


class SegmentTimer:
    """Context manager summing ``timings["encoder"/"decoder"]`` and the wall time."""

    def __init__(self, backend: SegmentationBackend) -> None:
        self.backend = backend
        self.encoder = 0.0
        self.decoder = 0.0
        self.calls = 0
        self.reported = 0
        self.total = 0.0
        self._saved: dict[str, Any] = {}
        self._start = 0.0

    def _wrap(self, method, embeds: bool):
        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any):
            result = method(*args, **kwargs)
            self.calls += 1
            timings = getattr(result, "timings", None) or {}
            if "encoder" in timings or "decoder" in timings:
                self.reported += 1
                if not embeds:  # else the embed wrapper counted this call's encoder pass
                    self.encoder += float(timings.get("encoder", 0.0))
                self.decoder += float(timings.get("decoder", 0.0))
            return result

        return timed

    def _wrap_embed(self, method):
        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any):
            embedding, seconds = method(*args, **kwargs)
            self.encoder += float(seconds)
            return embedding, seconds

        return timed

    def __enter__(self) -> "SegmentTimer":
        embeds = hasattr(type(self.backend), EMBED_METHOD)
        for name in TIMED_METHODS + ((EMBED_METHOD,) if embeds else ()):
            if hasattr(type(self.backend), name):
                self._saved[name] = self.backend.__dict__.get(name)
                method = getattr(self.backend, name)
                setattr(self.backend, name, self._wrap_embed(method) if name == EMBED_METHOD
                        else self._wrap(method, embeds))
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.total = time.perf_counter() - self._start
        for name, previous in self._saved.items():
            if previous is None:
                delattr(self.backend, name)
            else:
                setattr(self.backend, name, previous)
        self._saved.clear()

    def columns(self) -> dict[str, float]:
        """The ``time_*_s`` columns: NaN for encoder/decoder (and the rest) when no call reported them."""
        known = self.reported > 0
        return with_rest({
            "time_encoder_s": self.encoder if known else float("nan"),
            "time_decoder_s": self.decoder if known else float("nan"),
            "time_total_s": self.total,
        })


def with_rest(times: dict[str, float]) -> dict[str, float]:
    """``times`` with ``time_other_s``: the wall time that is neither encoder nor decoder, so that encoder +
    decoder + other = total (NaN when the encoder/decoder times are unknown)."""
    rest = times["time_total_s"] - times["time_encoder_s"] - times["time_decoder_s"]
    return {**times, "time_other_s": max(0.0, rest) if rest == rest else float("nan")}
