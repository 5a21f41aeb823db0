"""The public Python API: the few names a script or a notebook uses, documented on the site's "From Python" page.

Every name here is stable until its change is named in the CHANGELOG (``tests/test_public_api.py`` locks
each one's signature); everything else in the package is internal. Importing this module loads nothing
heavy (no numpy, torch, napari or Qt): each function imports what it needs when called, and the classes
(:class:`Prompt`, :class:`Session`, :class:`RunConfig`, :class:`Target`, and the types the functions return:
:class:`Case`, :class:`Spacing`, :class:`PropagationResult`, :class:`SegmentResult`,
:class:`SegmentationBackend`) are imported on first use (PEP 562). ``dir(api)`` lists the public names only.

>>> from napari_medsam_eval import api
>>> case = api.read_case("sample_data/phantom_ct/image.nii.gz", "sample_data/phantom_ct/label.nii.gz")
>>> session = api.open_session(case, "litemedsam")
>>> prompt = api.protocol_prompts(case, "medsam2", target_labels=[2])[0]
>>> result = session.propagate(prompt)
>>> api.score_pair(result, case=case).dice          # the truth of the prompt's target, the case's spacing
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
    from .evaluation.pair_scores import PairScores
    from .models.base import SegmentationBackend, SegmentResult
    from .propagation.segment import PropagationResult
    from .session.session import Session

__all__ = [
    "Case",
    "PairScores",
    "Prompt",
    "PropagationResult",
    "RunConfig",
    "SegmentResult",
    "SegmentationBackend",
    "Session",
    "Spacing",
    "Target",
    "build_model",
    "explain_run",
    "lesion_table",
    "load_table",
    "match_lesions",
    "open_session",
    "protocol_prompts",
    "read_case",
    "report",
    "run_benchmark",
    "score_pair",
    "write_mask",
]

#: the classes, each from the module that defines it, imported on first use
_CLASSES: dict[str, str] = {
    "Prompt": "napari_medsam_eval.core.prompt",
    "Session": "napari_medsam_eval.session.session",
    "RunConfig": "napari_medsam_eval.benchmark.config",
    "Target": "napari_medsam_eval.core.targets",
    "Case": "napari_medsam_eval.core.case",
    "Spacing": "napari_medsam_eval.core.case",
    "PropagationResult": "napari_medsam_eval.propagation.segment",
    "SegmentResult": "napari_medsam_eval.models.base",
    "SegmentationBackend": "napari_medsam_eval.models.base",
    "PairScores": "napari_medsam_eval.evaluation.pair_scores",
}


def __getattr__(name: str) -> Any:
    module = _CLASSES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    """The public names only (``dir(api)``, a notebook's completion): not the imports this module uses."""
    return sorted(__all__)


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
    A label ``source`` does not hold is refused (an ``InputError`` saying which labels it holds).
    A hand-made prompt is a :class:`Prompt`.

    Example::

        [box] = protocol_prompts(case, "medsam2", target_labels=[2])
        modes = protocol_prompts(case, "mazurowski", target_labels=[2], slices="key")  # 5 prompts
        [liver] = protocol_prompts(case, "medsam2", targets=["liver=1,3"])  # the liver with its tumour
    """
    from .core.targets import parse_targets
    from .protocols import build_protocol
    from .protocols.base import check_labels_held

    check_labels_held(source, target_labels)
    return build_protocol(protocol, **options).prompts(
        source, kind=kind, target_labels=target_labels, targets=parse_targets(targets) if targets is not None else None)


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


def score_pair(pred: np.ndarray, gt: np.ndarray | None = None, kind: str | None = None,
               spacing: Spacing | Sequence[float] | None = None, *, case: Case | None = None,
               target: Target | str | int | None = None, tolerance_mm: float | None = None,
               prompt_slice: int | None = None, convention: str = "medsam-eval") -> PairScores:
    """Score a binary prediction against its truth: the one scorer ``medsam-eval score`` and ``run`` use.

    The truth of a target: ``score_pair(pred, case=case, target=prompt.target)`` takes the target's mask of
    ``case.label`` (every label it unites: ``"liver=1,3"``, a :class:`Target`, or a label value) and the case's
    kind and spacing; ``pred`` may be a result (``session.propagate(prompt)``: its mask, and its prompt's target
    when ``target`` is not given). Or a bare truth: ``score_pair(pred, gt, kind, spacing)`` (``gt`` a binary
    mask; or a label map with ``target=``). A region's ``prompt.target_label`` is a key, not a label of the
    case: ``case.label == prompt.target_label`` is empty, and an empty truth under a non-empty prediction
    gives an ``EmptyTruthWarning`` naming the target and the labels the case holds.

    Gives a :class:`PairScores` (fields, ``.to_dict()``, ``.target``, a one-line repr; ``scores["dice"]`` works
    too): ``dice``, ``iou``, ``nsd`` (at ``tolerance_mm``, default 2 mm), ``hd95``, both voxel counts (ints), and
    why it missed: the error split into parts adding up to ``1 - dice`` (``error_leak``, ``error_missed_slices``,
    ``error_off_target``, ``error_over``, ``error_under``), the ``dominant_error`` and its ``error_slices`` (a
    dict: each part's slice ranges); ``prompt_slice_dice`` when ``prompt_slice`` is given (else NaN).
    ``convention`` computes DSC, IoU, NSD and HD95 as ``medsam-eval`` (the default), ``monai`` or ``cvpr25``
    do (``score --metrics-convention``; images and volumes). ``spacing`` is a case's ``spacing`` (a ``Spacing``,
    which says its axis order; a video's frame ``y, x`` are taken from a case's), or a bare sequence only when
    its values are equal. Refused with an ``InputError`` (a ``MedsamEvalError`` and a ``ValueError``), as the
    CLI refuses them in files: NaN or infinite values, values other than 0 and 1 (a label map: give a target),
    masks of two shapes, a bare spacing of unequal values (its order is unknown); kind and spacing swapped with
    an ``InputTypeError``.

    Example::

        [prompt] = protocol_prompts(case, "medsam2", targets=["liver=1,3"])
        scores = score_pair(session.propagate(prompt), case=case)      # the liver's labels 1 and 3
        scores = score_pair(result.mask, case=case, target=2, prompt_slice=22, convention="monai")
        scores.dice, scores.target, scores.dominant_error, scores.error_slices    # or scores["dice"]
    """
    from .evaluation.pair_scores import score_truth

    return score_truth(pred, gt, kind, spacing, case=case, target=target, tolerance_mm=tolerance_mm,
                       prompt_slice=prompt_slice, convention=convention)


def match_lesions(pred: np.ndarray, gt: np.ndarray, kind: str, spacing: Spacing | Sequence[float], *,
                  match: str = "iou", threshold: float = 0.5, small_ml: float = 1.0,
                  large_ml: float = 10.0, instances: bool = False) -> LesionResult:
    """Lesion by lesion: the connected components of a binary prediction and truth, matched one to one where
    their IoU is above ``threshold`` (``match="iou"``, Panoptica's and Metrics Reloaded's rule) or wherever they
    touch (``"overlap"``, BraTS 2023's and autoPET's). The result has ``found``, ``missed``,
    ``false_positives``, ``f1``, ``mean_dice``, ``recall_by_size()`` (small below ``small_ml`` mL, large from
    ``large_ml``: volumes only) and ``lesions`` (each with its status, voxels, mL, size, DSC and slices).

    ``instances=True``: two instance maps (each value one lesion, touching ones apart); ``details()``: each lesion.
    Example::

        result = match_lesions(pred, case.label == 1, case.kind, case.spacing)
        result.found, result.missed, result.false_positives, result.f1
    """
    from .evaluation.lesions import LesionRule, match_lesions as match_components
    from .evaluation.metrics import array_spacing, binary_mask
    from .evaluation.surface_distance import as_mask_pair

    if not instances:
        pred, gt = as_mask_pair(binary_mask(pred, "prediction"), binary_mask(gt, "ground truth"))
    values = array_spacing(spacing, kind, __import__("numpy").ndim(pred))
    return match_components(pred, gt, values, kind, LesionRule(match, threshold, small_ml, large_ml),
                            instances=instances)


def run_benchmark(config: RunConfig, *, progress: Callable[[int, int, list], Any] | bool | None = None,
                  cancel: threading.Event | None = None) -> pd.DataFrame:
    """Run a benchmark as ``medsam-eval run`` does: every case of ``config.dataset`` segmented by
    ``config.model`` from ``config.protocol``'s prompts, into the run folder ``config.out_dir``.
    Returns its table (one row per case and target) as :func:`load_table` gives it. ``progress=True`` draws a
    progress bar (tqdm's: a widget in a notebook); a callback ``progress(done, total, rows)`` is called before
    the first case and after each; returning False stops the run; so does setting ``cancel``.

    Example::

        config = RunConfig("sample_data/phantom_2d", "runs/phantom", model="litemedsam", protocol="medsam2")
        table = run_benchmark(config, progress=True)       # or progress=lambda done, total, rows: ...
    """
    from .benchmark.parsed_table import parsed_table
    from .benchmark.runner import run_benchmark as run
    from .core.progress import progress_callback

    callback, bar = progress_callback(progress, "cases", "case")
    try:
        return parsed_table(run(config, progress=callback, cancel=cancel))
    finally:
        if bar is not None:
            bar.close()


def explain_run(run: str | Path, *, cases: Sequence[str] | None = None, limit: int | None = None,
                save_masks: bool | None = None, progress: Callable[[int, int, str], Any] | bool | None = None,
                cancel: threading.Event | None = None) -> pd.DataFrame:
    """What would fix each result of a finished run, as ``medsam-eval explain`` does: every scored result
    segmented again by the run's model and prompts with one stage made perfect (``oracle_extent``: the
    true first and last slice, no stop rule; ``oracle_prompt_slice``: the prompt on the object's largest
    slice; ``oracle_box``: the true box on every slice, the model's ceiling). Returns ``explain.csv``'s table
    (one row per case and target: ``dice_run``, and per variant ``dice_<variant>``, ``gain_<variant>``,
    ``dominant_<variant>``, ``parts_<variant>``, ``note_<variant>`` where it does not apply,
    ``mask_<variant>`` when masks are saved: by default when the run saved its predictions). Resumable:
    a result explained before is not run again. ``progress=True`` draws a progress bar (tqdm's); a callback
    ``progress(done, total, case_id)`` returning False stops after the case running, as ``cancel`` does.

    Example::

        table = explain_run("runs/hippocampus", limit=2, progress=True)
        table.groupby("task")[["dice_run", "dice_oracle_extent", "dice_oracle_box"]].median()
    """
    from .benchmark.explain import explain_run as explain
    from .core.progress import progress_callback

    callback, bar = progress_callback(progress, "explaining", "case")
    try:
        return explain(run, cases=list(cases) if cases is not None else None, limit=limit, save_masks=save_masks,
                       progress=callback, cancel=cancel)
    finally:
        if bar is not None:
            bar.close()


def load_table(run: str | Path, lenient: bool = False, *, parsed: bool = True,
               columns: str | Sequence[str] = "all") -> pd.DataFrame:
    """The typed table of a run folder (or of one results file), one row per case and target, each column of
    the run schema with its dtype (the From Python page lists them): numbers ``float64``, counts nullable
    ``Int64``; with ``parsed`` (the default) the columns the folder stores as JSON text are Python objects:
    ``slice_dice`` (and ``slice_scores``, ``dice_after``, ``nsd_after``, ``sens_dice``) a float array per row,
    NaN where both masks are empty; ``prompt``, ``stops``, ``notes``, ``lesions`` lists; ``attributes`` and
    ``error_slices`` dicts; and a ``target`` column of each row's :class:`Target`. ``parsed=False`` keeps the
    text, as the run folder stores it. ``lenient`` skips (and counts) rows that fail the checks instead of
    refusing the table. ``columns``: ``"all"`` (the default: every column of the schema), ``"core"`` (who, what
    and the scores, and every other column some row fills: a plain run's 76 columns come down to 38), or
    a list of column names.

    Example::

        table = load_table("runs/phantom", columns="core")
        table.groupby("label_name")["dice"].describe()
        plt.plot(table.loc[0, "slice_dice"])        # the first row's DSC per slice, NaN off the object
    """
    from .benchmark.parsed_table import chosen_columns, parsed_table
    from .benchmark.store import load_table as load

    table = load(run, lenient)
    return chosen_columns(parsed_table(table) if parsed else table, columns)


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

    return table_of(load_table(run, lenient, parsed=False))


def write_mask(case: Case, mask: np.ndarray, path: str | Path, *, label_value: int = 1,
               overwrite: bool = False, names: dict[int, str] | None = None, model: str = "medsam-eval",
               protocol: str | None = None) -> Path:
    """Write ``mask`` (a bool mask of ``case``'s spatial shape, or an integer label map) to ``path`` with the
    case's geometry (spacing, origin, direction: a mask that lies on its image in any viewer), as
    ``medsam-eval segment --out`` writes it: NIfTI (``.nii.gz``, ``.nii``), NRRD, MetaImage (``.mha``,
    ``.mhd``), a MedSAM ``.npz`` (``segs`` with ``spacing``, ``origin``, ``direction``), a 2D image's PNG,
    or a DICOM SEG (``.dcm``, a case read from a DICOM series only: a segment per label value, named by
    ``names`` or the case's label names, ``model`` and ``protocol`` recorded as its algorithm).
    A bool mask is written as ``label_value``. The file is read back and checked before it replaces anything;
    a file medsam-eval did not write (or that changed since) is not replaced unless ``overwrite``, nor is the
    case's own image or label, nor a file inside a dataset folder. Returns the path.

    Example::

        write_mask(case, result.mask, "kidney_mask.nii.gz")
        api.read_case("kidney_mask.nii.gz").spacing == case.spacing     # True: the geometry went with it
        write_mask(dicom_case, result.mask, "kidney.dcm", names={1: "kidney"}, model="litemedsam")  # a DICOM SEG
    """
    import numpy

    from .core.errors import DataError, InputError
    from .core.ledger import record_written
    from .core.ownership import check_may_write
    from .datasets.dataset_roots import dataset_holding
    from .io import write_mask as write

    try:
        check_may_write(path, overwrite=overwrite, option="write_mask's path", dataset=dataset_holding(path))
    except DataError as error:
        raise DataError(error.problem.replace("--overwrite", "overwrite=True"), error.path) from None
    labels = numpy.asarray(mask)
    if labels.dtype == bool:
        if isinstance(label_value, bool) or not 0 < int(label_value) < 2**31:
            raise InputError(f"label_value must be a whole number from 1, got {label_value!r}")
        labels = labels.astype(numpy.uint8 if label_value < 256 else numpy.int32)
        labels *= int(label_value)  # in place: one copy
    written = write(labels, path, case, names=names, model=model, protocol=protocol)
    record_written(written.parent, [written.name])  # ours now: writing it again needs no overwrite
    return written


def report(run: str | Path, *, out_dir: str | Path | None = None, worst_k: int = 5,
           attributes: Sequence[str] | None = None, lenient: bool = False, overwrite: bool = False) -> Path:
    """Write a run folder's report, as ``medsam-eval report`` (and the end of ``medsam-eval run``) writes it:
    ``report.md``, ``report.html``, ``task_summary.csv`` and ``figures/`` in the run folder (or ``out_dir``).
    ``worst_k`` worst cases per task are shown; ``attributes`` split the task table (default: every case
    attribute with 2-8 values); ``lenient`` skips bad rows rather than refusing the table; ``overwrite``
    replaces report files in ``out_dir`` that medsam-eval did not write. Returns the path of ``report.md``.

    Example::

        table = run_benchmark(config, progress=True)
        path = report(config.out_dir)            # runs/phantom/report.md, with report.html beside it
    """
    from .report import write_report

    return write_report(run, worst_k=worst_k, attributes=attributes, out_dir=out_dir, lenient=lenient,
                        overwrite=overwrite)
