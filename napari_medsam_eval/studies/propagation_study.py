"""The propagation study: a grid of propagation rules on a dataset, one encoder pass per slice.

For every case of a dataset (any layout the benchmark reads) and every
target, the MedSAM2 protocol's prompt (tight box on the middle slice / first
frame of the target) is propagated with each setting of a grid of
:class:`~.rules.PropagationRules`. The backend caches every slice's embedding,
so the grid costs one encoder pass per slice plus a decoder pass per
(setting, slice). For volumes and LiteMedSAM, the official 3D-box loop
(given the target's z-extent: an upper reference, not a propagation) is run
beside the grid. Rows hold DSC, NSD and where each direction stopped; the
table gives per task and setting the median DSC [IQR] and the median NSD.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from ..core.targets import Target, parse_targets, regions_only
from ..evaluation.aggregate import summarize
from ..evaluation.error_parts import PART_COLUMNS
from ..evaluation.scoring import NSD_TOLERANCE_MM, score_target
from ..datasets import resolve_layout, task_name
from ..core.intensity import case_intensity, prepare_image
from ..models.base import SegmentationBackend
from ..protocols import build_protocol
from ..propagation.segment import segment_by_kind
from ..propagation.rules import LEGACY_RULES, VIDEO_RULES, VOLUME_RULES, PropagationRules

#: the name of the official 3D-box reference in the study's tables
OFFICIAL = "official-3d-box (given z-extent)"
#: the official loop's prompt: the target's 3D box, as the CVPR 2024 challenge gives it
OFFICIAL_PROTOCOL = build_protocol("litemedsam-3dbox")


def volume_grid() -> dict[str, PropagationRules]:
    """The settings studied on volumes: the legacy rule, the default, and one change at a time."""
    default = VOLUME_RULES
    return {
        "legacy (2 px, stop when empty)": LEGACY_RULES,
        "default": default,
        "no stop rule (default box)": default.replace(intensity_k=None, min_iou=None),
        "intensity only": default.replace(min_iou=None),
        "min_iou=0.3 only (micro-sam)": default.replace(intensity_k=None),
        "intensity_k=1.5": default.replace(intensity_k=1.5),
        "intensity_k=3": default.replace(intensity_k=3.0),
        "margin 2 px, no fraction": default.replace(margin_fraction=0.0),
        "margin_fraction=0.2": default.replace(margin_fraction=0.2),
        "score_ratio=0.8 (instead of intensity)": default.replace(intensity_k=None, score_ratio=0.8),
        "max_area_growth=1.5 (instead of intensity)": default.replace(intensity_k=None, max_area_growth=1.5),
        "max_box_fill=0.9 (instead of intensity)": default.replace(intensity_k=None, max_box_fill=0.9),
    }


def video_grid() -> dict[str, PropagationRules]:
    """The settings studied on videos: the legacy rule, the default (boxes located by similarity), variants."""
    default = VIDEO_RULES
    return {
        "legacy (2 px, stop when empty)": LEGACY_RULES,
        "default": default,
        "last mask's box, held (locate=None)": default.replace(locate=None),
        "hold 3 frames": default.replace(hold=3),
        "stop when lost (hold 0)": default.replace(hold=0),
        "margin 2 px, no fraction": default.replace(margin_fraction=0.0),
        "margin_fraction=0.3": default.replace(margin_fraction=0.3),
        "intensity_k=2": default.replace(intensity_k=2.0),
        "score_ratio=0.8": default.replace(score_ratio=0.8),
    }


GRIDS: dict[str, Callable[[], dict[str, PropagationRules]]] = {"volume": volume_grid, "video": video_grid}


@dataclass
class StudyProgress:
    """Where a study is: ``done`` of ``total`` cases, the last case's id."""

    done: int
    total: int
    case_id: str


