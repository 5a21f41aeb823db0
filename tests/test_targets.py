"""Targets as the field defines them: regions of several labels, nested objects, lesions one by one.

The core's one definition (``core/targets.py``), read from ``--targets``, nnU-Net v2 ``dataset.json`` region
lists and Python; a BraTS-like set scored as whole tumour / tumour core / enhancing tumour, each equal to
scoring its union by hand; lesion matching on built cases with the counts the rules give; a sphere inside a
sphere through the core and the API; DeepLesion lesion by lesion.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import SimpleITK as sitk

from napari_medsam_eval import api
from napari_medsam_eval.benchmark import load_table, run_benchmark
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.case import Case, Spacing
from napari_medsam_eval.core.errors import OptionError
from napari_medsam_eval.core.intensity import prepare_image
from napari_medsam_eval.core.targets import Target, dataset_json_targets, parse_targets
from napari_medsam_eval.datasets.phantoms import REGIONS_LABELS
from napari_medsam_eval.evaluation.lesions import LesionRule, match_lesions
from napari_medsam_eval.evaluation.metrics import score_pair
from napari_medsam_eval.models import build_backend
from napari_medsam_eval.io import read_label
from napari_medsam_eval.protocols import build_protocol
from napari_medsam_eval.propagation import segment_by_kind

from figures import scales, subset

BRATS_REGIONS = REGIONS_LABELS
REPO = Path(__file__).resolve().parents[1]


def ball(shape: tuple[int, ...], centre: tuple[float, ...], radii: tuple[float, ...]) -> np.ndarray:
    grid = np.indices(shape, dtype=float)
    return sum(((g - c) / r) ** 2 for g, c, r in zip(grid, centre, radii)) <= 1.0


def nested_labels(shape=(24, 48, 48), shift: int = 0) -> np.ndarray:
    """Three nested balls: 1 outside (edema), 2 (core) around 3 (enhancing), as BraTS labels them."""
    centre = (12, 24 + shift, 24 - shift)
    label = np.zeros(shape, dtype=np.uint8)
    label[ball(shape, centre, (9, 16, 16))] = 1
    label[ball(shape, centre, (6, 10, 10))] = 2
    label[ball(shape, centre, (3, 5, 5))] = 3
    return label


#: the BraTS-like set of the sample data (nnU-Net v2, dataset.json with BraTS's regions: scripts/make_sample_data.py)
REGIONS = REPO / "sample_data" / "phantom_regions"


# -- the one definition ---------------------------------------------------------------------------------------

def test_target_text_keys_and_masks():
    liver, tumour, lesion = parse_targets(["liver=1,3", "tumour=3", "lesion=3:lesions"])
    assert (liver.labels, liver.value, liver.key) == ((1, 3), None, 4)
    assert (tumour.key, tumour.value) == (3, 3) and lesion.lesions and lesion.key == 5  # label 3 taken: a new key
    assert [Target.parse(t.text()).labels for t in (liver, tumour, lesion)] == [(1, 3), (3,), (3,)]
    label = np.array([[0, 1, 2, 3]])
    assert liver.mask(label).tolist() == [[False, True, False, True]]
    assert parse_targets(["2"], {2: "right kidney"})[0].name == "right_kidney"
    assert parse_targets("a=1; b=2")[1].name == "b"


@pytest.mark.parametrize("text, words", [("liver=1,x", "write it as NAME=V"), ("liver=0", "0 is the background"),
                                         ("liver=1:each", "only 'lesions'"), ("=", "write it as")])
def test_a_target_that_cannot_be_read_is_refused_naming_it(text, words):
    with pytest.raises(OptionError, match=words):
        parse_targets([text])


def test_two_targets_of_one_name_are_refused():
    with pytest.raises(OptionError, match="distinct names"):
        parse_targets(["a=1", "a=2"])


def test_nnunet_v2_region_lists_are_targets_and_msd_names_are_not():
    wt, tc, et = dataset_json_targets(BRATS_REGIONS)
    assert [(t.name, t.labels) for t in (wt, tc, et)] == [("whole_tumor", (1, 2, 3)), ("tumor_core", (2, 3)),
                                                          ("enhancing_tumor", (3,))]
    assert et.key == 3 and {wt.key, tc.key} == {4, 5}
    assert dataset_json_targets({"0": "background", "1": "anterior"}) is None
    assert dataset_json_targets({"background": 0, "anterior": 1}) is None


# -- regions through run and score --------------------------------------------------------------------------

def test_brats_like_regions_are_read_from_dataset_json_and_scored_as_their_unions(tmp_path: Path):
    root = REGIONS
    table = run_benchmark(root, tmp_path / "run", "box", save_predictions=True)
    assert (table["status"] == "ok").all(), table["error"].tolist()
    assert sorted(set(table["task"])) == ["phantom_regions/enhancing_tumor", "phantom_regions/tumor_core",
                                          "phantom_regions/whole_tumor"]
    backend = build_backend("box")
    protocol = build_protocol("medsam2")
    for _, row in table.iterrows():
        labels = [int(v) for v in row["target_labels"].split(",")]
        gt = sitk.GetArrayFromImage(sitk.ReadImage(str(root / "labelsTr" / f"{row['case_id']}.nii.gz")))
        union = np.isin(gt, labels)
        # by hand: the protocol's prompt from the union, segmented and scored as any binary target
        prompt = protocol.prompts(union.astype(np.uint8), kind="volume", target_labels=[1])[0]
        case = api.read_case(root / "imagesTr" / f"{row['case_id']}_0000.nii.gz")
        image = prepare_image(case.image, case.kind, case.modality)  # as every run prepares a case
        mask = segment_by_kind(backend, image, "volume", prompt).mask
        by_hand = score_pair(mask, union, "volume", case.spacing.values)
        assert row["dice"] == pytest.approx(by_hand["dice"], abs=1e-12) and row["gt_voxels"] == union.sum()
        assert row["nsd"] == pytest.approx(by_hand["nsd"], abs=1e-9)
        # the row's own file reproduces it with the run's targets (nested: each region has a file of its own)
        saved = sitk.GetArrayFromImage(sitk.ReadImage(str(tmp_path / "run" / row["prediction_path"])))
        assert np.array_equal(np.isin(saved, labels), mask)
    assert table["dice"].nunique() > 1  # the regions differ: a score is not one label's
    whole = table[table["label_name"] == "whole_tumor"]
    assert whole["target_label"].isna().all() and (whole["target_labels"] == "1,2,3").all()


def test_run_targets_option_and_a_label_the_data_do_not_hold(tmp_path: Path, capsys):
    root = REGIONS
    assert main(["run", str(root), "--model", "oracle", "--out", str(tmp_path / "run"), "--quiet", "--no-report",
                 "--limit", "1", "--propagation", "legacy", "--targets", "core_and_more=1,2", "enhancing=3"]) == 0
    table = load_table(tmp_path / "run")
    assert table["task"].tolist() == ["phantom_regions/core_and_more", "phantom_regions/enhancing"]
    assert (table["dice"] > 0.99).all()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["targets"] == ["core_and_more=1,2", "enhancing=3"]
    assert main(["run", str(root), "--model", "oracle", "--out", str(tmp_path / "run2"), "--quiet",
                 "--targets", "all=1,7"]) == 2
    assert "holds no label 7 (its labels: 1, 2, 3)" in capsys.readouterr().err
    assert not (tmp_path / "run2").exists()  # refused before any work
    # a resumed run must agree on its targets
    assert main(["run", str(root), "--model", "oracle", "--out", str(tmp_path / "run"), "--quiet", "--resume",
                 "--limit", "1", "--targets", "enhancing=3"]) == 2
    assert "targets" in capsys.readouterr().err


def test_score_targets_unite_labels_in_both_maps(tmp_path: Path, capsys):
    gt, pred = nested_labels(), nested_labels(shift=1)
    for array, name in ((gt, "gt.nii.gz"), (pred, "pred.nii.gz")):
        sitk.WriteImage(sitk.GetImageFromArray(array), str(tmp_path / name))
    assert main(["score", str(tmp_path / "pred.nii.gz"), str(tmp_path / "gt.nii.gz"), "--json",
                 "--targets", "whole=1,2,3", "enhancing=3"]) == 0
    rows = json.loads(capsys.readouterr().out)["labels"]
    assert [r["label"] for r in rows] == ["1,2,3", "3"]
    expected = score_pair(np.isin(pred, [1, 2, 3]), np.isin(gt, [1, 2, 3]), "volume", (1.0, 1.0, 1.0))
    assert rows[0]["dice"] == pytest.approx(expected["dice"]) and rows[0]["dice"] != rows[1]["dice"]


# -- lesions -----------------------------------------------------------------------------------------------

def lesion_pair() -> tuple[np.ndarray, np.ndarray]:
    """A built case: lesion A split by the prediction in two halves, lesions B and C merged into one blob,
    a small lesion D missed, a false positive E, and lesion F found well."""
    gt = np.zeros((12, 80, 80), dtype=bool)
    pred = np.zeros_like(gt)
    gt[2:10, 5:25, 5:25] = True                           # A
    pred[2:10, 5:14, 5:25] = pred[2:10, 16:25, 5:25] = True  # A in two halves
    gt[2:10, 40:50, 5:15] = gt[2:10, 52:62, 5:15] = True    # B and C, apart
    pred[2:10, 40:62, 5:15] = True                          # one blob over both
    gt[5:7, 70:73, 70:73] = True                            # D, small: missed
    pred[3:6, 40:45, 60:65] = True                          # E: a false positive
    gt[2:10, 5:20, 40:60] = True                            # F
    pred[2:10, 5:20, 41:60] = True                          # F found
    return pred, gt


def test_lesions_matched_by_iou_one_to_one():
    pred, gt = lesion_pair()
    result = match_lesions(pred, gt, (2.0, 1.0, 1.0), "volume")
    true = {l.number: l for l in result.true_lesions}
    assert len(true) == 5 and result.found == 1 and result.missed == 4  # A (split), B, C (merged), D; F found
    assert result.false_positives == 4  # the two halves of A, the blob of B and C, E
    assert result.f1 == pytest.approx(2 / (2 + 4 + 4))
    found = [l for l in result.true_lesions if l.status == "found"]
    assert len(found) == 1 and found[0].dice == pytest.approx(2 * 19 * 15 * 8 / (20 * 15 * 8 + 19 * 15 * 8))
    assert result.mean_dice == pytest.approx(found[0].dice / 5)
    sizes = {l.voxels: l.size for l in result.true_lesions}
    assert sizes[18] == "small" and sizes[3200] == "medium"  # 18 x 2 mm3 = 0.036 mL; 3200 x 2 = 6.4 mL
    assert result.recall_by_size()["small"] == 0.0


def test_lesions_matched_by_overlap_find_split_and_merged_lesions():
    pred, gt = lesion_pair()
    result = match_lesions(pred, gt, (2.0, 1.0, 1.0), "volume", LesionRule(match="overlap"))
    assert (result.found, result.missed, result.false_positives) == (4, 1, 1)  # only D missed, only E false
    split = next(l for l in result.true_lesions if l.voxels == 3200)
    assert split.status == "found" and len(split.matched) == 2 and split.dice == pytest.approx(
        2 * 18 * 20 * 8 / (3200 + 18 * 20 * 8))
    missed = [l for l in result.true_lesions if l.status == "missed"]
    assert [(l.size, l.first_slice, l.last_slice, l.largest_slice) for l in missed] == [("small", 5, 6, 5)]


def test_lesion_sizes_are_stated_options():
    rule = LesionRule(small_ml=0.01, large_ml=5.0)
    assert [rule.size_of(v) for v in (0.005, 1.0, 6.4)] == ["small", "medium", "large"]
    assert rule.size_of(None) == ""
    with pytest.raises(ValueError, match="small_ml <= large_ml"):
        LesionRule(small_ml=5, large_ml=1)


def lesions_case(tmp_path: Path) -> Path:
    """A volume of three lesions of one label (small, medium and large at 1 x 1 x 3 mm voxels), as an npz."""
    label = np.zeros((20, 64, 64), dtype=np.uint8)
    label[ball(label.shape, (10, 16, 16), (8, 12, 12))] = 1      # large
    label[ball(label.shape, (10, 45, 45), (4, 8, 8))] = 1        # medium
    label[ball(label.shape, (10, 16, 50), (2, 3, 3))] = 1        # small
    image = (label * 150 + 40).astype(np.uint8)
    folder = tmp_path / "lesions"
    folder.mkdir()
    np.savez_compressed(folder / "CT_three_lesions.npz", imgs=image, gts=label, spacing=np.array([1.0, 1.0, 3.0]))
    return folder


def test_a_lesion_target_is_prompted_lesion_by_lesion_and_judged_so(tmp_path: Path):
    folder = lesions_case(tmp_path)
    table = run_benchmark(folder, tmp_path / "run", "oracle", targets=["lesion=1:lesions"], propagation="legacy")
    row = table.iloc[0]
    prompts = json.loads(row["prompt"])
    assert row["status"] == "ok" and len(prompts) == 3 and [p["info"]["lesion"] for p in prompts] == [1, 2, 3]
    assert (row["lesions_true"], row["lesions_found"], row["lesions_missed"], row["lesions_false"]) == (3, 3, 0, 0)
    assert row["lesion_f1"] == 1.0 and row["dice"] > 0.99
    lesions = pd.read_csv(tmp_path / "run" / "lesions.csv")
    true = lesions[lesions["source"] == "true"]
    assert sorted(true["size"]) == ["large", "medium", "small"] and (true["status"] == "found").all()
    assert api.lesion_table(tmp_path / "run")["volume_ml"].sum() == pytest.approx(2 * true["volume_ml"].sum())
    report = (tmp_path / "run" / "report.md")
    from napari_medsam_eval.report import write_report

    write_report(tmp_path / "run")
    text = report.read_text()
    assert "## Lesions, one by one" in text and "None: every true lesion was found." in text


def test_a_missed_lesion_is_named_in_the_report_by_size(tmp_path: Path):
    folder = lesions_case(tmp_path)
    # the box model fills the box: the small lesion's box is most of it, the large one's is not (IoU <= 0.5)
    run_benchmark(folder, tmp_path / "run", "box", targets=["lesion=1:lesions"])
    from napari_medsam_eval.report import write_report

    write_report(tmp_path / "run")
    table = load_table(tmp_path / "run")
    lesions = api.lesion_table(tmp_path / "run")
    missed = lesions[lesions["status"] == "missed"]
    assert int(table["lesions_missed"].iloc[0]) == len(missed) >= 1
    text = (tmp_path / "run" / "report.md").read_text()
    assert f"### Missed lesions, by size ({len(missed)})" in text
    for _, lesion in missed.iterrows():
        assert f"| CT_three_lesions | lesions/lesion | {lesion['number']} | {lesion['size']} |" in text


# -- a sphere inside a sphere: each object keeps its own mask -------------------------------------------------

def sphere_in_sphere() -> Case:
    shape = (24, 64, 64)
    label = np.zeros(shape, dtype=np.uint8)
    label[ball(shape, (12, 32, 32), (10, 24, 24))] = 1
    label[ball(shape, (12, 32, 32), (5, 10, 10))] = 2
    image = (label * 80 + 30).astype(np.uint8)
    return Case(image, label, Spacing.from_array_order((2.0, 1.0, 1.0), "zyx"), "volume", "spheres")


def test_a_sphere_inside_a_sphere_through_the_api_keeps_both_objects():
    case = sphere_in_sphere()
    outer, inner = api.Target("outer", (1, 2)), api.Target("inner", (2,))
    session = api.open_session(case, api.build_model("oracle"))
    keyed = parse_targets([outer, inner])
    session.backend.set_ground_truth(case.label, {t.key: t.mask(case.label) for t in keyed})
    masks = {}
    for target, prompt in zip(keyed, api.protocol_prompts(case, "medsam2", targets=keyed)):
        masks[target.name] = session.propagate(prompt).mask
    for target in keyed:
        scores = api.score_pair(masks[target.name], target.mask(case.label), case.kind, case.spacing)
        assert scores["dice"] > 0.9, (target, scores["dice"])
    assert np.logical_and(masks["outer"], masks["inner"]).sum() == masks["inner"].sum() > 0  # nested, both whole


# -- DeepLesion, lesion by lesion (LiteMedSAM, shipped weights) ----------------------------------------------

DEEPLESION_FEW = ["CT_Lesion_000001_02_01_008-023", "CT_Lesion_000010_01_01_078-090"]


@pytest.mark.slow
@scales("cases", DEEPLESION_FEW, None, small_id="2-cases", full_id="6-cases")
def test_deeplesion_lesion_by_lesion(shared_data: Path, tmp_path: Path, shared_embeddings: str, cases, figure):
    dataset = shared_data / "deeplesion_ct_npz"
    if cases is not None:
        dataset = subset(dataset, tmp_path / "few", cases)
    table = run_benchmark(dataset, tmp_path / "run", "litemedsam", targets=["lesion=1:lesions"],
                          save_predictions=True, model_options={"embeddings": shared_embeddings})
    assert (table["status"] == "ok").all() and (table["lesions_true"] == 1).all()  # one lesion in each crop
    lesions = api.lesion_table(tmp_path / "run")
    true = lesions[lesions["source"] == "true"].set_index("case_id")
    assert true.loc["CT_Lesion_000001_02_01_008-023", "status"] == "found"
    # 000010: LiteMedSAM's mask overlaps the lesion with an IoU under 0.5: missed by the IoU rule ...
    assert true.loc["CT_Lesion_000010_01_01_078-090", "status"] == "missed"
    overlap = {}
    for _, row in table.iterrows():
        case = api.read_case(dataset / f"{row['case_id']}.npz")
        pred = read_label(tmp_path / "run" / row["prediction_path"]).array == 1
        result = api.match_lesions(pred, case.label == 1, case.kind, case.spacing, match="overlap")
        overlap[row["case_id"]] = result.found
        one_each = row["lesions_found"] + row["lesions_false"] == 1  # one predicted lesion: its DSC is the row's
        if one_each and row["lesions_found"] == 1:
            assert row["lesion_dice"] == pytest.approx(row["dice"], abs=1e-4)
    assert overlap["CT_Lesion_000010_01_01_078-090"] == 1  # ... and found by the overlap rule, which it touches
    if cases is None:
        found = int(table["lesions_found"].sum())
        figure("deeplesion_lesions_found", found)
        figure("deeplesion_lesion_f1", 2 * found / (found + len(table) + int(table["lesions_false"].sum())))
        figure.assert_all_match()


def test_a_run_folder_made_before_targets_keeps_reporting(tmp_path: Path, shared_data: Path, capsys):
    """A results table without ``target_labels`` and the lesion columns (the schema before targets): it loads,
    its rows' targets are their labels, the report and a comparison with a new run read it."""
    from napari_medsam_eval.benchmark.schema import LESION_COUNT_COLUMNS, row_target

    new = tmp_path / "new"
    assert main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "2", "--out", str(new),
                 "--quiet", "--no-report"]) == 0
    old = tmp_path / "old"
    old.mkdir()
    table = load_table(new).drop(columns=["target_labels", *LESION_COUNT_COLUMNS, "lesion_f1", "lesion_dice",
                                          "lesions"])
    table.to_csv(old / "results.csv", index=False)
    loaded = load_table(old)
    assert (loaded["target_labels"] == "").all() and loaded["lesions_true"].isna().all()
    assert [row_target(r).labels for _, r in loaded.iterrows()] == [(1,), (2,), (1,), (2,)]
    assert main(["report", str(old)]) == 0
    text = (old / "report.md").read_text()
    assert "## Per task" in text and "Lesions, one by one" not in text
    assert main(["compare", str(old), str(new), "--out", str(tmp_path / "compared")]) == 0
    assert "4 scored in both" in (tmp_path / "compared" / "compare.md").read_text()
