"""The public Python API: the few names a script or a notebook uses, documented on the site's "From Python" page.

Every name here is stable until its change is named in the CHANGELOG (``tests/test_public_api.py`` locks
each one's signature); everything else in the package is internal. Importing this module loads nothing
heavy (no numpy, torch, napari or Qt): each function imports what it needs when called, and the classes
(:class:`Prompt`, :class:`Session`, :class:`RunConfig`) are imported on first use (PEP 562).

>>> from napari_medsam_eval import api
>>> case = api.read_case("sample_data/phantom_ct/image.nii.gz", "sample_data/phantom_ct/label.nii.gz")
>>> session = api.open_session(case, "litemedsam")
>>> prompt = api.protocol_prompts(case, "medsam2", target_labels=[2])[0]
>>> result = session.propagate(prompt)
>>> api.score_pair(result.mask, case.label == 2, case.kind, case.spacing)["dice"]
"""
from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:  # for the annotations only: nothing heavy is imported at run time
    import threading

    import numpy as np
    import pandas as pd

    from .benchmark.config import RunConfig
    from .core.case import Case, Spacing
    from .core.prompt import Prompt
    from .core.targets import Target
    from .evaluation.lesions import LesionResult
    from .models.base import SegmentationBackend
    from .session.session import Session

__all__ = [
    "Prompt",
    "RunConfig",
    "Session",
    "Target",
    "build_model",
    "lesion_table",
    "load_table",
    "match_lesions",
    "open_session",
    "protocol_prompts",
    "read_case",
    "run_benchmark",
    "score_pair",
]

#: the classes, each from the module that defines it, imported on first use
_CLASSES: dict[str, str] = {
    "Prompt": "napari_medsam_eval.core.prompt",
    "Session": "napari_medsam_eval.session.session",
    "RunConfig": "napari_medsam_eval.benchmark.config",
    "Target": "napari_medsam_eval.core.targets",
}


def __getattr__(name: str) -> Any:
    module = _CLASSES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def read_case(image_path: str | Path, label_path: str | Path | None = None, *, kind: str | None = None,
              modality: str | None = None, case_id: str | None = None) -> Case:
    """Read an image and, if given, its label map into one validated ``Case``, in any format ``medsam-eval info``
    and ``segment`` read: NIfTI/NRRD/MetaImage, a DICOM series folder, a MedSAM npz (its ``gts`` are the label
    unless ``label_path`` replaces them), PNG/JPEG/TIFF, a frame folder or a video file.

    ``kind`` (``"volume"``, ``"video"``, ``"image"``) overrides the guessed kind where the data allow it.
    The case has ``image``, ``label``, ``spacing``, ``kind``, ``case_id``, ``modality`` and ``metadata``.

    Example::

        case = read_case("sample_data/phantom_ct/image.nii.gz", "sample_data/phantom_ct/label.nii.gz")
        case.kind, case.image.shape, case.spacing.values    # "volume", (Z, Y, X), (z, y, x) in mm
    """
    from .io.reader import read_case as read

    return read(image_path, label_path, kind=kind, modality=modality, case_id=case_id)


def build_model(name: str = "litemedsam", **options: Any) -> SegmentationBackend:
    """Build the model registered as ``name``: ``litemedsam`` (the default; CPU, shipped weights), ``medsam2``,
    ``sam2``, ``sam``, or the baselines ``box`` and ``oracle``. ``options`` go to its builder (``checkpoint``,
    ``device``, ``precision``, ...); one it does not take is refused before the (slow) build.

    Example::

        model = build_model("litemedsam", device="cpu")
        baseline = build_model("box")          # the prompt box itself, filled: no network
    """
    from .models import build_backend

    return build_backend(name, **options)