def run_propagation_study(
    dataset: str | Path,
    backend: SegmentationBackend,
    *,
    limit: int | None = None,
    layout: str | None = None,
    official: bool = True,
    grids: dict[str, dict[str, PropagationRules]] | None = None,
    tolerance_mm: float = NSD_TOLERANCE_MM,
    progress: Callable[[StudyProgress], Any] | None = None,
    targets: Sequence[str | Target] | None = None,
) -> pd.DataFrame:
    """Rows (case, target, setting) of the grid on ``dataset`` (first ``limit`` cases); ``targets`` as
    ``run --targets`` takes them (:mod:`napari_medsam_eval.core.targets`; default: the dataset's)."""
    dataset = Path(dataset)
    regions_only(parse_targets(targets), "the propagation study")  # refused before any work
    layout_obj = resolve_layout(dataset, layout)
    refs = layout_obj.list_cases(dataset)
    refs = refs[:limit] if limit else refs
    grids = grids or {kind: make() for kind, make in GRIDS.items()}
    protocol = build_protocol("medsam2")
    rows: list[dict[str, Any]] = []
    for done, ref in enumerate(refs, start=1):
        case = layout_obj.load(ref)
        chosen = layout_obj.targets(ref, case, regions_only(parse_targets(targets, case.label_names),
                                                           "the propagation study"))
        rows.extend(_study_case(case, ref.dataset, backend, protocol, chosen, grids, official, tolerance_mm))
        if progress is not None:
            progress(StudyProgress(done, len(refs), ref.case_id))
    return pd.DataFrame(rows)


def _study_case(case: Any, dataset: str, backend: SegmentationBackend, protocol: Any, targets: list[Target],
                grids: dict[str, dict[str, PropagationRules]], official: bool, tolerance_mm: float) -> list[dict]:
    image = prepare_image(case.image, case.kind, case.modality, intensity=case_intensity(case.metadata))
    grid = grids["video" if case.kind == "video" else "volume"]
    if hasattr(backend, "cache_size"):  # keep every slice of the case: the grid re-reads them all
        backend.cache_size = max(int(backend.cache_size), case.n_slices())
    backend.clear_cache()
    rows = []
    prompts = {int(p.target_label): p for p in protocol.prompts(case, targets=targets)}
    for target in targets:
        prompt = prompts.get(target.key)
        if prompt is None or prompt.is_empty or prompt.info.get("empty"):
            continue
        gt = target.mask(case.label)
        base = {"case_id": case.case_id, "task": task_name(dataset, target.name),
                "target_label": target.value, "target_labels": target.labels_text(), "kind": case.kind}
        settings = [(name, prompt, {"rules": rules}) for name, rules in grid.items()]
        if official and case.kind == "volume" and getattr(backend, "name", "") == "litemedsam":
            settings.append((OFFICIAL, OFFICIAL_PROTOCOL.prompt_for_mask(gt, target.key), {"how": "official"}))
        for name, setting_prompt, options in settings:
            start = time.perf_counter()
            result = segment_by_kind(backend, image, case.kind, setting_prompt, case_id=case.case_id, **options)
            scores = score_target(result.mask, gt, case, tolerance_mm, setting_prompt.slice_index)
            rows.append({**base, "setting": name, "dice": scores["dice"], "nsd": scores["nsd"],
                         "pred_voxels": scores["pred_voxels"], "gt_voxels": scores["gt_voxels"],
                         **{column: scores[column] for column in (*PART_COLUMNS, "dominant_error")},
                         "stops": "; ".join(f"{s.direction}:{s.reason}@{s.at}" for s in result.record.stops),
                         "seconds": time.perf_counter() - start})
    backend.clear_cache()
    return rows


def study_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per task and setting: n, median DSC with IQR, median NSD (settings in the grid's order)."""
    out = []
    for (task, setting), group in rows.groupby(["task", "setting"], sort=False):
        dice, nsd = summarize(group["dice"]), summarize(group["nsd"])
        parts = {f"{column}_mean": float(group[column].mean()) for column in PART_COLUMNS if column in group}
        out.append({"task": task, "setting": setting, "n": dice["n"], "dice_median": dice["median"],
                    "dice_q25": dice["q25"], "dice_q75": dice["q75"], "nsd_median": nsd["median"], **parts})
    return pd.DataFrame(out)


def table_markdown(table: pd.DataFrame) -> str:
    """The study table as Markdown: one row per setting, one column per task (median DSC [IQR] / NSD)."""
    tasks = list(dict.fromkeys(table["task"]))
    lines = ["| setting | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
    for setting in dict.fromkeys(table["setting"]):
        cells = []
        for task in tasks:
            hit = table[(table["task"] == task) & (table["setting"] == setting)]
            if hit.empty:
                cells.append("")
                continue
            r = hit.iloc[0]
            cells.append(f"{r.dice_median:.3f} [{r.dice_q25:.3f}-{r.dice_q75:.3f}] / {r.nsd_median:.3f} (n={r.n})")
        lines.append(f"| {setting} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["GRIDS", "OFFICIAL", "StudyProgress", "run_propagation_study", "study_table", "table_markdown",
           "video_grid", "volume_grid"]
