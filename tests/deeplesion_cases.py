"""One DeepLesion case of the shared data with its first ``medsam2`` prompt, for the anchor tests."""
from __future__ import annotations

from pathlib import Path

from napari_medsam_eval.datasets import resolve_layout
from napari_medsam_eval.protocols import build_protocol


def lesion_case(shared_data: Path, case_id: str):
    """``(case, prompt, truth, ref)``: the case, its first ``medsam2`` prompt, that target's ground truth (bool)."""
    root = shared_data / "deeplesion_ct_npz"
    layout = resolve_layout(root)
    (ref,) = [r for r in layout.list_cases(root) if r.case_id == case_id]
    case = layout.load(ref)
    prompt = build_protocol("medsam2").prompts(case)[0]
    return case, prompt, case.label == prompt.target_label, ref
