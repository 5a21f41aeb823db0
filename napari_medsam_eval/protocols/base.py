"""The common shape of every prompt protocol.

A protocol is a small dataclass: its fields are its options (with the
reference values as defaults), ``seed`` is always one of them, and the class
attribute ``name`` is the registry key. Every protocol answers::

    protocol.prompts(source, kind=None, target_labels=None, targets=None) -> list[Prompt]

``source`` is a :class:`~napari_medsam_eval.core.case.Case` (its ``label`` and
``kind`` are used) or a bare integer label map in array order (``Z, Y, X``,
``T, Y, X`` or ``Y, X``) together with ``kind``. ``target_labels`` defaults
to every nonzero value present, ascending; ``targets``
(:class:`~napari_medsam_eval.core.targets.Target`) prompt regions of several labels, or lesions one by one. Prompts come back in a documented,
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
from typing import Any, ClassVar, Iterable, Iterator, Sequence

import numpy as np

from ..core.case import KINDS, SPATIAL_AXES, Case, present_label_values
from ..core.prompt import Prompt
from ..core.targets import Target, with_keys
from ..evaluation.lesion_maps import lesion_boxes, lesion_labels
from ..core.errors import InputError, InputTypeError


def check_runs(runs: int) -> int:
    """``runs`` as an int >= 2 (one run has no spread), else a ValueError saying so (the ``sensitivity`` option)."""
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or runs < 2:
        raise InputError(f"sensitivity: the number of perturbed runs must be an integer >= 2, got {runs!r}")
    return int(runs)


@dataclass
class PromptSource:
    """What a protocol works on: one label map, its kind and the keys of the targets to prompt.

    ``labels`` are the targets' keys (``Prompt.target_label``); :meth:`mask` gives each one's mask: a
    :class:`~napari_medsam_eval.core.targets.Target`'s (the labels it unites) when one was given for the
    key, else where the map holds the key (a label of its own).
    """

    label_map: np.ndarray
    kind: str
    labels: list[int]
    case_id: str = ""
    #: the mask of a key that is not a label of its own (a region, one lesion)
    masks: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)

    @property
    def is_2d(self) -> bool:
        return self.kind == "image"

    def mask(self, label: int) -> np.ndarray:
        mask = self.masks.get(int(label))
        return mask if mask is not None else self.label_map == label


def resolve_source(
    source: Case | np.ndarray,
    kind: str | None = None,
    target_labels: Iterable[int] | None = None,
    targets: Sequence[Target] | None = None,
) -> PromptSource:
    """Turn a Case or a label map (plus ``kind``) into a checked :class:`PromptSource`; ``targets``
    (regions) replace ``target_labels``: each target's key its mask."""
    case_id = ""
    if isinstance(source, Case):
        if source.label is None:
            raise InputError(f"case {source.case_id}: prompts are made from ground truth, but it has no label")
        if kind is not None and kind != source.kind:
            raise InputError(f"case {source.case_id} is a {source.kind}, but kind={kind!r} was given")
        label_map, kind, case_id = np.asarray(source.label), source.kind, source.case_id
    else:
        label_map = np.asarray(source)
        if kind is None:
            if label_map.ndim != 2:
                raise InputError(
                    f"a {label_map.ndim}D label map needs kind='volume' or kind='video' (its first axis is z or t)"
                )
            kind = "image"
    if kind not in KINDS:
        raise InputError(f"kind must be one of {KINDS}, got {kind!r}")
    expected_ndim = 2 if kind == "image" else 3
    if label_map.ndim != expected_ndim:
        raise InputError(f"a {kind} label map must be {expected_ndim}D ({SPATIAL_AXES[kind].upper()}), got shape {label_map.shape}")
    if label_map.dtype != bool and not np.issubdtype(label_map.dtype, np.integer):
        raise InputTypeError(f"label map must be integer or bool, got {label_map.dtype}")
    if label_map.dtype == bool:
        label_map = label_map.astype(np.uint8)
    if targets is not None:
        if target_labels is not None:
            raise InputError("give targets or target_labels, not both")
        targets = with_keys(targets) if any(not t.key for t in targets) else list(targets)
        return PromptSource(label_map=label_map, kind=kind, labels=[t.key for t in targets], case_id=case_id,
                            masks={t.key: t.mask(label_map) for t in targets if t.value != t.key})
    if target_labels is None:
        labels = present_label_values(label_map)
    else:
        labels = label_list(target_labels)
        if any(v == 0 for v in labels):
            raise InputError("target label 0 is the background")
    return PromptSource(label_map=label_map, kind=kind, labels=labels, case_id=case_id)


def label_list(values: Any, name: str = "target_labels") -> list[int]:
    """``values`` (a list of label values) as ints; an :class:`InputTypeError` naming ``name`` for one value not in
    a list (``target_labels=1``) or a value that is not a whole number."""
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        raise InputTypeError(f"{name} takes a list of label values, e.g. {name}=[{int(values)}]; got {values!r}")
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise InputTypeError(f"{name} takes a list of label values, e.g. {name}=[1, 2]; got {values!r}")
    labels = list(values)
    wrong = [v for v in labels if isinstance(v, bool) or not isinstance(v, (int, np.integer))
             and not (isinstance(v, (float, np.floating)) and float(v).is_integer())]
    if wrong:
        raise InputTypeError(f"{name} takes a list of label values (whole numbers), e.g. {name}=[1, 2]; "
                             f"got {values!r}")
    return [int(v) for v in labels]


