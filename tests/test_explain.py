"""What would fix it (issue 59): counterfactual re-runs, each stage made perfect, on cases whose costs are known.

The built cases use a small per-slice model that is exact inside its box (the pixels brighter than a
threshold), so each variant's mask can be told in advance; the run through the console script uses
LiteMedSAM on a real hippocampus case with an embedding store of its own.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from figures import scales, subset
from napari_medsam_eval.core.case import Case, Spacing
from napari_medsam_eval.core.prompt import Prompt
from napari_medsam_eval.models.base import SegmentationBackend, SegmentResult
from napari_medsam_eval.models.baselines import box_mask
from napari_medsam_eval.propagation import segment_prompts
from napari_medsam_eval.protocols import build_protocol
from napari_medsam_eval.studies.counterfactuals import VARIANTS, counterfactuals


class BrightInBox(SegmentationBackend):
    """The pixels brighter than ``threshold`` inside the prompt's box; counts a slice's first look as an
    encoder pass (``cache_key`` a cache, as LiteMedSAM's)."""

    name = "bright-in-box"
    accepts = frozenset({"box"})

    def __init__(self, threshold: int = 50) -> None:
        self.threshold = threshold
        self.encoded: list = []
        self.cache: set = set()

    def segment(self, image, prompt: Prompt, *, cache_key=None) -> SegmentResult:
        if cache_key is None or cache_key not in self.cache:
            self.encoded.append(cache_key)
            self.cache.add(cache_key)
        image = np.asarray(image)
        inside = np.zeros(image.shape[:2], dtype=bool)
        for box in prompt.boxes:
            inside |= box_mask(box, image.shape[:2])
        return SegmentResult(mask=inside & (image > self.threshold), score=0.9)

    def clear_cache(self) -> None:
        self.cache.clear()


def _disc(shape: tuple[int, int], centre: tuple[int, int], radius: float) -> np.ndarray:
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    return (yy - centre[0]) ** 2 + (xx - centre[1]) ** 2 <= radius ** 2


def _case(image: np.ndarray, label: np.ndarray, kind: str = "volume") -> Case:
    return Case(image=image, label=label, spacing=Spacing((1.0, 1.0, 1.0), "zyx"), kind=kind, case_id="built")


def _run_and_explain(case: Case, backend: BrightInBox):
    protocol = build_protocol("medsam2", seed=0)
    prompts = protocol.prompts(case)
    gt = case.label == 1
    run = segment_prompts(backend, case.image, case.kind, prompts, case_id=case.case_id).mask
    return run, gt, counterfactuals(backend, case.image, case, gt, prompts, protocol)


def _dice(a: np.ndarray, b: np.ndarray) -> float:
    return 2.0 * np.logical_and(a, b).sum() / (a.sum() + b.sum())


def _darker_end_case() -> Case:
    """A disc on slices 4-15 whose last two slices are darker (the brightness rule ends a walk at 14), with
    bright tissue past the object's end (a leak if a walk were not kept to the object)."""
    label = np.zeros((20, 48, 48), dtype=np.uint8)
    image = np.zeros((20, 48, 48), dtype=np.uint8)
    disc = _disc((48, 48), (24, 24), 8)
    for z in range(4, 16):
        label[z][disc] = 1
        image[z][disc] = 200 if z < 14 else 120
    image[16:, disc] = 200
    return _case(image, label)


def test_a_propagation_stopped_two_slices_early_gains_exactly_those_slices_under_the_true_extent():
    """The object's last two slices are darker: the brightness rule ends the run two slices early, and with
    the true extent exactly those two slices come back (and nothing past the object's end)."""
    run, gt, found = _run_and_explain(_darker_end_case(), BrightInBox())
    assert not run[14:16].any() and run[4:14].sum() == gt[4:14].sum()  # stopped two slices early
    extent = found["oracle_extent"]
    assert np.array_equal(extent.mask, gt)
    assert np.array_equal(extent.mask & ~run, _only(gt, (14, 15)))
    assert extent.dice == pytest.approx(1.0) and extent.dice - _dice(run, gt) == pytest.approx(1.0 - _dice(run, gt))


def _only(mask: np.ndarray, slices: tuple[int, ...]) -> np.ndarray:
    kept = np.zeros_like(mask)
    kept[list(slices)] = mask[list(slices)]
    return kept


def test_a_prompt_on_a_small_part_gains_under_the_best_prompt_slice():
    """The middle slice lies in a small part of the object, cut from its large part by an empty slice: the
    run finds the small part only; prompted where the object is largest, the large part is found."""
    label = np.zeros((16, 48, 48), dtype=np.uint8)
    for z in range(2, 9):
        label[z][_disc((48, 48), (24, 24), 2)] = 1
    for z in range(10, 15):
        label[z][_disc((48, 48), (24, 24), 12)] = 1
    image = np.where(label > 0, 200, 0).astype(np.uint8)
    run, gt, found = _run_and_explain(_case(image, label), BrightInBox())
    assert np.array_equal(run, _only(gt, tuple(range(2, 9))))
    moved = found["oracle_prompt_slice"]
    assert moved.prompt_slice == 10  # the first of the largest slices
    assert np.array_equal(moved.mask, _only(gt, tuple(range(10, 15))))
    assert moved.dice > _dice(run, gt) + 0.5


def test_a_model_perfect_with_boxes_has_no_drift_cost_and_each_slice_is_looked_at_once():
    """A cone the model follows exactly: the run, the true box on every slice and the true extent are all the
    ground truth (no stage costs anything), and over the run and its three variants each slice was encoded
    once (the variants reuse the slices' cache)."""
    label = np.zeros((14, 48, 48), dtype=np.uint8)
    for z in range(2, 12):
        label[z][_disc((48, 48), (24, 24), 3 + z)] = 1
    image = np.where(label > 0, 180, 20).astype(np.uint8)
    backend = BrightInBox()
    run, gt, found = _run_and_explain(_case(image, label), backend)
    assert np.array_equal(run, gt)
    for variant in VARIANTS:
        result = found[variant]
        assert result.same_as_run or (np.array_equal(result.mask, gt) and result.dice == pytest.approx(1.0))
    assert found["oracle_box"].dice - _dice(run, gt) == pytest.approx(0.0)
    assert len(backend.encoded) == len(set(backend.encoded)) == 12  # its 10 slices and one past each end, once


def test_a_2d_image_has_only_the_box_variant():
    label = _disc((40, 40), (20, 20), 6).astype(np.uint8)
    image = np.where(label > 0, 200, 0).astype(np.uint8)
    case = Case(image=image, label=label, spacing=Spacing((1.0, 1.0), "yx"), kind="image", case_id="flat")
    protocol = build_protocol("medsam2", seed=0)
    found = counterfactuals(BrightInBox(), image, case, label == 1, protocol.prompts(case), protocol)
    assert found["oracle_extent"].reason and found["oracle_prompt_slice"].reason
    assert found["oracle_box"].dice == pytest.approx(1.0)


def test_an_unknown_variant_is_refused():
    label = np.zeros((4, 8, 8), dtype=np.uint8)
    with pytest.raises(ValueError, match="unknown counterfactual variant"):
        counterfactuals(BrightInBox(), label, _case(label, label), label == 1, [], None, variants=("oracle_stop",))


@pytest.mark.slow
def test_explain_through_the_console_script_on_a_hippocampus_run(tmp_path, shared_data):
    """``medsam-eval run`` (LiteMedSAM, its own embedding store) then ``medsam-eval explain``: explain.csv per
    (case, target), the report's section and figure; explained again, no slice is encoded (all stored)."""
    cli = str(Path(sys.executable).with_name("medsam-eval"))
    run_dir, store = tmp_path / "run", tmp_path / "store"
    subprocess.run([cli, "run", str(shared_data / "hippocampus_mri"), "--limit", "1", "--save-predictions",
                    "--embeddings", str(store), "--quiet", "--no-report", "--out", str(run_dir)], check=True)
    done = subprocess.run([cli, "explain", str(run_dir), "--quiet"], check=True, capture_output=True, text=True)
    assert "costs most" in done.stdout and "the run took" in done.stdout
    table = pd.read_csv(run_dir / "explain.csv")
    results = pd.read_csv(run_dir / "results.csv")
    assert len(table) == len(results) == 2 and set(table["status"]) == {"ok"}
    assert np.allclose(table["dice_run"], results.sort_values("label_name")["dice"])
    for variant in VARIANTS:
        assert table[f"dice_{variant}"].between(0, 1).all()
        assert np.allclose(table[f"gain_{variant}"], table[f"dice_{variant}"] - table["dice_run"], atol=1e-3)
    assert all((run_dir / path).exists() for path in table["mask_oracle_box"])
    report = (run_dir / "report.md").read_text()
    assert "## What would fix it" in report and "figures/what_would_fix_it.png" in report
    assert (run_dir / "figures" / "what_would_fix_it.png").exists()
    (run_dir / "explain.csv").unlink()
    subprocess.run([cli, "explain", str(run_dir), "--quiet", "--no-report"], check=True, capture_output=True)
    again = pd.read_csv(run_dir / "explain.csv")
    assert (again["encoder_calls"] == 0).all()  # every slice the variants need is in the store now
    assert np.allclose(again["dice_oracle_extent"], table["dice_oracle_extent"])


def test_the_true_extent_goes_on_from_the_run_with_the_same_mask_and_fewer_model_calls():
    """Continued from the run's result (its mask, where each direction stopped), the true extent is the mask a
    walk made again gives, and the model looks only at the slices past the run's stops."""
    from napari_medsam_eval.propagation.segment import segment_prompts as segment
    from napari_medsam_eval.studies.counterfactuals import extent_from_run, extent_mask, object_masks

    case = _darker_end_case()
    image, label = case.image, case.label
    protocol = build_protocol("medsam2", seed=0)
    prompts = protocol.prompts(case)
    backend = BrightInBox()
    run = segment(backend, image, "volume", prompts, case_id="built")
    stops = [s.to_dict() for s in run.record.stops]
    gt = label == 1
    (obj,) = object_masks(gt, prompts)
    backend.cache.clear()
    backend.encoded.clear()
    again = extent_mask(backend, image, case, prompts, [obj], None, "built")
    walked = len(backend.encoded)
    backend.cache.clear()
    backend.encoded.clear()
    continued = extent_from_run(backend, image, case, prompts[0], obj, run.mask, stops, None, "built")
    assert np.array_equal(continued, again) and np.array_equal(continued, gt)
    assert backend.encoded == [("built", 14), ("built", 15)] and walked > 2  # only the slices past the stop


def test_api_explain_run_on_a_2d_run_draws_a_bar_and_says_what_does_not_apply(tmp_path, capsys):
    from napari_medsam_eval import api
    from napari_medsam_eval.cli import main

    sample = Path(__file__).resolve().parents[1] / "sample_data" / "phantom_2d"
    assert main(["run", str(sample), "--model", "box", "--out", str(tmp_path / "run"), "--quiet", "--no-report"]) == 0
    capsys.readouterr()
    table = api.explain_run(tmp_path / "run", progress=True)
    assert "explaining" in capsys.readouterr().err
    assert len(table) == 1 and table.loc[0, "dice_oracle_box"] == pytest.approx(table.loc[0, "dice_run"], abs=1e-3)
    assert "2D image" in table.loc[0, "note_oracle_extent"]


@pytest.mark.slow
@scales("cases", ["CT_Lesion_000001_02_01_008-023"], None, small_id="1-case", full_id="6-cases")
def test_explaining_deeplesion(tmp_path, shared_data, shared_embeddings, cases, figure):
    """DeepLesion run and explained (docs/propagation.md's table): every variant scored, each gain its DSC less
    the run's; at the docs' scale the medians the table states."""
    from napari_medsam_eval import api

    dataset = shared_data / "deeplesion_ct_npz"
    if cases is not None:
        dataset = subset(dataset, tmp_path / "few", cases)
    api.run_benchmark(api.RunConfig(dataset, tmp_path / "run", save_predictions=True,
                                    model_options={"embeddings": shared_embeddings}))
    table = api.explain_run(tmp_path / "run")
    assert (table["status"] == "ok").all()
    for variant in VARIANTS:
        assert np.allclose(table[f"gain_{variant}"], table[f"dice_{variant}"] - table["dice_run"], atol=1e-3)
    assert (table["dice_oracle_box"] >= table["dice_run"] - 0.05).all()
    if cases is None:
        figure("explain_deeplesion_extent", float(table["dice_oracle_extent"].median()))
        figure("explain_deeplesion_box", float(table["dice_oracle_box"].median()))
        figure.assert_all_match()
