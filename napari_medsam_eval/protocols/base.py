"""The common shape of every prompt protocol.

A protocol is a small dataclass: its fields are its options (with the
reference values as defaults), ``seed`` is always one of them, and the class
attribute ``name`` is the registry key. Every protocol answers::

    protocol.prompts(source, kind=None, target_labels=None) -> list[Prompt]

``source`` is a :class:`~napari_medsam_eval.core.case.Case` (its ``label`` and
``kind`` are used) or a bare integer label map in array order (``Z, Y, X``,
``T, Y, X`` or ``Y, X``) together with ``kind``. ``target_labels`` defaults
to every nonzero value present, ascending. Prompts come back in a documented,
deterministic order (see each protocol).

A target with no foreground where the protocol needs it gives an *empty*
:class:`~napari_medsam_eval.core.prompt.Prompt` (no boxes, no points) with
``info["empty"] = True``: the marker for "not scored" (NaN), never a silent
omission. Everything in ``info`` is plain JSON (ints, floats, strings, lists).
"""
from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Sequence

import numpy as np

from ..core.case import KINDS, SPATIAL_AXES, Case, present_label_values
from ..core.prompt import Prompt


def check_runs(runs: int) -> int:
    """``runs`` as an int >= 2 (one run has no spread), else a ValueError saying so (the ``sensitivity`` option)."""
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 2:
        raise ValueError(f"sensitivity: the number of perturbed runs must be an integer >= 2, got {runs!r}")
    return int(runs)


@dataclass
class Target:
    """What a protocol works on: one label map, its kind and the labels to prompt."""

    label_map: np.ndarray
    kind: str
    labels: list[int]
    case_id: str = ""

    @property
    def is_2d(self) -> bool:
        return self.kind == "image"

    def mask(self, label: int) -> np.ndarray:
        return self.label_map == label


def resolve_source(
    source: Case | np.ndarray,
    kind: str | None = None,
    target_labels: Iterable[int] | None = None,
) -> Target:
    """Turn a Case or a label map (plus ``kind``) into a checked :class:`Target`."""
    case_id = ""
    if isinstance(source, Case):
        if source.label is None:
            raise ValueError(f"case {source.case_id}: prompts are made from ground truth, but it has no label")
        if kind is not None and kind != source.kind:
            raise ValueError(f"case {source.case_id} is a {source.kind}, but kind={kind!r} was given")
        label_map, kind, case_id = np.asarray(source.label), source.kind, source.case_id
    else:
        label_map = np.asarray(source)
        if kind is None:
            if label_map.ndim != 2:
                raise ValueError(
                    f"a {label_map.ndim}D label map needs kind='volume' or kind='video' (its first axis is z or t)"
                )
            kind = "image"
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    expected_ndim = 2 if kind == "image" else 3
    if label_map.ndim != expected_ndim:
        raise ValueError(f"a {kind} label map must be {expected_ndim}D ({SPATIAL_AXES[kind].upper()}), got shape {label_map.shape}")
    if label_map.dtype != bool and not np.issubdtype(label_map.dtype, np.integer):
        raise TypeError(f"label map must be integer or bool, got {label_map.dtype}")
    if label_map.dtype == bool:
        label_map = label_map.astype(np.uint8)
    if target_labels is None:
        labels = present_label_values(label_map)
    else:
        labels = [int(v) for v in target_labels]
        if any(v == 0 for v in labels):
            raise ValueError("target label 0 is the background")
    return Target(label_map=label_map, kind=kind, labels=labels, case_id=case_id)


def present_slices(mask: np.ndarray) -> np.ndarray:
    """Indices along the first axis of a 3D mask where it has foreground."""
    return np.flatnonzero(np.asarray(mask).reshape(mask.shape[0], -1).any(axis=1))


def empty_prompt(protocol: str, target_label: int, slice_index: int | None = None, **info: Any) -> Prompt:
    """The "nothing to prompt, score NaN" marker for a target."""
    return Prompt(target_label=target_label, slice_index=slice_index, protocol=protocol, info={"empty": True, **info})


def stable_key(text: str) -> int:
    """A process-independent 32-bit integer for a string (``hash()`` is salted per process)."""
    return zlib.crc32(text.encode("utf-8"))


@dataclass
class PromptProtocol:
    """Base of every protocol: options are the dataclass fields, ``seed`` among them.

    ``sensitivity``: N >= 2 asks a benchmark to give each target's prompt N
    more times, perturbed (:mod:`napari_medsam_eval.studies.sensitivity`), and to
    record the DSC spread; 0 (default) does not.
    """

    name: ClassVar[str] = "protocol"
    #: kinds of case the protocol is defined for
    kinds: ClassVar[tuple[str, ...]] = KINDS

    seed: int = 0
    sensitivity: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"{self.name}: seed must be a non-negative integer, got {self.seed!r}")
        self.seed = int(self.seed)
        if self.sensitivity not in (0, None):
            self.sensitivity = check_runs(self.sensitivity)
        self.sensitivity = int(self.sensitivity or 0)

    @classmethod
    def option_names(cls) -> list[str]:
        """Every option the protocol takes (its public dataclass fields)."""
        return [f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")]

    def options(self) -> dict[str, Any]:
        """The public options and their values (private ``_`` fields excluded; ``sensitivity`` only
        when asked for, so the record of a run made before the option existed still matches)."""
        out = {}
        for f in dataclasses.fields(self):
            if f.name.startswith("_") or (f.name == "sensitivity" and not self.sensitivity):
                continue
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def describe(self) -> dict[str, Any]:
        """``{"name": ..., "options": {...}}``; ``build_protocol(d["name"], **d["options"])`` rebuilds it."""
        return {"name": self.name, "options": self.options()}

    def prompts(
        self,
        source: Case | np.ndarray,
        kind: str | None = None,
        target_labels: Sequence[int] | None = None,
    ) -> list[Prompt]:
        target = resolve_source(source, kind, target_labels)
        if target.kind not in self.kinds:
            raise ValueError(f"protocol {self.name!r} is defined for {self.kinds}, not for a {target.kind}")
        return self._prompts(target)

    def _prompts(self, target: Target) -> list[Prompt]:  # pragma: no cover - abstract
        raise NotImplementedError


def check_choice(protocol: str, option: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        raise ValueError(f"{protocol}: {option} must be one of {list(choices)}, got {value!r}")