def protocol_prompts(source: Case | np.ndarray, protocol: str = "medsam2", *,
                     target_labels: Sequence[int] | None = None, kind: str | None = None,
                     targets: Sequence[Target | str] | None = None, **options: Any) -> list[Prompt]:
    """Prompts made from ground truth by a named, seeded protocol, as ``medsam-eval run --protocol`` makes them.

    ``source`` is a ``Case`` (its ``label``) or a label map (``kind`` then says what it is). ``protocol``:
    ``medsam2`` (a tight box on each target's middle slice / first frame), ``litemedsam-3dbox``,
    ``mazurowski`` (modes 1-5 of Mazurowski et al. 2023: one prompt per mode; ``modes=[...]``,
    ``slices="key"`` for one slice of a volume), ``iterative-points``, ``box-jitter``. ``options`` are the
    protocol's (``seed``, ``margin``, ...). ``target_labels`` default to every label present; ``targets``
    replace them with :class:`Target` objects or their text (``"liver=1,3"``: a region uniting labels,
    ``"lesion=1:lesions"``: one prompt per lesion), each prompt's ``target_label`` the target's ``key``.
    A hand-made prompt is a :class:`Prompt`.

    Example::

        [box] = protocol_prompts(case, "medsam2", target_labels=[2])
        modes = protocol_prompts(case, "mazurowski", target_labels=[2], slices="key")  # 5 prompts
        [liver] = protocol_prompts(case, "medsam2", targets=["liver=1,3"])  # the liver with its tumour
    """
    from .core.targets import parse_targets
    from .protocols import build_protocol

    return build_protocol(protocol, **options).prompts(
        source, kind=kind, target_labels=None if target_labels is None else [int(v) for v in target_labels],
        targets=parse_targets(targets) if targets is not None else None)


def open_session(case: Case, model: SegmentationBackend | str = "litemedsam", **model_options: Any) -> Session:
    """A :class:`Session` holding ``model`` (a built model, or a name for :func:`build_model` with
    ``model_options``) and ``case``'s image, prepared for it: segment a slice, propagate, correct.

    ``session.segment_slice(prompt)`` segments the prompt's slice (its ``.mask``, ``(H, W)``);
    ``session.propagate(prompt, progress=...)`` the whole volume (both ways) or video (forward);
    ``session.correct(prompt)`` adds a prompt on a wrong slice and propagates from it to the neighbouring
    prompts (the napari Segment widget's "Correct slice"); ``session.anchors(label)`` lists the prompts.

    Example::

        session = open_session(case, "litemedsam", device="cpu")
        result = session.propagate(prompt)           # result.mask: (Z, Y, X) bool
        fixed = session.correct(Prompt(target_label=2, slice_index=30, boxes=[(60, 50, 75, 68)]))
    """
    from .session.session import Session

    backend = build_model(model, **model_options) if isinstance(model, str) else model
    session = Session(backend)
    session.set_image(case.image, kind=case.kind, modality=case.modality, image_id=case.case_id,
                      rgb=case.image.ndim == (3 if case.kind == "image" else 4))
    return session


def score_pair(pred: np.ndarray, gt: np.ndarray, kind: str, spacing: Spacing | Sequence[float], *,
               tolerance_mm: float | None = None, prompt_slice: int | None = None) -> dict[str, float | str]:
    """Score a binary prediction against a binary truth: the one scorer ``medsam-eval score`` and ``run`` use.

    Gives ``dice``, ``iou``, ``nsd`` (at ``tolerance_mm``, default 2 mm), ``hd95``, both voxel counts, and why
    it missed: the error split into parts adding up to ``1 - dice`` (``error_leak``, ``error_missed_slices``,
    ``error_off_target``, ``error_over``, ``error_under``), the ``dominant_error`` and its ``error_slices``;
    ``prompt_slice_dice`` when ``prompt_slice`` is given. ``spacing`` is a case's ``spacing`` (a ``Spacing``, which
    says its axis order; a video's frame ``y, x`` are taken from a case's), or a bare sequence only when its
    values are equal. Refused with an ``InputError`` (a ``MedsamEvalError`` and a ``ValueError``), as the CLI
    refuses them in files: NaN or infinite values, values other than 0 and 1 (a label map: take one target),
    masks of two shapes, a bare spacing of unequal values (its order is unknown).

    Example::

        scores = score_pair(result.mask, case.label == 2, case.kind, case.spacing, prompt_slice=22)
        scores["dice"], scores["dominant_error"]
    """
    from .evaluation.metrics import array_spacing, binary_mask, score_pair as score
    from .evaluation.surface_distance import LITEMEDSAM_NSD_TOLERANCE_MM, as_mask_pair

    pred, gt = as_mask_pair(binary_mask(pred, "prediction"), binary_mask(gt, "ground truth"))
    values = array_spacing(spacing, kind, pred.ndim)
    tolerance = LITEMEDSAM_NSD_TOLERANCE_MM if tolerance_mm is None else tolerance_mm
    return score(pred, gt, kind, values, tolerance, prompt_slice)