def check_labels_held(source: Case | np.ndarray, target_labels: Any) -> None:
    """An :class:`InputError` when ``target_labels`` names a label ``source`` (a Case or a label map) does not
    hold, saying which it holds (with their names for a case that has them). A protocol itself gives such a
    target an empty prompt (a run records the case's target as ``empty_gt``); the API asks first."""
    if target_labels is None:
        return
    label_map = source.label if isinstance(source, Case) else source
    if label_map is None:
        return
    held = present_label_values(label_map)
    missing = [v for v in label_list(target_labels) if v != 0 and v not in held]
    if not missing:
        return
    names = {int(k): str(v) for k, v in (source.label_names if isinstance(source, Case) else {}).items()
             if str(k).isdigit()}
    holds = ", ".join(f"{v} ({names[v]})" if v in names else str(v) for v in held) or "no label (all background)"
    what = f"case {source.case_id}" if isinstance(source, Case) else "the label map"
    raise InputError(f"{what} holds no label {', '.join(map(str, missing))}: it holds {holds}")


def lesion_sources(source: PromptSource, target: Target) -> Iterator[tuple[int, PromptSource]]:
    """``(number, source)`` for each lesion of ``target`` in ``source`` (its mask's connected components in
    scan order, or an instance target's values: :func:`~napari_medsam_eval.evaluation.lesion_maps.lesion_labels`),
    each source holding that lesion alone under the target's key; ``(0, an empty source)`` when the target has
    no lesion here (its empty prompt). One at a time: a lesion's mask is made when its turn comes and dropped
    after, so thousands of lesions cost one mask, not one each."""
    lesions, numbers = lesion_labels(source.label_map, target)
    if not numbers:
        yield 0, PromptSource(source.label_map, source.kind, [target.key], source.case_id,
                              {target.key: np.zeros(source.label_map.shape, dtype=bool)})
        return
    for number, box in lesion_boxes(lesions, numbers):
        mask = np.zeros(source.label_map.shape, dtype=bool)  # calloc'd: only the lesion's box is touched
        mask[box] = lesions[box] == number
        yield number, PromptSource(source.label_map, source.kind, [target.key], source.case_id, {target.key: mask})


def present_slices(mask: np.ndarray) -> np.ndarray:
    """Indices along the first axis of a 3D mask where it has foreground."""
    return np.flatnonzero(np.asarray(mask).reshape(mask.shape[0], -1).any(axis=1))


def carry_targets(prompts: list[Prompt], targets: Sequence[Target] | None, source: Any = None) -> list[Prompt]:
    """``prompts``, each given its target (``Prompt.target``) where it has none: the keyed ``targets``'
    one of its ``target_label``, else its label as a target of one label (named from ``source``'s
    ``label_names`` when it is a Case)."""
    by_key = {t.key: t for t in targets or []}
    names = getattr(source, "label_names", None) or {}
    for prompt in prompts:
        if prompt.target is None and int(prompt.target_label) > 0:
            prompt.target = by_key.get(int(prompt.target_label)) or Target.of_label(int(prompt.target_label), names)
    return prompts


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
    #: model options a run of this protocol gives a model unless the run names them, by model name
    model_defaults: ClassVar[dict[str, dict[str, Any]]] = {}

    seed: int = 0
    sensitivity: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise InputError(f"{self.name}: seed must be a non-negative integer, got {self.seed!r}")
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
        targets: Sequence[Target] | None = None,
    ) -> list[Prompt]:
        """The prompts of every target (``targets``, else each of ``target_labels``, else each label present).

        A target taken lesion by lesion (``Target.lesions``) is prompted once per lesion, each lesion as
        a target of its own under the target's key, ``info["lesion"]`` its number (1, 2, ...).
        Every prompt carries its :class:`~napari_medsam_eval.core.targets.Target` (:func:`carry_targets`)."""
        if targets is not None and any(not t.key for t in targets):
            targets = with_keys(targets)
        target = resolve_source(source, kind, target_labels, targets)
        if target.kind not in self.kinds:
            raise InputError(f"protocol {self.name!r} is defined for {self.kinds}, not for a {target.kind}")
        by_lesion = {t.key: t for t in (targets or []) if t.lesions}
        if not by_lesion:
            return carry_targets(self._prompts(target), targets, source)
        out: list[Prompt] = []
        for key in target.labels:
            if key not in by_lesion:
                out.extend(self._prompts(dataclasses.replace(target, labels=[key])))
                continue
            out.extend(self._lesion_prompts(target, by_lesion[key]))
        return carry_targets(out, targets, source)

    def lesion_prompts(self, source: Case | np.ndarray, target: Target, kind: str | None = None) -> Iterator[Prompt]:
        """The prompts of a target taken lesion by lesion, as :meth:`prompts` gives them, made one lesion at a
        time as they are asked for: tens of thousands of lesions hold one lesion's mask and prompt, not a
        list of them (a benchmark run streams them: :mod:`napari_medsam_eval.benchmark.spilled_cells`)."""
        if not target.lesions:
            raise InputError(f"target {target.text()} is not taken lesion by lesion")
        target = with_keys([target])[0] if not target.key else target
        resolved = resolve_source(source, kind, None, [target])
        if resolved.kind not in self.kinds:
            raise InputError(f"protocol {self.name!r} is defined for {self.kinds}, not for a {resolved.kind}")
        for prompt in self._lesion_prompts(resolved, target):
            yield carry_targets([prompt], [target], source)[0]

    def _lesion_prompts(self, resolved: PromptSource, target: Target) -> Iterator[Prompt]:
        for number, lesion in lesion_sources(resolved, target):
            for prompt in self._prompts(lesion):
                if not prompt.info.get("empty"):
                    prompt.info["lesion"] = number
                yield prompt

    def _prompts(self, target: PromptSource) -> list[Prompt]:  # pragma: no cover - abstract
        raise NotImplementedError


def check_choice(protocol: str, option: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        raise InputError(f"{protocol}: {option} must be one of {list(choices)}, got {value!r}")
