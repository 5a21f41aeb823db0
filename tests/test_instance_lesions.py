"""Instance maps as lesions (issue 68): each value one lesion, touching objects apart; lesion work streams.

Real instance maps: ``../shared/data/ctc_nuclei_gowt1`` (Cell Tracking Challenge GOWT1 nuclei, some
touching); a synthetic map of touching discs; a label of thousands of small components scored with the
``box`` model under a memory bound (tracemalloc: numpy's buffers are traced).
"""
from __future__ import annotations

import tracemalloc
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.benchmark import run_benchmark
from napari_medsam_eval.core.errors import OptionError
from napari_medsam_eval.core.targets import Target, parse_targets
from napari_medsam_eval.datasets import detect_layout
from napari_medsam_eval.evaluation.lesion_maps import components, instance_numbers
from napari_medsam_eval.evaluation.lesions import match_lesions
from napari_medsam_eval.protocols import build_protocol

CTC = "ctc_nuclei_gowt1"


def touching_discs(count: int = 5, radius: int = 9) -> np.ndarray:
    """A row of ``count`` discs, values 1..count, each touching the next (no background between them)."""
    yy, xx = np.mgrid[:40, : 2 * radius * count + 20]
    label = np.zeros(yy.shape, dtype=np.uint8)
    for value in range(1, count + 1):
        cx = 10 + radius + 2 * radius * (value - 1)
        label[(yy - 20) ** 2 + (xx - cx) ** 2 <= (radius + 1) ** 2] = value  # overlapping radius: they touch
    return label


def write_ctc(folder: Path, labels: list[np.ndarray]) -> Path:
    """A Cell Tracking Challenge folder (staged layout: img/tNN.tif, gt/man_segNN.tif)."""
    (folder / "img").mkdir(parents=True)
    (folder / "gt").mkdir()
    for number, label in enumerate(labels, start=1):
        iio.imwrite(folder / "img" / f"t{number:02d}.tif", (label > 0).astype(np.uint8) * 120 + 30)
        iio.imwrite(folder / "gt" / f"man_seg{number:02d}.tif", label.astype(np.uint16))
    return folder


def test_instance_targets_are_written_read_and_masked():
    every, some = parse_targets(["nuclei=instances", "cells=2,5:instances"])
    assert every.instances and every.lesions and every.labels == () and every.value is None
    assert (some.instances, some.labels) == (True, (2, 5))
    assert [Target.parse(t.text()) == t for t in (every, some)] == [True, True]
    assert every.text() == "nuclei=instances" and some.text() == "cells=2,5:instances"
    assert every.labels_text() == "instances" and "every non-zero value" in every.describe()
    label = np.array([[0, 1, 2], [5, 5, 0]])
    assert every.mask(label).tolist() == [[False, True, True], [True, True, False]]
    assert some.mask(label).tolist() == [[False, False, True], [True, True, False]]
    with pytest.raises(OptionError, match="instances"):
        Target.parse("nuclei=1:each")


def test_touching_discs_are_lesions_apart_and_components_merge_them():
    label = touching_discs()
    assert components(label > 0)[1] == 1  # the foreground's components: one merged blob
    assert instance_numbers(label) == [1, 2, 3, 4, 5]
    pred = label.copy()
    pred[pred == 2] = 0           # one disc missed
    pred[pred == 4] = 9           # another numbered otherwise: still one instance, found
    result = match_lesions(pred, label, (1.0, 1.0), "image", instances=True)
    true = {l.number: l for l in result.true_lesions}
    assert sorted(true) == [1, 2, 3, 4, 5]
    assert (result.found, result.missed, result.false_positives) == (4, 1, 0)
    assert true[2].status == "missed" and true[4].matched == [9] and true[4].dice == 1.0
    merged = match_lesions(pred > 0, label > 0, (1.0, 1.0), "image")  # components: every disc in one
    assert len(merged.true_lesions) == 1


def test_touching_discs_through_a_run_each_disc_its_own_lesion(tmp_path: Path):
    folder = write_ctc(tmp_path / "discs", [touching_discs()])
    assert detect_layout(folder).name == "ctc"
    table = run_benchmark(folder, tmp_path / "run", "oracle")  # the layout's target: nuclei=instances
    row = table.iloc[0]
    assert row["status"] == "ok" and row["target_labels"] == "instances"
    assert (row["lesions_true"], row["lesions_found"], row["lesions_false"]) == (5, 5, 0)
    assert row["lesion_f1"] == 1.0 and row["lesion_dice"] == 1.0
    lesions = pd.read_csv(tmp_path / "run" / "lesions.csv")
    assert sorted(lesions.loc[lesions["source"] == "true", "number"]) == [1, 2, 3, 4, 5]
    components_run = run_benchmark(folder, tmp_path / "components", "oracle", targets=["disc=1,2,3,4,5:lesions"])
    assert components_run.iloc[0]["lesions_true"] == 1  # what a lesion target made of components sees