def match_lesions(pred: np.ndarray, gt: np.ndarray, kind: str, spacing: Spacing | Sequence[float], *,
                  match: str = "iou", threshold: float = 0.5, small_ml: float = 1.0,
                  large_ml: float = 10.0) -> LesionResult:
    """Lesion by lesion: the connected components of a binary prediction and truth, matched one to one where
    their IoU is above ``threshold`` (``match="iou"``, Panoptica's and Metrics Reloaded's rule) or wherever they
    touch (``"overlap"``, BraTS 2023's and autoPET's). The result has ``found``, ``missed``,
    ``false_positives``, ``f1``, ``mean_dice``, ``recall_by_size()`` (small below ``small_ml`` mL, large from
    ``large_ml``: volumes only) and ``lesions`` (each with its status, voxels, mL, size, DSC and slices).

    Example::

        result = match_lesions(pred, case.label == 1, case.kind, case.spacing)
        result.found, result.missed, result.false_positives, result.f1
    """
    from .evaluation.lesions import LesionRule, match_lesions as match_components
    from .evaluation.metrics import array_spacing, binary_mask
    from .evaluation.surface_distance import as_mask_pair

    pred, gt = as_mask_pair(binary_mask(pred, "prediction"), binary_mask(gt, "ground truth"))
    values = array_spacing(spacing, kind, pred.ndim)
    return match_components(pred, gt, values, kind, LesionRule(match, threshold, small_ml, large_ml))


def run_benchmark(config: RunConfig, *, progress: Callable[[int, int, list], Any] | None = None,
                  cancel: threading.Event | None = None) -> pd.DataFrame:
    """Run a benchmark as ``medsam-eval run`` does: every case of ``config.dataset`` segmented by
    ``config.model`` from ``config.protocol``'s prompts, into the run folder ``config.out_dir``.
    Returns its table (one row per case and target). ``progress(done, total, rows)`` is called before the
    first case and after each; returning False stops the run; so does setting ``cancel``.

    Example::

        config = RunConfig("sample_data/phantom_2d", "runs/phantom", model="litemedsam", protocol="medsam2")
        table = run_benchmark(config, progress=lambda done, total, rows: print(f"{done}/{total}"))
    """
    from .benchmark.runner import run_benchmark as run

    return run(config, progress=progress, cancel=cancel)


def load_table(run: str | Path, lenient: bool = False) -> pd.DataFrame:
    """The typed table of a run folder (or of one results file), each column of the run schema with its dtype;
    ``lenient`` skips (and counts) rows that fail the checks instead of refusing the table.

    Example::

        table = load_table("runs/phantom")
        table.groupby("target_label")["dice"].describe()
    """
    from .benchmark.store import load_table as load

    return load(run, lenient)


def lesion_table(run: str | Path, lenient: bool = False) -> pd.DataFrame:
    """Every lesion of a run's lesion-by-lesion targets (``run --targets "NAME=V:lesions"``), one row each: the
    row's case, task and target, then ``source`` (true or predicted), ``number``, ``status`` (found, missed,
    matched, false positive), ``voxels``, ``volume_ml``, ``size``, ``dice``, ``iou`` and its slices; the run
    folder's ``lesions.csv``.

    Example::

        lesions = lesion_table("runs/deeplesion")
        lesions[lesions["status"] == "missed"].groupby("size").size()
    """
    from .benchmark.lesion_table import lesion_table as table_of

    return table_of(load_table(run, lenient))
