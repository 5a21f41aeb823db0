"""Prompt protocols: named, seeded recipes that make prompts from ground truth.

Every protocol is a small dataclass whose fields are its options (defaults =
the reference implementation's values, ``seed`` always among them) and whose
docstring cites its source. Build one by name and ask it for prompts::

    from napari_medsam_eval.protocols import build_protocol
    protocol = build_protocol("medsam2", key_slice="middle", margin=0)
    prompts = protocol.prompts(case)                       # a Case
    prompts = protocol.prompts(label_zyx, kind="volume")   # or a label map
    protocol.describe()  # {"name": "medsam2", "options": {...}} for a run's record

``prompts(source, kind=None, target_labels=None) -> list[Prompt]``; the
targets default to every nonzero label, ascending. A target with nothing to
prompt gives an empty Prompt with ``info["empty"] = True`` (score NaN).

=====================  =======================================================
name                   prompts
=====================  =======================================================
``medsam2``            one tight box per target on the key slice (middle of the
                       z-extent) / key frame (first present); 2D: tight box
``litemedsam-3dbox``   the CVPR24 3D box per target, on its middle slice, with
                       ``info["box_3d"]``
``mazurowski``         Mazurowski et al. 2023 modes 1-5 per 2D mask (one Prompt
                       per mode), bit-exact with their code
``iterative-points``   Mazurowski et al. Alg. 1: first point here, the rest
                       from :meth:`IterativePointsProtocol.iterate` with a model
``box-jitter``         the medsam2 box shifted/scaled at random (seeded)
``replay``             the prompts a person drew, from a prompt log (option
                       ``log``; ``medsam-eval run --prompts LOG.csv``)
=====================  =======================================================
"""
from __future__ import annotations

from typing import Any

from ..core.errors import OptionError
from ..core.options import check_dataclass_options
from .base import PromptProtocol, PromptSource, resolve_source
from .geometry import (
    clip_box,
    connected_parts,
    distance_transform,
    expand_box,
    interior_candidates,
    interior_point,
    tight_box,
    tight_box_3d,
)
from .iterative import IterationStep, IterativePointsProtocol, IterativeRun, first_point, iterate, next_point
from .jitter import BoxJitterProtocol, jitter_box
from .litemedsam import LiteMedSAM3DBoxProtocol
from .mazurowski import (
    MazurowskiPromptSet,
    MazurowskiProtocol,
    mazurowski_label_map,
    mazurowski_prompt_set,
    slice_plan,
)
from .medsam2 import MedSAM2Protocol, MedSAM2RecistProtocol, key_frame_index, key_slice_index
from .corrections import CorrectionsProtocol
from .cvpr25 import CVPR25Protocol
from .replay import ReplayProtocol
from ..core.errors import InputError

#: every protocol class by its registry name
PROTOCOLS: dict[str, type[PromptProtocol]] = {
    cls.name: cls
    for cls in (
        MedSAM2Protocol,
        MedSAM2RecistProtocol,
        CorrectionsProtocol,
        CVPR25Protocol,
        LiteMedSAM3DBoxProtocol,
        MazurowskiProtocol,
        IterativePointsProtocol,
        BoxJitterProtocol,
        ReplayProtocol,
    )
}
#: the protocols that make prompts from ground truth (the widgets' choices; ``replay`` reads a prompt log)
GROUND_TRUTH_PROTOCOLS: tuple[str, ...] = tuple(sorted(n for n in PROTOCOLS if n != ReplayProtocol.name))


def protocol_options(name: str) -> dict[str, Any]:
    """The options of protocol ``name`` with their defaults."""
    return _lookup(name)().options()


def build_protocol(name: str, **options: Any) -> PromptProtocol:
    """The protocol registered as ``name``, with ``options`` overriding its defaults.

    Raises ValueError for an unknown name, and :class:`~napari_medsam_eval.core.errors.OptionError`
    (a ValueError and a TypeError) naming the option: misspelt (with the valid ones), of the wrong
    type (a boolean is not a number) or out of its range.
    """
    cls = _lookup(name)
    check_dataclass_options(cls, options, f"protocol {name!r}")
    try:
        return cls(**options)
    except (TypeError, ValueError) as error:  # a range or a meaning the class itself checks
        raise OptionError(str(error)) from None


def _lookup(name: str) -> type[PromptProtocol]:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise InputError(f"unknown prompt protocol {name!r}; known: {sorted(PROTOCOLS)}") from None


__all__ = [
    "GROUND_TRUTH_PROTOCOLS",
    "PROTOCOLS",
    "BoxJitterProtocol",
    "IterationStep",
    "IterativePointsProtocol",
    "IterativeRun",
    "LiteMedSAM3DBoxProtocol",
    "MazurowskiPromptSet",
    "MazurowskiProtocol",
    "CorrectionsProtocol",
    "CVPR25Protocol",
    "MedSAM2Protocol",
    "MedSAM2RecistProtocol",
    "PromptProtocol",
    "ReplayProtocol",
    "PromptSource",
    "build_protocol",
    "clip_box",
    "connected_parts",
    "distance_transform",
    "expand_box",
    "first_point",
    "interior_candidates",
    "interior_point",
    "iterate",
    "jitter_box",
    "key_frame_index",
    "key_slice_index",
    "mazurowski_label_map",
    "mazurowski_prompt_set",
    "next_point",
    "protocol_options",
    "resolve_source",
    "slice_plan",
    "tight_box",
    "tight_box_3d",
]
