"""What is scored: a :class:`Target` is a name and the label values it unites, or a label's lesions one by one.

The field's targets are not always one label value:

* **a region** unites several labels of the ground truth: BraTS's whole tumour (1, 2, 3), tumour core
  (2, 3) and enhancing tumour (3); KiTS's kidney-and-masses; LiTS's liver, which includes its tumour.
  One label is a region of one (the default: every label present or declared, each a target).
* **lesions** take a region's connected components one by one: each lesion is prompted on its own and
  the result is judged lesion by lesion (:mod:`napari_medsam_eval.evaluation.lesions`), besides the
  region's DSC.
* **instances** take an instance map's values one by one (nuclei, cells, a lesion instance map: each object
  its own value, touching objects touching): each value is one lesion, so touching objects stay apart.
  ``"nuclei=instances"`` takes every non-zero value, ``"cells=1,2,5:instances"`` the values listed.

Targets come from three places, all read here: ``dataset.json`` (nnU-Net v2 lists a region as a list of
values, ``"whole tumor": [1, 2, 3]``; MSD maps each value to its name), a ``--targets`` option
(:data:`TARGET_SYNTAX`: ``"liver=1,3" "tumour=3" "lesion=1:lesions"``) and the Python API (a
:class:`Target` or the same text). Each target has a ``key``, the integer its prompts carry
(``Prompt.target_label``) and an interactive object is numbered by: its label value for the first
target of a single label, else a number above every label value the targets name (:func:`with_keys`).
No Qt, no napari.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .errors import OptionError

#: how one target is written (``--targets``, the widget's field, the API)
TARGET_SYNTAX = "NAME=V[,V...][:lesions|:instances] or NAME=instances"
#: the suffix that takes a target's connected components one by one
LESIONS_SUFFIX = "lesions"
#: the suffix (or, alone, the value) that takes an instance map's values one by one, each value one lesion
INSTANCES_SUFFIX = "instances"
_ALL_INSTANCES = re.compile(r"^\s*(?P<name>[^=]+?)\s*=\s*instances\s*$", re.IGNORECASE)
_SPEC = re.compile(r"^\s*(?:(?P<name>[^=]+?)\s*=\s*)?(?P<values>[0-9][0-9\s,]*?)\s*(?::\s*(?P<mode>\w+)\s*)?$")


def clean_name(name: str) -> str:
    """A target name usable in a task name (``"<dataset>/<name>"``): trimmed, no ``/``, spaces -> ``_``."""
    return "_".join(str(name).strip().replace("/", "_").split()) or "unnamed"


def label_name(names: Mapping[int, str], value: int) -> str:
    """The name of label ``value`` in ``names`` (cleaned), ``"label_<value>"`` when it has none."""
    name = names.get(int(value))
    return clean_name(name) if name else f"label_{int(value)}"


@dataclass(frozen=True)
class Target:
    """A name and the label values it unites (``labels``); ``lesions``: its connected components one by one.

    ``key`` is the integer its prompts carry (0: not given yet; :func:`with_keys` gives one).

    Example::

        liver = Target("liver", (1, 3))                  # the liver with its tumour inside
        liver.mask(case.label)                           # bool, where the label is 1 or 3
        Target.parse("tumour=3:lesions")                 # tumour 3, lesion by lesion
    """

    name: str
    labels: tuple[int, ...]
    lesions: bool = False
    #: not part of what the target is (equality, hash): two runs may key the same target apart
    key: int = field(default=0, compare=False)
    #: lesions are the label map's values one by one (an instance map), not connected components; with no
    #: ``labels``, every non-zero value is one (``NAME=instances``)
    instances: bool = False

    def __post_init__(self) -> None:
        values = tuple(sorted({_label_value(v, self.name) for v in self.labels}))
        if not values and not self.instances:
            raise OptionError(f"target {self.name!r} names no label value")
        if self.instances:
            object.__setattr__(self, "lesions", True)
        object.__setattr__(self, "labels", values)
        object.__setattr__(self, "name", clean_name(self.name))
        if not self.key:
            object.__setattr__(self, "key", values[0] if len(values) == 1 else 0)

    @classmethod
    def of_label(cls, value: int, names: Mapping[int, str] | None = None) -> "Target":
        """Label ``value`` as a target of one label, named from ``names`` (``label_<value>`` without one)."""
        return cls(label_name(names or {}, value), (int(value),))

    @classmethod
    def parse(cls, text: str, names: Mapping[int, str] | None = None) -> "Target":
        """One target written as :data:`TARGET_SYNTAX`; a bare ``"3"`` is label 3 under its dataset name.

        An OptionError names the text and the syntax when it cannot be read.
        """
        every = _ALL_INSTANCES.match(str(text))
        if every is not None:
            return cls(every["name"], (), lesions=True, instances=True)
        match = _SPEC.match(str(text))
        if match is None:
            raise OptionError(f"target {text!r}: write it as {TARGET_SYNTAX}, e.g. \"liver=1,3\", \"tumour=3\" "
                              "or \"lesion=1:lesions\"")
        values = tuple(int(v) for v in re.split(r"[\s,]+", match["values"].strip()) if v)
        mode = (match["mode"] or "").lower()
        if mode and mode not in (LESIONS_SUFFIX, INSTANCES_SUFFIX):
            raise OptionError(f"target {text!r}: after ':' only '{LESIONS_SUFFIX}' (its connected components one "
                              f"by one) or '{INSTANCES_SUFFIX}' (its values one by one, an instance map) is "
                              f"understood, got {match['mode']!r}")
        name = match["name"] or (label_name(names or {}, values[0]) if len(values) == 1
                                 else "+".join(str(v) for v in values))
        return cls(name, values, lesions=bool(mode), instances=mode == INSTANCES_SUFFIX)

    @property
    def value(self) -> int | None:
        """The label value when the target is exactly one label (a row's ``target_label``), else None."""
        return self.labels[0] if len(self.labels) == 1 else None

    def mask(self, label_map: np.ndarray) -> np.ndarray:
        """Where ``label_map`` holds one of the target's labels (bool, the map's shape); every non-zero value
        for ``NAME=instances``."""
        array = np.asarray(label_map)
        if not self.labels:
            return array != 0
        if self.value is not None:
            return array == self.value
        return np.isin(array, self.labels)

    def text(self) -> str:
        """The target as :data:`TARGET_SYNTAX` writes it (``parse(t.text())`` gives it back, key aside)."""
        values = ",".join(str(v) for v in self.labels)
        if self.instances:
            return f"{self.name}={values}:{INSTANCES_SUFFIX}" if values else f"{self.name}={INSTANCES_SUFFIX}"
        return f"{self.name}={values}" + (f":{LESIONS_SUFFIX}" if self.lesions else "")

    def describe(self) -> str:
        """``liver (labels 1, 3)``, ``tumour (label 3, lesion by lesion)``: in words, for messages."""
        values = ", ".join(str(v) for v in self.labels)
        words = f"label{'s' if len(self.labels) > 1 else ''} {values}" if values else "every non-zero value"
        if self.instances:
            return f"{self.name} ({words}, instance by instance)"
        return f"{self.name} ({words}{', lesion by lesion' if self.lesions else ''})"

    def labels_text(self) -> str:
        """``"1,3"``: the values a row's ``target_labels`` column holds (``"instances"`` for every value)."""
        return ",".join(str(v) for v in self.labels) if self.labels else INSTANCES_SUFFIX

    def __repr__(self) -> str:
        """``Target('liver', (1, 3))``, ``Target('tumour', (3,), lesions=True)``: what makes it, never its key
        (a number the run gives, not one the case holds)."""
        extra = ", instances=True" if getattr(self, "instances", False) else ", lesions=True" if self.lesions else ""
        return f"Target({self.name!r}, {self.labels!r}{extra})"

    @classmethod
    def of(cls, value: "Target | str | int", names: Mapping[int, str] | None = None) -> "Target":
        """``value`` as a target: a :class:`Target` as it is, a text as :meth:`parse` reads it, a label value
        as :meth:`of_label` (named from ``names``); an OptionError otherwise."""
        if isinstance(value, Target):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return cls.of_label(int(value), names)
        if isinstance(value, str):
            return cls.parse(value, names)
        raise OptionError(f"a target is a Target, its text ({TARGET_SYNTAX}) or a label value, got {value!r:.80}")


def _label_value(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) <= 0:
        raise OptionError(f"target {name!r}: a label value is a whole number above 0 (0 is the background), "
                          f"got {value!r}")
    return int(value)


def with_keys(targets: Iterable[Target]) -> list[Target]:
    """``targets`` each with a distinct key: a target of one label keeps that label when no earlier target
    took it; every other target gets the next number above every label value the targets name."""
    targets = list(targets)
    names = [t.name for t in targets]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise OptionError(f"targets must have distinct names; {', '.join(twice)} is given twice")
    used: set[int] = set()
    keys: list[int | None] = []
    for target in targets:
        single = target.value
        if single is not None and single not in used:
            used.add(single)
            keys.append(single)
        else:
            keys.append(None)
    next_key = max([v for t in targets for v in t.labels] + list(used) + [0]) + 1
    out = []
    for target, key in zip(targets, keys):
        if key is None:
            key, next_key = next_key, next_key + 1
        out.append(replace(target, key=key))
    return out


def parse_targets(specs: Sequence[str | Target] | str | None, names: Mapping[int, str] | None = None
                  ) -> list[Target] | None:
    """Targets from ``--targets`` texts (or :class:`Target` objects), keyed (:func:`with_keys`); None
    for none given (each label its own target). A text may hold several targets separated by ``;``."""
    if specs is None:
        return None
    if isinstance(specs, (str, Target)):
        specs = [specs]
    targets: list[Target] = []
    for spec in specs:
        if isinstance(spec, Target):
            targets.append(spec)
            continue
        targets.extend(Target.parse(part, names) for part in str(spec).split(";") if part.strip())
    if not targets:
        raise OptionError(f"--targets: no target given; write each as {TARGET_SYNTAX}")
    return with_keys(targets)


def label_targets(values: Iterable[int], names: Mapping[int, str] | None = None) -> list[Target]:
    """Each label value its own target (the default), ascending, named from ``names``."""
    return [Target.of_label(v, names) for v in sorted({int(v) for v in values if int(v) > 0})]


def dataset_json_targets(labels: Mapping[str, Any]) -> list[Target] | None:
    """The targets a ``dataset.json`` ``labels`` entry declares when it holds nnU-Net v2 regions (a name
    mapped to a list of values, ``"whole tumor": [1, 2, 3]``), in the file's order; None when every
    entry is one value (MSD's ``{"1": "anterior"}`` or nnU-Net's ``{"anterior": 1}``: one target a label)."""
    if not isinstance(labels, Mapping) or not any(isinstance(v, list) for v in labels.values()):
        return None
    targets = []
    for name, value in labels.items():
        values = value if isinstance(value, list) else [value]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values) and values and values != [0]:
            targets.append(Target(str(name), tuple(v for v in values if v != 0)))
    return with_keys(targets) or None


