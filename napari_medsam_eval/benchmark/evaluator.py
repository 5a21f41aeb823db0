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

import time
from typing import Any, Iterable, Iterator

import numpy as np

from ..core.case import Case
from ..core.checksum import sha256_file
from ..core.targets import Target, parse_targets
from ..datasets import CaseRef, DatasetLayout
from ..evaluation.lesion_maps import lesion_labels
from ..evaluation.lesions import match_lesions
from ..core.errors import Cancelled
from ..io import write_mask
from .prediction_files import file_names, prediction_files, prediction_suffix, safe_file_stem
from ..models.base import SegmentationBackend
from ..core.progress import SliceProgress
from ..core.prompt import Prompt, prompts_to_json
from ..core.intensity import case_intensity, prepare_image
from ..propagation import PropagationResult, official_result, segment_official, segment_prompts
from .cvpr25_case import challenge_case
from ..evaluation.interaction_effort import noc_columns
from ..protocols import PromptProtocol
from .lesion_prompts import LesionPrompts, filled, row_cells
from .spilled_cells import ListCell
from ..protocols.corrections import CorrectionsProtocol
from ..studies.corrections import run_corrections
from ..studies.sensitivity import Perturbation, perturbed_prompts, sensitivity, volume_segmenter
from .config import RunConfig
from .manifest import inputs_sha256
from .schema import json_dumps
from ..evaluation.scoring import result_notes, score_target
from .case_progress import StepProgress, target_progress
from .timing import SegmentTimer, with_rest
from ..core.errors import InputError

from .case_rows import (absent_words, base_row, empty_gt_row, error_text, fail_row, failed_case_rows,  # noqa: E402,F401
                        oracle_masks, propagation_columns, target_row)

#: how a row's error starts when its prediction could not be written (the runner stops: the disk is full, ...)
UNSAVED_PREFIX = "prediction not saved"
OFFICIAL_3D_PROTOCOL = "litemedsam-3dbox"


