"""One case x its targets -> result rows: load, prepare, prompt, segment, score.

Every failure becomes a ``failed`` row with its reason, never an exception
out of :meth:`CaseEvaluator.evaluate` (KeyboardInterrupt aside, and a cancel:
a ``progress`` callback answering False stops the case after its current
slice with :class:`~napari_medsam_eval.core.errors.Cancelled`, and the case gives
no row at all, so a resumed run does it again):

* the case cannot be read -> one failed row per target the dataset names
  (MSD's dataset.json, CAMUS, SUN-SEG), or a single row with
  ``target_label`` None and ``label_name`` ``"unknown"`` when it names none;
* the ground truth holds no foreground and the dataset names no target ->
  one ``empty_gt`` row saying so; a named target absent from this case ->
  an ``empty_gt`` row (not scored, counted apart);
* prompting, segmenting or scoring one target fails -> that target's row
  fails, the other targets go on.

Segmentation per kind (the MedSAM2 evaluation, ``docs/protocols.md``):
every kind is prepared by :func:`napari_medsam_eval.core.intensity.prepare_image`
(volumes by modality) and segmented by :func:`~napari_medsam_eval.propagation.segment_by_kind`
(volumes propagated both ways from the prompt slice with the run's propagation rules), or with the
official LiteMedSAM 3D-box loop for protocol ``litemedsam-3dbox`` (all targets of
a case in one run, as the official script does: :meth:`CaseEvaluator._official_joint`); videos are
used as they are and propagated forward from the prompt frame; a 2D image is
one ``segment`` call.
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..core.case import Case
from ..core.checksum import sha256_file
from ..datasets import CaseRef, DatasetLayout, label_name, task_name
from ..core.errors import Cancelled
from ..io import write_mask
from ..models.base import SegmentationBackend
from ..core.progress import SliceProgress
from ..core.prompt import Prompt, prompts_to_json
from ..core.intensity import case_intensity, prepare_image
from ..propagation import PropagationRecord, PropagationResult, official_result, segment_by_kind, segment_official
from ..evaluation.interaction_effort import noc_columns
from ..protocols import PromptProtocol
from ..protocols.corrections import CorrectionsProtocol
from ..studies.corrections import run_corrections
from ..studies.sensitivity import Perturbation, perturbed_prompts, sensitivity, volume_segmenter
from .config import RunConfig
from .schema import NAN, STATUS_EMPTY_GT, STATUS_FAILED, STATUS_OK, json_dumps
from ..evaluation.scoring import result_notes, score_target
from .case_progress import StepProgress, target_progress
from .timing import SegmentTimer, with_rest

PREDICTIONS_DIR = "predictions"
#: how a row's error starts when its prediction could not be written (the runner stops: the disk is full, ...)
UNSAVED_PREFIX = "prediction not saved"
OFFICIAL_3D_PROTOCOL = "litemedsam-3dbox"


def error_text(error: BaseException) -> str:
    """``"<Type>: <message>"``, one line."""
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def safe_file_stem(case_id: str) -> str:
    """A case id usable as a file name (``/`` and odd characters -> ``_``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", case_id).strip("._") or "case"


def prediction_suffix(case: Case) -> str:
    """``.npz`` beside an npz source, ``.png`` for 2D images, else ``.nii.gz``."""
    if case.kind == "image":
        return ".png"
    source = str(case.metadata.get("image_path", ""))
    return ".npz" if source.lower().endswith(".npz") else ".nii.gz"


def propagation_columns(record: PropagationRecord, n_slices: int) -> dict[str, str]:
    """The ``stops`` and ``slice_scores`` columns of a row."""
    scores = [None] * max(n_slices, 0)
    for z, value in record.to_dict()["scores"].items():
        if 0 <= z < len(scores):
            scores[z] = value
    return {"stops": json_dumps([s.to_dict() for s in record.stops]), "slice_scores": json_dumps(scores)}


def base_row(ref: CaseRef, kind: str, config: RunConfig) -> dict[str, Any]:
    """The columns every row of ``ref`` shares."""
    return {
        "case_id": ref.case_id, "dataset": ref.dataset, "kind": kind, "model": config.model,
        "precision": config.precision,
        "protocol": config.protocol, "status": STATUS_OK, "error": "",
        "nsd_tolerance_mm": float(config.tolerance_mm), "attributes": json_dumps(ref.attributes),
        "seed": int(config.seed), "prediction_path": "",
    }


def target_row(base: dict[str, Any], value: int | None, names: dict[int, str]) -> dict[str, Any]:
    """``base`` with the target columns; ``value`` None = a case-level row (``"unknown"``)."""
    name = "unknown" if value is None else label_name(names, value)
    return {**base, "target_label": value, "label_name": name, "task": task_name(base["dataset"], name)}


def empty_gt_row(row: dict[str, Any], why: str) -> dict[str, Any]:
    """A row with nothing to score: the ground truth holds no voxel of its target."""
    return {**row, "status": STATUS_EMPTY_GT, "error": why, "dice": NAN, "iou": NAN, "nsd": NAN, "hd95": NAN}


def fail_row(row: dict[str, Any], error: BaseException | str) -> dict[str, Any]:
    text = error if isinstance(error, str) else error_text(error)
    return {**row, "status": STATUS_FAILED, "error": text}


def failed_case_rows(ref: CaseRef, layout: DatasetLayout, config: RunConfig,
                     error: BaseException | str) -> list[dict[str, Any]]:
    """Rows of a case that failed before its labels were known: one per target the
    dataset names, else one ``"unknown"`` row."""
    names = layout.label_names(ref.root)
    base = base_row(ref, ref.kind, config)
    return [fail_row(target_row(base, v, names), error) for v in (sorted(names) or [None])]


class CaseEvaluator:
    """Turns one :class:`CaseRef` into its rows with a built backend and protocol."""

    def __init__(self, layout: DatasetLayout, backend: SegmentationBackend, protocol: PromptProtocol,
                 config: RunConfig) -> None:
        self.layout = layout
        self.backend = backend
        self.protocol = protocol
        self.config = config
        if protocol.sensitivity and (isinstance(protocol, CorrectionsProtocol) or protocol.name == OFFICIAL_3D_PROTOCOL):
            raise ValueError(f"protocol {protocol.name!r}: the sensitivity option perturbs one prompt and propagates "
                             "it; it is not available with the corrections or the official 3D box protocol")

    def evaluate(self, ref: CaseRef, progress: StepProgress | None = None) -> list[dict[str, Any]]:
        """All rows of one case (at least one).

        ``progress`` gets a :class:`~.case_progress.CaseStep` as each target starts and after each of its
        slices; when it answers False the case stops there and :class:`Cancelled` is raised (no rows).
        """
        base = base_row(ref, ref.kind, self.config)
        try:
            case = self.layout.load(ref)
        except Exception as error:  # noqa: BLE001 - any reader failure is this case's result
            return failed_case_rows(ref, self.layout, self.config, error)
        base.update(kind=case.kind, n_slices=case.n_slices())
        names = case.label_names
        try:
            targets = self.layout.targets(ref, case)
        except Exception as error:  # noqa: BLE001 - e.g. a label value the dataset does not declare
            return failed_case_rows(ref, self.layout, self.config, error)
        if not targets:
            return [empty_gt_row(target_row(base, None, names),
                                 "the ground truth holds no foreground label and the dataset names none")]
        rows = {v: target_row(base, v, names) for v in targets}
        try:
            prompts = self._prompts(case, targets)
            image = prepare_image(case.image, case.kind, case.modality,
                                  intensity=case_intensity(case.metadata, self.config.intensity))
        except Exception as error:  # noqa: BLE001
            return [fail_row(row, error) for row in rows.values()]
        predictions: dict[int, np.ndarray] = {}
        self.backend.clear_cache()
        if hasattr(self.backend, "set_ground_truth"):  # the oracle baseline answers from the label map
            self.backend.set_ground_truth(case.label)
        unit = "frame" if case.kind == "video" else "slice"

        def report(target: str, index: int, count: int) -> SliceProgress | None:
            return None if progress is None else target_progress(progress, ref.case_id, target, index, count, unit)
        try:
            try:
                joint = self._official_joint(case, image, prompts, targets, report("all targets", 0, 1))
            except Cancelled:
                raise
            except Exception as error:  # noqa: BLE001 - the joint run's failure is each of its targets'
                return [fail_row(row, error) for row in rows.values()]
            for index, value in enumerate(targets):
                rows[value] = self._evaluate_target(case, image, prompts[value], rows[value], predictions,
                                                    joint.get(value),
                                                    report(rows[value]["label_name"], index, len(targets)))
        finally:
            self.backend.clear_cache()
            if hasattr(self.backend, "set_ground_truth"):
                self.backend.set_ground_truth(None)
        if self.config.save_predictions:
            self._save(case, ref, predictions, rows)
        return [rows[v] for v in targets]

    def _prompts(self, case: Case, targets: list[int]) -> dict[int, Prompt]:
        prompts = self.protocol.prompts(case, target_labels=targets)
        by_target: dict[int, list[Prompt]] = {}
        for prompt in prompts:
            by_target.setdefault(int(prompt.target_label), []).append(prompt)
        several = {v: len(p) for v, p in by_target.items() if len(p) != 1}
        missing = [v for v in targets if v not in by_target]
        if several or missing:
            raise ValueError(f"protocol {self.protocol.name!r} must give one prompt per target for the benchmark "
                             f"runner; got counts {several or {v: 0 for v in missing}} (choose one mode/option)")
        return {v: p[0] for v, p in by_target.items()}

    def _official_joint(self, case: Case, image: np.ndarray, prompts: dict[int, Prompt], targets: list[int],
                        progress: SliceProgress | None = None,
                        ) -> dict[int, tuple[PropagationResult, dict[str, float]]]:
        """Protocol ``litemedsam-3dbox`` on a volume: every target's box in one official run, in label
        order, as the official script runs a case (:func:`~napari_medsam_eval.propagation.segment_official`).
        The run's time is shared equally by its targets' rows."""
        if self.protocol.name != OFFICIAL_3D_PROTOCOL or case.kind != "volume":
            return {}
        joint = [v for v in targets
                 if not prompts[v].is_empty and not prompts[v].info.get("empty") and "box_3d" in prompts[v].info]
        if not joint:
            return {}
        with SegmentTimer(self.backend) as timer:
            masks = segment_official(self.backend, image, [prompts[v] for v in joint], case_id=case.case_id,
                                     progress=progress)
        shared = {name: value / len(joint) for name, value in timer.columns().items()}
        return {v: (official_result(mask, prompts[v]), shared) for v, mask in zip(joint, masks)}

    def _evaluate_target(self, case: Case, image: np.ndarray, prompt: Prompt, row: dict[str, Any],
                         predictions: dict[int, np.ndarray],
                         done: tuple[PropagationResult, dict[str, float]] | None = None,
                         progress: SliceProgress | None = None) -> dict[str, Any]:
        """One target's row; ``done`` = its prediction and time columns when already segmented.
        ``progress`` answering False raises :class:`Cancelled` (the row is not made)."""
        if progress is not None and done is None and progress(0, 0) is False:  # (a joint run reported its own)
            raise Cancelled(None, 0, 0)
        value = int(prompt.target_label)
        gt = np.asarray(case.label) == value
        row = {**row, "prompt": prompts_to_json([prompt]), "prompt_slice": prompt.slice_index,
               "gt_voxels": int(np.count_nonzero(gt))}
        if prompt.info.get("no_prompt"):  # a replayed log without this target's prompt (protocols.replay)
            return fail_row(row, str(prompt.info["no_prompt"]))
        if prompt.is_empty or prompt.info.get("empty"):  # nothing asked, nothing scored
            return empty_gt_row(row, f"the ground truth holds no voxel of label {value} in this case")
        try:
            if isinstance(self.protocol, CorrectionsProtocol):
                pred = self._correct(case, image, prompt, gt, row, progress)
                row.update(score_target(pred, gt, case, self.config.tolerance_mm, row["prompt_slice"]))
                row["notes"] = json_dumps(result_notes(case.image, pred))
                predictions[value] = pred
                return row
            if done is None:
                with SegmentTimer(self.backend) as timer:
                    result = self._segment(case, image, prompt, progress)
                row.update(timer.columns())
            else:
                result, times = done
                row.update(times)
            pred = result.mask
            row.update(propagation_columns(result.record, case.n_slices()))
            row.update(score_target(pred, gt, case, self.config.tolerance_mm, row["prompt_slice"]))
            row["notes"] = json_dumps(result_notes(case.image, pred))
            if self.protocol.sensitivity:
                row.update(self._sensitivity(case, image, prompt, gt, progress))
        except Cancelled:
            raise
        except Exception as error:  # noqa: BLE001 - one target's failure is its own row
            return fail_row(row, error)
        predictions[value] = pred
        return row

    def _correct(self, case: Case, image: np.ndarray, prompt: Prompt, gt: np.ndarray, row: dict[str, Any],
                 progress: SliceProgress | None = None) -> np.ndarray:
        """The ``corrections`` protocol on one target: its final mask; ``row`` gets the scores after
        every interaction, NoC and the anchors. Scoring the steps is not counted in ``time_total_s``.
        ``progress`` sees every pass (the first propagation, then each correction's) and may cancel."""
        scoring = {"seconds": 0.0}

        def score(mask: np.ndarray) -> dict[str, float]:
            start = time.perf_counter()
            scores = score_target(mask, gt, case, self.config.tolerance_mm)
            scoring["seconds"] += time.perf_counter() - start
            return {"dice": float(scores["dice"]), "nsd": float(scores["nsd"])}

        with SegmentTimer(self.backend) as timer:
            pred, steps, anchors = run_corrections(self.backend, image, case.kind, gt, prompt, self.protocol, score,
                                                   rules=self.config.propagation, case_id=case.case_id,
                                                   progress=progress)
        times = timer.columns()
        times = with_rest({**times, "time_total_s": max(0.0, times["time_total_s"] - scoring["seconds"])})
        dice = [round(step["dice"], 4) for step in steps]
        row.update(times)
        row.update({"prompt": prompts_to_json(anchors), "dice_after": json_dumps(dice),
                    "nsd_after": json_dumps([None if step["nsd"] != step["nsd"] else round(step["nsd"], 4)
                                             for step in steps]),
                    **noc_columns([step["dice"] for step in steps])})
        return pred

    def _sensitivity(self, case: Case, image: np.ndarray, prompt: Prompt, gt: np.ndarray,
                     progress: SliceProgress | None = None) -> dict[str, Any]:
        """The ``sens_*`` columns: the prompt perturbed ``protocol.sensitivity`` times, each copy
        segmented as the prompt was (the slices' embeddings are cached: decoder passes only)."""
        prompts = perturbed_prompts(prompt, gt.shape[-2:], self.protocol.sensitivity,
                                    Perturbation(seed=self.protocol.seed), key=case.case_id)
        segment = volume_segmenter(self.backend, image, case.kind, case_id=case.case_id, progress=progress,
                                   rules=self.config.propagation)
        result = sensitivity(segment, prompts, gt)
        if result.cancelled:
            raise Cancelled(None, result.done, len(prompts))
        spread = result.spread()
        return {"sens_runs": spread["runs"], "sens_dice": json_dumps([round(d, 4) for d in result.dice or []]),
                "sens_dice_min": spread["dice_min"], "sens_dice_median": spread["dice_median"],
                "sens_dice_max": spread["dice_max"], "sens_spread": spread["dice_spread"]}

    def _segment(self, case: Case, image: np.ndarray, prompt: Prompt,
                 progress: SliceProgress | None = None) -> PropagationResult:
        how = "slice" if prompt.info.get("operation") == "slice" else "propagate"  # a replayed slice: that slice
        result = segment_by_kind(self.backend, image, case.kind, prompt, case_id=case.case_id, how=how,
                                 rules=self.config.propagation, progress=progress)
        if result.cancelled:
            raise Cancelled(result.mask, result.done, result.total)
        return result

    def _save(self, case: Case, ref: CaseRef, predictions: dict[int, np.ndarray],
              rows: dict[int, dict[str, Any]]) -> None:
        """One label map per case (a later target wins where two overlap), written atomically; a target
        that lost voxels to a later one gets a file of its own too (``<case>.label<value>``), and its row
        names that file: every row's file reproduces the row (``medsam-eval score``)."""
        stem, suffix = safe_file_stem(ref.case_id), prediction_suffix(case)
        dtype = np.uint16 if max(rows, default=0) > 255 else np.uint8
        combined = np.zeros(case.spatial_shape, dtype=dtype)
        for value in sorted(predictions):
            combined[predictions[value]] = value
        files: dict[int | None, tuple[Path, np.ndarray]] = {None: (Path(PREDICTIONS_DIR) / f"{stem}{suffix}", combined)}
        for value, mask in predictions.items():
            if np.any(mask & (combined != value)):  # overwritten where a later target overlaps it
                files[value] = (Path(PREDICTIONS_DIR) / f"{stem}.label{value}{suffix}", mask.astype(dtype) * value)
        written: dict[int | None, tuple[str, str]] = {}
        try:
            for key, (relative, labels) in files.items():
                path = write_mask(labels, self.config.out_dir / relative, case)  # verified before it is kept
                written[key] = (relative.as_posix(), sha256_file(path))
        except Exception as error:  # noqa: BLE001 - the scores stand; say why the file is missing
            for value, row in rows.items():
                rows[value] = fail_row(row, f"{UNSAVED_PREFIX}: {error_text(error)}")
            return
        for value, row in rows.items():
            row["prediction_path"], row["prediction_sha256"] = written.get(value, written[None])
