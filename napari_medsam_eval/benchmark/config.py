"""One benchmark run's settings, in one frozen, picklable :class:`RunConfig`.

The CLI (``medsam-eval run``) and the Benchmark widget build it;
:func:`~.runner.run_benchmark` takes it; the local, process and Ray executors
and every case's evaluator receive it; the manifest records it
(:meth:`RunConfig.to_manifest`) and ``--resume`` compares the recorded one
with the new one, naming each difference (:meth:`RunConfig.differences`).
Adding a run option means adding a field here (with its check in
:meth:`RunConfig.checked` and, when a resumed run must agree on it, its name
in :data:`RESUME_KEYS`) and its CLI/widget control.
"""
from __future__ import annotations

import json
from numbers import Integral
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..core.errors import OptionError
from ..core.options import MAX_SEED
from ..evaluation.scoring import NSD_TOLERANCE_MM
from ..core.errors import InputError

#: the run's options a resumed run must agree on (besides the model checkpoint's SHA-256)
RESUME_KEYS = ("dataset_path", "layout", "model", "model_options", "protocol", "protocol_options", "seed",
               "intensity", "propagation", "targets", "lesions")
#: the value a key had in run folders made before it was recorded
RESUME_DEFAULTS = {"intensity": "auto", "propagation": None, "targets": None, "lesions": None}
#: manifest keys that name a field under another name
_MANIFEST_NAMES = {"dataset": "dataset_path"}
#: fields that describe this invocation, not the run's results (never in the manifest's config)
_NOT_RECORDED = ("out_dir", "resume", "tolerance_mm", "precision", "overwrite")
#: fields recorded only when they differ from the default (older manifests lack them)
_RECORDED_WHEN_SET = {"executor": "local", "ray_address": None, "gpus_per_worker": 0.0}
#: fields recorded only when they differ from the default, whatever the executor
_RECORDED_WHEN_CHANGED = {"prediction_format": "nifti"}
#: fields recorded only when set, whatever the executor
_RECORDED_WHEN_TRUE = ("allow_outside", "targets", "lesions", "cases")