class CaseEvaluator:
    """Turns one :class:`CaseRef` into its rows with a built backend and protocol."""

    def __init__(self, layout: DatasetLayout, backend: SegmentationBackend, protocol: PromptProtocol,
                 config: RunConfig) -> None:
        self.layout = layout
        self.backend = backend
        self.protocol = protocol
        self.config = config
        self.lesion_rule = config.lesion_rule()
        #: cvpr25-interactive: the case's classes run together, each target's final mask and columns by key
        self._challenge: dict[int, tuple[np.ndarray, dict[str, Any]]] = {}
        if protocol.sensitivity and (isinstance(protocol, CorrectionsProtocol) or protocol.name == OFFICIAL_3D_PROTOCOL):
            raise InputError(f"protocol {protocol.name!r}: the sensitivity option perturbs one prompt and propagates "
                             "it; it is not available with the corrections or the official 3D box protocol")
        lesions = [t.text() for t in parse_targets(config.targets) or [] if t.lesions]
        if lesions and (protocol.sensitivity or isinstance(protocol, CorrectionsProtocol)):
            raise InputError(f"target {lesions[0]}: lesion by lesion, each lesion is prompted on its own; the "
                             "corrections protocol and the sensitivity option work on one prompt per target")

    def evaluate(self, ref: CaseRef, progress: StepProgress | None = None) -> list[dict[str, Any]]:
        """All rows of one case (at least one).

        ``progress`` gets a :class:`~.case_progress.CaseStep` as each target starts and after each of its
        slices; when it answers False the case stops there and :class:`Cancelled` is raised (no rows).
        """
        base = {**base_row(ref, ref.kind, self.config), "input_sha256": inputs_sha256(ref)}
        try:
            case = self.layout.load(ref)
        except Exception as error:  # noqa: BLE001 - any reader failure is this case's result
            return [{**row, "input_sha256": base["input_sha256"]}
                    for row in failed_case_rows(ref, self.layout, self.config, error)]
        base.update(kind=case.kind, n_slices=case.n_slices())
        try:
            targets = self.layout.targets(ref, case, parse_targets(self.config.targets, case.label_names))
        except Exception as error:  # noqa: BLE001 - e.g. a label value the dataset does not declare
            return failed_case_rows(ref, self.layout, self.config, error)
        if not targets:
            return [empty_gt_row(target_row(base, None),
                                 "the ground truth holds no foreground label and the dataset names none")]
        rows = {t.key: target_row(base, t) for t in targets}
        try:
            prompts = self._prompts(case, targets)
            image = prepare_image(case.image, case.kind, case.modality,
                                  intensity=case_intensity(case.metadata, self.config.intensity))
        except Exception as error:  # noqa: BLE001
            return [fail_row(row, error) for row in rows.values()]
        predictions: dict[int, np.ndarray] = {}
        self.backend.clear_cache()
        if hasattr(self.backend, "set_ground_truth"):  # the oracle baseline answers from the label map
            self.backend.set_ground_truth(case.label, oracle_masks(case.label, targets))
        unit = "frame" if case.kind == "video" else "slice"

        def report(target: str, index: int, count: int) -> SliceProgress | None:
            return None if progress is None else target_progress(progress, ref.case_id, target, index, count, unit)
        try:
            try:
                joint = self._official_joint(case, image, prompts, targets, report("all targets", 0, 1))
                if getattr(self.protocol, "clicks_in_3d", False):  # one label map per case, as the challenge scores it
                    self._challenge = challenge_case(self.backend, self.protocol, case, image, prompts, targets,
                                                     rules=self.config.propagation, progress=lambda t, i: report(
                                                         t.name, i, len(targets)))
            except Cancelled:
                raise
            except Exception as error:  # noqa: BLE001 - the joint run's failure is each of its targets'
                return [fail_row(row, error) for row in rows.values()]
            for index, target in enumerate(targets):
                rows[target.key] = self._evaluate_target(case, image, target, prompts[target.key], rows[target.key],
                                                         predictions, joint.get(target.key),
                                                         report(target.name, index, len(targets)))
        finally:
            self._challenge = {}
            self.backend.clear_cache()
            if hasattr(self.backend, "set_ground_truth"):
                self.backend.set_ground_truth(None)
        if self.config.save_predictions:
            self._save(case, ref, targets, predictions, rows)
        return [rows[t.key] for t in targets]

    def _prompts(self, case: Case, targets: list[Target]) -> dict[int, list[Prompt]]:
        """Each target's prompts: one, or one per lesion for a target taken lesion by lesion (made as they
        are segmented, :class:`LesionPrompts`, unless the protocol makes its own list or runs them jointly)."""
        streamed = [t for t in targets if t.lesions] if (type(self.protocol).prompts is PromptProtocol.prompts
                                                         and self.protocol.name != OFFICIAL_3D_PROTOCOL) else []
        if streamed:
            by_key = {t.key: LesionPrompts(self.protocol, case, t) for t in streamed}
            for target in targets:  # the others one at a time, as the protocol prompts them beside lesions
                if not target.lesions:
                    by_key.update(self._prompts(case, [target]))
            return by_key
        prompts = self.protocol.prompts(case, targets=targets)
        by_target: dict[int, list[Prompt]] = {}
        for prompt in prompts:
            by_target.setdefault(int(prompt.target_label), []).append(prompt)
        several = {t.key: len(by_target.get(t.key, [])) for t in targets
                   if len(by_target.get(t.key, [])) != 1 and not (t.lesions and by_target.get(t.key))}
        if several:
            raise InputError(f"protocol {self.protocol.name!r} must give one prompt per target for the benchmark "
                             f"runner; got counts {several} (choose one mode/option)")
        return by_target

    def _official_joint(self, case: Case, image: np.ndarray, prompts: dict[int, list[Prompt]],
                        targets: list[Target], progress: SliceProgress | None = None,
                        ) -> dict[int, tuple[PropagationResult, dict[str, float]]]:
        """Protocol ``litemedsam-3dbox`` on a volume: every target's box (each lesion's) in one official run,
        in the targets' order, as the official script runs a case (:func:`~napari_medsam_eval.propagation.segment_official`:
        one label map, a later box overwrites an earlier one where they overlap). The run's time is shared
        equally by its targets' rows."""
        if self.protocol.name != OFFICIAL_3D_PROTOCOL or case.kind != "volume":
            return {}
        joint = [(t.key, p) for t in targets for p in prompts[t.key]
                 if not p.is_empty and not p.info.get("empty") and "box_3d" in p.info]
        if not joint:
            return {}
        union: dict[int, np.ndarray] = {}  # each target's (its lesions') masks united as they come
        with SegmentTimer(self.backend) as timer:
            for (key, _prompt), mask in zip(joint, segment_official(self.backend, image, [p for _key, p in joint],
                                                                    case_id=case.case_id, progress=progress)):
                if key in union:
                    union[key] |= mask
                else:
                    union[key] = mask
        keys = list(dict.fromkeys(key for key, _p in joint))
        shared = {name: value / len(keys) for name, value in timer.columns().items()}
        first = {key: next(p for k, p in joint if k == key) for key in keys}
        return {key: (official_result(union[key], first[key]), shared) for key in keys}

    def _evaluate_target(self, case: Case, image: np.ndarray, target: Target, prompts: list[Prompt],
                         row: dict[str, Any], predictions: dict[int, np.ndarray],
                         done: tuple[PropagationResult, dict[str, float]] | None = None,
                         progress: SliceProgress | None = None) -> dict[str, Any]:
        """One target's row; ``done`` = its prediction and time columns when already segmented.
        ``progress`` answering False raises :class:`Cancelled` (the row is not made)."""
        if progress is not None and done is None and progress(0, 0) is False:  # (a joint run reported its own)
            raise Cancelled(None, 0, 0)
        if isinstance(prompts, LesionPrompts):
            return self._evaluate_lesions(case, image, target, prompts, row, predictions, progress)
        gt = target.mask(case.label)
        prompt = prompts[0]
        cells = row_cells(self.config.out_dir, case.case_id, target.key) if target.lesions else None
        row = {**row, "prompt": prompts_to_json(prompts) if cells is None else filled(cells["prompt"], prompts),
               "prompt_slice": prompt.slice_index,
               "gt_voxels": int(np.count_nonzero(gt))}
        if prompt.info.get("no_prompt"):  # a replayed log without this target's prompt (protocols.replay)
            return fail_row(row, str(prompt.info["no_prompt"]))
        if all(p.is_empty or p.info.get("empty") for p in prompts):  # nothing asked, nothing scored
            return empty_gt_row(row, absent_words(target, case.label))
        try:
            if isinstance(self.protocol, CorrectionsProtocol):
                pred = self._correct(case, image, prompt, gt, row, progress)
                row.update(score_target(pred, gt, case, self.config.tolerance_mm, row["prompt_slice"]))
                row["notes"] = json_dumps(result_notes(case.image, pred))
                predictions[target.key] = pred
                return row
            instances = None
            if done is None:
                with SegmentTimer(self.backend) as timer:
                    result, instances = self._segment_all(case, image, prompts, progress, target.instances)
                row.update(timer.columns())
            else:
                result, times = done
                row.update(times)
            pred = result.mask
            row.update(propagation_columns(result.record, case.n_slices()))
            if cells is not None:  # (a lesion target of a joint run, or of a protocol making its own list)
                row["stops"] = filled(cells["stops"], result.record.stops)
            row.update(score_target(pred, gt, case, self.config.tolerance_mm, row["prompt_slice"]))
            row["notes"] = json_dumps(result_notes(case.image, pred))
            if target.lesions:
                lesions = self._lesions(case, target, pred, gt, instances, cells and cells["lesions"])
                row.update(lesions)  # the lesions' JSON written lesion by lesion
            if self.protocol.sensitivity:
                row.update(self._sensitivity(case, image, prompt, gt, progress))
        except Cancelled:
            raise
        except Exception as error:  # noqa: BLE001 - one target's failure is its own row
            return fail_row(row, error)
        predictions[target.key] = pred
        return row

    def _evaluate_lesions(self, case: Case, image: np.ndarray, target: Target, prompts: LesionPrompts,
                          row: dict[str, Any], predictions: dict[int, np.ndarray],
                          progress: SliceProgress | None = None) -> dict[str, Any]:
        """A lesion target's row, its lesions prompted, segmented and scored one at a time: the prompts,
        stops and lesion records go to their cells as they are made (:mod:`.spilled_cells`), so the memory
        is the case's, not a list of tens of thousands. A failed row keeps the prompts given until it failed."""
        cells = row_cells(self.config.out_dir, case.case_id, target.key)
        gt = target.mask(case.label)
        first = next(iter(prompts))
        row = {**row, "prompt_slice": first.slice_index, "gt_voxels": int(np.count_nonzero(gt))}
        if first.is_empty or first.info.get("empty"):  # no lesion: its one empty prompt
            cells["prompt"].add(first)
            return empty_gt_row({**row, "prompt": cells["prompt"].text()}, absent_words(target, case.label))

        def given() -> Iterator[Prompt]:
            for prompt in prompts:
                cells["prompt"].add(prompt)
                yield prompt
        try:
            with SegmentTimer(self.backend) as timer:
                result, instances = self._segment_all(case, image, given(), progress, target.instances,
                                                      stops=lambda stops: [cells["stops"].add(s) for s in stops])
            row.update(timer.columns())
            pred = result.mask
            row.update({**propagation_columns(result.record, case.n_slices()), "stops": cells["stops"].text(),
                        "prompt": cells["prompt"].text()})
            row.update(score_target(pred, gt, case, self.config.tolerance_mm, row["prompt_slice"]))
            row["notes"] = json_dumps(result_notes(case.image, pred))
            row.update(self._lesions(case, target, pred, gt, instances, cells["lesions"]))
        except Cancelled:
            for cell in cells.values():
                cell.discard()
            raise
        except Exception as error:  # noqa: BLE001 - one target's failure is its own row
            cells["stops"].discard()
            cells["lesions"].discard()
            try:
                given_prompts = row.get("prompt") or cells["prompt"].text()
            except OSError:  # (its file could not be written either)
                cells["prompt"].discard()
                given_prompts = "[]"
            return fail_row({**row, "prompt": given_prompts}, error)
        predictions[target.key] = pred
        return row

    def _correct(self, case: Case, image: np.ndarray, prompt: Prompt, gt: np.ndarray, row: dict[str, Any],
                 progress: SliceProgress | None = None) -> np.ndarray:
        """The ``corrections`` protocol on one target: its final mask; ``row`` gets the scores after
        every interaction, NoC and the anchors. Scoring the steps is not counted in ``time_total_s``.
        ``progress`` sees every pass (the first propagation, then each correction's) and may cancel."""
        if getattr(self.protocol, "clicks_in_3d", False):  # cvpr25-interactive: run with the case's other classes (cvpr25_case)
            pred, columns = self._challenge[int(prompt.target_label)]
            row.update(columns)
            return pred
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

    def _segment_all(self, case: Case, image: np.ndarray, prompts: Iterable[Prompt],
                     progress: SliceProgress | None = None, instances: bool = False, stops: Any = None,
                     ) -> tuple[PropagationResult, np.ndarray | None]:
        """The target's prompt segmented, or each lesion's and their masks united (:func:`segment_prompts`),
        one lesion at a time; with ``instances`` also the predicted instance map: each lesion's mask under its
        number (its prompt's ``info["lesion"]``), a later lesion's over an earlier one's where they overlap."""
        if not instances:
            return segment_prompts(self.backend, image, case.kind, prompts, case_id=case.case_id, stops=stops,
                                   rules=self.config.propagation, progress=progress), None
        numbered = np.zeros(case.spatial_shape, dtype=np.uint16 if int(case.label.max()) < 1 << 16 else np.uint32)

        def number(prompt: Prompt, mask: np.ndarray) -> None:
            numbered[np.asarray(mask, dtype=bool)] = int(prompt.info.get("lesion") or 0)
        result = segment_prompts(self.backend, image, case.kind, prompts, case_id=case.case_id, stops=stops,
                                 rules=self.config.propagation, progress=progress, each=number)
        return result, numbered

    def _lesions(self, case: Case, target: Target, pred: np.ndarray, gt: np.ndarray,
                 instances: np.ndarray | None, cell: ListCell | None = None) -> dict[str, Any]:
        """A lesion target's lesion columns (:func:`match_lesions`): connected components, or an instance
        target's instance maps (the truth's values inside its mask; the prediction's numbered map, or for a
        joint run without one, its mask's connected components each an instance)."""
        if not target.instances:
            return match_lesions(pred, gt, case.spacing.values, case.kind, self.lesion_rule,
                                 each=None if cell is None else cell.add).columns(True, cell)
        truth, _numbers = lesion_labels(case.label, target)
        if instances is None:
            instances = lesion_labels(pred.astype(np.uint8), Target("prediction", (1,), lesions=True))[0]
        return match_lesions(instances, truth, case.spacing.values, case.kind, self.lesion_rule, instances=True,
                             each=None if cell is None else cell.add).columns(True, cell)

    def _save(self, case: Case, ref: CaseRef, targets: list[Target], predictions: dict[int, np.ndarray],
              rows: dict[int, dict[str, Any]]) -> None:
        """The case's predictions, each file written atomically and verified (:func:`prediction_files`);
        every row names its file, which reproduces the row (``medsam-eval score`` with the run's targets)."""
        stem, suffix = safe_file_stem(ref.case_id), prediction_suffix(case, self.config.prediction_format)
        files = prediction_files(targets, predictions, case.spatial_shape, stem, suffix)
        written: dict[int | None, tuple[str, str]] = {}
        try:
            for key, (relative, labels) in files.items():
                path = write_mask(labels, self.config.out_dir / relative, case,  # verified before it is kept
                                  names=file_names(targets, key, predictions), model=self.config.model,
                                  protocol=self.config.protocol)  # a DICOM SEG records them
                written[key] = (relative.as_posix(), sha256_file(path))
        except Exception as error:  # noqa: BLE001 - the scores stand; say why the file is missing
            for key, row in rows.items():
                rows[key] = fail_row(row, f"{UNSAVED_PREFIX}: {error_text(error)}")
            return
        for key, row in rows.items():
            where = written.get(key, written.get(None))
            if where is not None:
                row["prediction_path"], row["prediction_sha256"] = where