def test_ctc_nuclei_every_instance_a_lesion_touching_ones_apart(shared_data: Path, tmp_path: Path):
    root = shared_data / CTC
    layout = detect_layout(root)
    refs = layout.list_cases(root)
    values = {ref.case_id: instance_numbers(layout.load(ref).label) for ref in refs}
    table = run_benchmark(root, tmp_path / "run", "oracle")
    lesions = pd.read_csv(tmp_path / "run" / "lesions.csv")
    for _, row in table.iterrows():
        held = values[row["case_id"]]
        assert row["status"] == "ok" and row["lesions_true"] == len(held)
        assert (row["lesions_found"], row["lesions_false"], row["lesion_dice"]) == (len(held), 0, 1.0)
        true = lesions[(lesions["case_id"] == row["case_id"]) & (lesions["source"] == "true")]
        assert sorted(true["number"]) == held  # each lesion numbered by its value in man_segNN.tif
    merged = {ref.case_id: components(layout.load(ref).label > 0)[1] for ref in refs}
    assert any(merged[c] < len(values[c]) for c in values), "some nuclei touch: components merge them"


def test_a_lesion_target_of_thousands_of_components_streams(tmp_path: Path):
    """2,500 small squares in a 2D image: the lesion target's work holds the case, not a mask a lesion."""
    rng = np.random.default_rng(0)
    label = np.zeros((400, 400), dtype=np.uint8)
    places = np.stack(np.meshgrid(np.arange(0, 396, 4), np.arange(0, 396, 4), indexing="ij"), -1).reshape(-1, 2)
    for y, x in places[rng.choice(len(places), 2500, replace=False)]:
        label[y:y + 2, x:x + 2] = 1
    folder = tmp_path / "many"
    folder.mkdir()
    np.savez_compressed(folder / "CT_many.npz", imgs=(label * 150 + 40).astype(np.uint8), gts=label,
                        spacing=np.array([1.0, 1.0, 1.0]))
    decoded = 2 * label.nbytes
    run_benchmark(folder, tmp_path / "warm", "box", targets=["lesion=1:lesions"], limit=1)  # imports, caches
    tracemalloc.start()
    try:
        table = run_benchmark(folder, tmp_path / "run", "box", targets=["lesion=1:lesions"])
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    row = table.iloc[0]
    assert row["status"] == "ok" and row["lesions_true"] == 2500
    lesions = pd.read_csv(tmp_path / "run" / "lesions.csv")
    assert (lesions["source"] == "true").sum() == 2500
    per_lesion_masks = 2500 * label.size  # what one full-size mask a lesion held before (400 MB here)
    assert peak < per_lesion_masks / 20, f"peak {peak / 1e6:.1f} MB"
    assert peak < 2 * decoded + 2500 * 12_000, f"peak {peak / 1e6:.1f} MB: over the case and 12 kB a lesion's record"


def test_protocol_prompts_each_instance_numbered_by_its_value():
    label = touching_discs(3)
    label[label == 2] = 7
    prompts = build_protocol("medsam2").prompts(label[None].repeat(3, 0), "volume",
                                                targets=[Target("nuclei", (), instances=True)])
    assert sorted(p.info["lesion"] for p in prompts) == [1, 3, 7]


def test_score_an_instance_target_matches_the_maps_value_by_value(tmp_path: Path, capsys):
    import json

    from napari_medsam_eval.cli import main

    truth = touching_discs()
    pred = truth.copy()
    pred[pred == 2] = 0
    iio.imwrite(tmp_path / "gt.png", truth)
    iio.imwrite(tmp_path / "pred.png", pred)
    assert main(["score", str(tmp_path / "pred.png"), str(tmp_path / "gt.png"), "--json",
                 "--targets", "nuclei=instances"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["labels"]
    assert (row["lesions_true"], row["lesions_found"], row["lesions_missed"]) == (5, 4, 1)


def test_a_lesion_result_prints_one_line_and_the_api_takes_instance_maps():
    """Issue 68, notebook habits: LesionResult's repr is a summary line (details() lists the lesions), and
    api.match_lesions(instances=True) keeps two touching instances apart where components merge them."""
    import numpy as np

    from napari_medsam_eval import api

    truth = np.zeros((40, 40), np.uint16)
    truth[5:15, 5:15], truth[5:15, 15:25] = 1, 2  # two touching squares: one component, two instances
    prediction = np.where(truth == 2, 0, truth)
    result = api.match_lesions(prediction, truth, "image", (1.0, 1.0), instances=True)
    assert (result.found, result.missed, result.false_positives) == (1, 1, 0)
    assert repr(result) == ("LesionResult(1 found, 1 missed, 0 false positives, f1=0.6667, lesion_dice=0.5, "
                            "rule=iou 0.5)")
    assert result.details().splitlines()[1:] == ["  true 1: found, 100 voxels, DSC 1",
                                                "  true 2: missed, 100 voxels, DSC 0",
                                                "  predicted 1: matched, 100 voxels, DSC 1"]
    merged = api.match_lesions(prediction > 0, truth > 0, "image", (1.0, 1.0))
    assert (merged.found, merged.missed, merged.false_positives) == (0, 1, 1)  # one component each, IoU 0.5