def regions_only(targets: Sequence[Target] | None, where: str) -> Sequence[Target] | None:
    """``targets`` when none is taken lesion by lesion; else an OptionError saying ``where`` scores each
    target as one mask (lesions one by one are a benchmark's: ``run``)."""
    lesions = [t.text() for t in targets or [] if t.lesions]
    if lesions:
        raise OptionError(f"target {lesions[0]}: {where} scores each target as one mask; take lesions one by one "
                          "with `medsam-eval run`")
    return targets


def labels_of(targets: Iterable[Target]) -> set[int]:
    """Every label value the targets name."""
    return {v for t in targets for v in t.labels}


def check_targets(targets: Sequence[Target], known: Iterable[int], where: str) -> None:
    """An OptionError naming a target whose label value ``where`` (the dataset, the file) does not hold."""
    known = {int(v) for v in known}
    for target in targets:
        missing = [v for v in target.labels if v not in known]
        if missing:
            listing = ", ".join(str(v) for v in sorted(known)) or "none"
            raise OptionError(f"target {target.describe()}: {where} holds no label "
                              f"{', '.join(str(v) for v in missing)} (its labels: {listing})")


__all__ = ["INSTANCES_SUFFIX", "LESIONS_SUFFIX", "TARGET_SYNTAX", "Target", "check_targets", "clean_name", "dataset_json_targets",
           "label_name", "label_targets", "labels_of", "parse_targets", "regions_only", "with_keys"]