@dataclass(frozen=True)
class RunConfig:
    """A dataset x a model x a prompt protocol, and how the run goes.

    ``model`` is a registry name (``napari_medsam_eval.models.BACKENDS``) or
    ``"package.module:builder"``; ``model_options`` go to its builder and
    ``protocol_options`` to the protocol. ``layout`` None detects the dataset's
    layout. ``cases`` takes those case ids only (refusing one the dataset does not
    list), ``limit`` the first K cases (of those) in the layout's order;
    ``resume`` continues a run folder (same dataset, model, options, protocol
    and seed); ``overwrite`` replaces an earlier run in ``out_dir`` (the files
    the run and its report wrote; a folder holding anything else is refused,
    naming it). ``seed`` seeds the protocol. ``intensity``
    (:data:`~napari_medsam_eval.core.intensity.INTENSITY_MODES`) overrides what the
    readers record of the cases' intensities. ``propagation``: the rules of
    per-slice models (a preset name, a dict of options, or None for each
    kind's measured default). ``executor``: ``"local"`` (this process, or
    ``workers`` spawned processes) or ``"ray"`` (``workers`` Ray actors, a
    local Ray or the cluster at ``ray_address``, each reserving
    ``gpus_per_worker`` GPUs). ``targets``: what is scored
    (:mod:`napari_medsam_eval.core.targets`: texts such as ``"liver=1,3"``, ``"tumour=3:lesions"``, or
    ``Target`` objects; None: the dataset's regions, else each label); ``lesions``: how lesions are matched
    and sized (:class:`~napari_medsam_eval.evaluation.lesions.LesionRule` options; None: its defaults).

    It prints as one line (dataset, run folder, model, protocol and the options that differ from their
    defaults); :meth:`details` lists every field.

    Example::

        config = RunConfig("sample_data/phantom_video", "runs/video", model="litemedsam", protocol="medsam2")
        run_benchmark(config.replace(workers=2))
        run_benchmark(config.replace(cases=["seq01"], overwrite=True))   # one case again, into the same folder
    """

    dataset: Path
    out_dir: Path
    model: str = "litemedsam"
    protocol: str = "medsam2"
    model_options: dict[str, Any] = field(default_factory=dict)
    protocol_options: dict[str, Any] = field(default_factory=dict)
    layout: str | None = None
    limit: int | None = None
    workers: int = 1
    resume: bool = False
    save_predictions: bool = False
    #: the saved predictions' format (``--prediction-format``): ``nifti`` (NIfTI, npz beside npz sources, PNG for
    #: 2D images) or ``dicom-seg`` (a DICOM SEG on each case's DICOM series); see ``prediction_files``
    prediction_format: str = "nifti"
    seed: int = 0
    intensity: str = "auto"
    propagation: str | dict[str, Any] | None = None
    executor: str = "local"
    ray_address: str | None = None
    gpus_per_worker: float = 0.0
    #: NSD tolerance of every row (the manifest's ``metrics`` section records it)
    tolerance_mm: float = NSD_TOLERANCE_MM
    #: the built model's precision as its ``describe()`` says (LiteMedSAM: fp32, bf16, int8; "" when it does not
    #: say), set by the run for its rows; the option that chooses it is ``model_options["precision"]``
    precision: str = ""
    #: read files a dataset lists outside its folder (``--allow-outside``; refused per case otherwise)
    allow_outside: bool = False
    #: the targets scored, as texts (``--targets``); None: the dataset's regions, else each label
    targets: tuple[str, ...] | None = None
    #: lesion matching and size options (``LesionRule``'s); None: its defaults
    lesions: dict[str, Any] | None = None
    #: the case ids to run (in the layout's order); None: every case
    cases: tuple[str, ...] | None = None
    #: replace an earlier run in ``out_dir`` (its files only) instead of refusing a folder that is not empty
    overwrite: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "dataset", Path(self.dataset))
        object.__setattr__(self, "out_dir", Path(self.out_dir))
        object.__setattr__(self, "model_options", dict(self.model_options or {}))
        object.__setattr__(self, "protocol_options", dict(self.protocol_options or {}))
        if self.targets is not None:  # canonical texts: a syntax error is refused here, and the manifest reads alike
            from ..core.targets import parse_targets

            object.__setattr__(self, "targets", tuple(t.text() for t in parse_targets(self.targets)))
        if self.lesions is not None:
            object.__setattr__(self, "lesions", dict(self.lesions))
        if self.cases is not None:
            if isinstance(self.cases, (str, bytes)) or not all(isinstance(c, str) for c in self.cases):
                raise OptionError(f"cases takes a list of case ids, e.g. cases=['hippocampus_001'], got {self.cases!r}")
            object.__setattr__(self, "cases", tuple(dict.fromkeys(self.cases)))

    def replace(self, **changes: Any) -> "RunConfig":
        return replace(self, **changes)

    def checked(self) -> "RunConfig":
        """This config, or a ValueError/OptionError naming the option that cannot run (before any work)."""
        from ..core.intensity import INTENSITY_MODES
        from ..propagation.rules import resolve_rules
        from .executors import check_executor

        if isinstance(self.seed, bool) or not isinstance(self.seed, Integral) or not 0 <= self.seed <= MAX_SEED:
            raise OptionError(f"seed must be a whole number from 0 to 2**63 - 1 (what a results table's integer "
                              f"column holds), got {self.seed!r}")
        for name in ("workers", "limit"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, Integral)):
                raise OptionError(f"{name} must be a whole number, got {value!r}")
        if self.workers < 1:
            raise InputError(f"workers must be >= 1, got {self.workers}")
        check_executor(self.executor, self.workers, self.gpus_per_worker, self.ray_address)
        if self.propagation is not None:  # unknown presets and options refused before any work
            resolve_rules("volume", self.propagation)
        if self.intensity not in INTENSITY_MODES:
            raise InputError(f"intensity must be one of {INTENSITY_MODES}, got {self.intensity!r}")
        if self.limit is not None and self.limit < 1:
            raise InputError(f"limit must be >= 1, got {self.limit}")
        if self.cases is not None and not self.cases:
            raise OptionError("cases is empty: give the case ids to run, or None for every case")
        if self.overwrite and self.resume:
            raise OptionError("overwrite and resume contradict each other: resume continues the earlier run, "
                              "overwrite replaces it; give one")
        from .prediction_files import check_prediction_format

        check_prediction_format(self.prediction_format)
        if self.prediction_format != "nifti" and not self.save_predictions:
            raise OptionError(f"prediction_format {self.prediction_format!r} is the format of saved predictions: "
                              "set save_predictions (--save-predictions)")
        if self.lesions is not None:
            self.lesion_rule()
        if self.protocol_options.get("seed", self.seed) != self.seed:
            raise InputError(f"protocol option seed={self.protocol_options['seed']} contradicts seed={self.seed}; "
                             "give one")
        return self

    def lesion_rule(self) -> Any:
        """The :class:`~napari_medsam_eval.evaluation.lesions.LesionRule` of :attr:`lesions` (an unknown
        option or a bad value refused, naming it)."""
        from ..evaluation.lesions import LesionRule

        try:
            return LesionRule(**(self.lesions or {}))
        except TypeError as error:
            raise InputError(f"lesions: {error}; its options are match, threshold, small_ml, large_ml") from None

    def selected(self, refs: list[Any]) -> list[Any]:
        """The case references this run takes of ``refs`` (each with a ``case_id``, in the layout's order):
        those of :attr:`cases`, then the first :attr:`limit`; an OptionError naming a case the dataset does not
        list (and a few it does)."""
        if self.cases is not None:
            listed = {ref.case_id for ref in refs}
            missing = [c for c in self.cases if c not in listed]
            if missing:
                some = ", ".join(ref.case_id for ref in refs[:5]) + (", ..." if len(refs) > 5 else "")
                raise OptionError(f"cases: the dataset lists no case {', '.join(map(repr, missing))} "
                                  f"({len(refs)} cases: {some})")
            wanted = set(self.cases)
            refs = [ref for ref in refs if ref.case_id in wanted]
        return refs[:self.limit] if self.limit else refs

    def __repr__(self) -> str:
        """``RunConfig(hippocampus_mri -> runs/hippo, model=box, protocol=medsam2, limit=2)``: the dataset's and
        run folder's names, model, protocol and every option that differs from its default (:meth:`details`
        lists them all)."""
        from ..core.reprs import one_line

        named = {"model": self.model, "protocol": self.protocol}
        for item in fields(self):
            if item.name in ("dataset", "out_dir", "model", "protocol", "precision", "tolerance_mm"):
                continue
            value = getattr(self, item.name)
            default = item.default_factory() if item.default_factory is not MISSING else item.default
            if value != default:
                named[item.name] = _short(value)
        return one_line("RunConfig", [f"{self.dataset.name} -> {self.out_dir}"], named)

    def details(self) -> str:
        """Every field, one a line (``name: value``): what :meth:`__repr__` leaves out."""
        return "\n".join(f"{item.name}: {getattr(self, item.name)!r}" for item in fields(self))

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython: the one line, not the dataclass's
        printer.text(repr(self))

    def resolved(self, layout: str, protocol: Any) -> "RunConfig":
        """The config as the run records it: the layout found, the protocol's name and all its options."""
        return self.replace(layout=layout, protocol=protocol.name, protocol_options=protocol.options())

    def to_manifest(self) -> dict[str, Any]:
        """The manifest's ``config`` entry (JSON values)."""
        recorded: dict[str, Any] = {}
        for item in fields(self):
            name, value = item.name, getattr(self, item.name)
            if name in _NOT_RECORDED or (name in _RECORDED_WHEN_SET and value == _RECORDED_WHEN_SET[name]
                                         and self.executor == "local") or (name in _RECORDED_WHEN_TRUE and not value):
                continue
            if name in _RECORDED_WHEN_CHANGED and value == _RECORDED_WHEN_CHANGED[name]:
                continue
            recorded[_MANIFEST_NAMES.get(name, name)] = str(Path(value).resolve()) if name == "dataset" else value
        return recorded

    @classmethod
    def from_manifest(cls, config: dict[str, Any], out_dir: str | Path) -> "RunConfig":
        """The config a manifest's ``config`` entry records (its run folder ``out_dir``)."""
        names = {_MANIFEST_NAMES.get(item.name, item.name): item.name for item in fields(cls)}
        values = {names[key]: value for key, value in {**RESUME_DEFAULTS, **config}.items() if key in names}
        return cls(out_dir=Path(out_dir), **values)

    def differences(self, other: "RunConfig | dict[str, Any]") -> list[str]:
        """``"key: before -> now"`` for every :data:`RESUME_KEYS` entry where ``other`` (the earlier run,
        or its manifest ``config``) differs from this config."""
        return config_differences(other.to_manifest() if isinstance(other, RunConfig) else other,
                                  self.to_manifest())


def config_differences(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """``"key: before -> now"`` for every :data:`RESUME_KEYS` entry where two manifest ``config`` entries differ."""
    before, now = {**RESUME_DEFAULTS, **before}, {**RESUME_DEFAULTS, **now}
    return [f"{key}: {_shown(before.get(key))} -> {_shown(now.get(key))}"
            for key in RESUME_KEYS if _normalised(before.get(key)) != _normalised(now.get(key))]


def _short(value: Any) -> str:
    """A field's value in a repr: a tuple or list as its items joined, the rest as ``repr``."""
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value) if isinstance(value, (str, Path)) else repr(value)


def _normalised(value: Any) -> Any:
    """JSON round trip, so tuples and lists (and Paths and strings) compare equal."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _shown(value: Any) -> str:
    value = _normalised(value)
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


__all__ = ["RESUME_DEFAULTS", "RESUME_KEYS", "RunConfig", "config_differences"]
