"""The Mazurowski protocols against prompts made by the authors' own code.

``shared/reference/mazurowski_prompts.json`` holds the prompts their scripts
(commit 2775b73) produced on local masks; see ``mazurowski_prompts.md`` for how.
Every comparison here is exact: same points, same boxes, same tie counts.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np
import pytest
import SimpleITK as sitk
from scipy import ndimage

from napari_medsam_eval.protocols import (
    MazurowskiProtocol,
    build_protocol,
    mazurowski_label_map,
    mazurowski_prompt_set,
)

FIXTURE_NAME = "mazurowski_prompts.json"
MODE_KEYS = ("mode1_points", "mode2_points", "mode3_boxes", "mode4_boxes", "mode5_boxes")


def _fixture_path() -> Path:
    from conftest import SHARED_REFERENCE

    return SHARED_REFERENCE / FIXTURE_NAME


@lru_cache(maxsize=1)
def _fixture() -> dict:
    path = _fixture_path()
    if not path.is_file():
        pytest.fail(f"reference fixture missing: {path}")
    return json.loads(path.read_text())


def _entries(seeding: str, backend: str) -> list[dict]:
    return [e for e in _fixture()["entries"] if e["seeding"] == seeding and e["dt_backend"] == backend]


def _entry_id(e: dict) -> str:
    label = f":{e['label']}" if "label" in e else ""
    return f"{e['dataset']}/{Path(e['file']).name}{label}"


@lru_cache(maxsize=None)
def _read_label_map(dataset: str, file: str) -> np.ndarray:
    """A 2D mask read as their code reads it (the fixture's ``mask_reading`` rule)."""
    from conftest import SHARED_DATA

    path = SHARED_DATA / dataset / file
    if dataset == "hippocampus_mri":
        volume = sitk.GetArrayFromImage(sitk.ReadImage(str(path)))  # (z, y, x)
        return volume[volume.shape[0] // 2].astype(np.uint8)  # written as a uint8 PNG of 0/1/2
    gray = cv2.imread(str(path), 0)
    if gray is None:
        pytest.fail(f"cannot read {path}")
    return mazurowski_label_map(gray)


def _mask(entry: dict) -> np.ndarray:
    label_map = _read_label_map(entry["dataset"], entry["file"])
    assert list(label_map.shape) == entry["shape_hw"], _entry_id(entry)
    if entry["dataset"] == "hippocampus_mri":
        volume_depth = sitk.ReadImage(str(_data_path(entry))).GetSize()[2]
        assert entry["slice"] == volume_depth // 2
        return label_map == entry["label"]  # their multi-class path: class k -> label k + 1
    return label_map > 0


def _data_path(entry: dict) -> Path:
    from conftest import SHARED_DATA

    return SHARED_DATA / entry["dataset"] / entry["file"]


def _as_reference(prompts) -> dict:
    """Our per-mode prompts in the fixture's layout."""
    out = {}
    for p in prompts:
        mode = p.info["mode"]
        if p.info.get("empty"):
            out[MODE_KEYS[mode - 1]] = None
        elif mode <= 2:
            out[MODE_KEYS[mode - 1]] = [[int(x), int(y), lab] for (x, y), lab in zip(p.points, p.point_labels)]
        else:
            out[MODE_KEYS[mode - 1]] = [[int(v) for v in b] for b in p.boxes]
    return out


def _ties(prompts) -> dict:
    return {f"mode{p.info['mode']}": p.info["tie_candidates"] for p in prompts if p.info["mode"] <= 2 and not p.info.get("empty")}


def _ipp_matches_fixture() -> bool:
    return cv2.ipp.getIppVersion() == _fixture()["about"]["environment"]["ipp"]


def test_fixture_has_what_the_tests_expect(shared_reference):
    data = json.loads((shared_reference / FIXTURE_NAME).read_text())
    assert data["about"]["commit"] == "2775b73f3165a8aaaf157f283fb5cc44276739ae"
    assert len(_entries("per-mask-seed-1", "opencv-c")) == 105
    assert len(_entries("script-order", "opencv-c")) == 105
    assert sum(e["empty"] for e in _entries("per-mask-seed-1", "opencv-c")) == 3
    assert len([e for e in data["iterative"] if e["dt_backend"] == "opencv-c"]) == 5
    assert len([e for e in data["synthetic"] if e["dt_backend"] == "opencv-c"]) == 3


@pytest.mark.parametrize("entry", _entries("per-mask-seed-1", "opencv-c"), ids=_entry_id)
def test_per_mask_entries_match_exactly(entry, shared_data):
    protocol = build_protocol("mazurowski")  # defaults: seed 1, per-mask, opencv-c
    label = entry.get("label", 1)
    prompts = protocol.prompts(_mask(entry).astype(np.uint8) * label, kind="image", target_labels=[label])
    assert [p.info["mode"] for p in prompts] == [1, 2, 3, 4, 5]
    assert _as_reference(prompts) == {k: entry[k] for k in MODE_KEYS}
    if entry["empty"]:
        assert all(p.is_empty and p.info["empty"] for p in prompts)
    else:
        assert _ties(prompts) == entry["tie_candidates"]


def test_script_order_entries_match_with_a_shared_stream(shared_data):
    """Their module-level seed: one RNG across a dataset's masks in the fixture's order."""
    entries = _entries("script-order", "opencv-c")
    matched = 0
    for dataset in sorted({e["dataset"] for e in entries}):
        protocol = MazurowskiProtocol(seeding="shared")
        run = sorted((e for e in entries if e["dataset"] == dataset), key=lambda e: (e["order_in_run"], e.get("label", 0)))
        for entry in run:
            label = entry.get("label", 1)
            prompts = protocol.prompts(_mask(entry).astype(np.uint8) * label, target_labels=[label])
            assert _as_reference(prompts) == {k: entry[k] for k in MODE_KEYS}, _entry_id(entry)
            matched += 1
    assert matched == 105


def test_ipp_entries_match_when_the_ipp_build_is_the_fixtures(shared_data):
    if not _ipp_matches_fixture():
        pytest.skip(f"IPP here is {cv2.ipp.getIppVersion()!r}; its float last bits are CPU/build dependent")
    for seeding in ("per-mask-seed-1", "script-order"):
        entries = _entries(seeding, "opencv-ipp")
        protocols: dict[str, MazurowskiProtocol] = {}
        for entry in sorted(entries, key=lambda e: (e["dataset"], e["order_in_run"], e.get("label", 0))):
            shared = seeding == "script-order"
            protocol = protocols.setdefault(
                entry["dataset"] if shared else "any",
                MazurowskiProtocol(dt_backend="opencv-ipp", seeding="shared" if shared else "per-mask"),
            )
            label = entry.get("label", 1)
            prompts = protocol.prompts(_mask(entry).astype(np.uint8) * label, target_labels=[label])
            assert _as_reference(prompts) == {k: entry[k] for k in MODE_KEYS}, (seeding, _entry_id(entry))


def _iterative_cases(backend: str) -> list[dict]:
    return [e for e in _fixture()["iterative"] if e["dt_backend"] == backend]


@pytest.mark.parametrize("entry", _iterative_cases("opencv-c"), ids=lambda e: Path(e["file"]).stem)
def test_iterative_entries_match_exactly(entry, shared_data):
    gt = _read_label_map(entry["dataset"], entry["file"]) > 0
    assert int(gt.sum()) == entry["gt_pixels"]
    # skimage 0.26 binary_erosion/dilation with disk(3), mode "ignore": the border does not erode
    disk3 = np.hypot(*np.mgrid[-3:4, -3:4]) <= 3
    predictions = [
        ndimage.binary_erosion(gt, disk3, border_value=1),
        ndimage.binary_dilation(gt, disk3, border_value=0),
    ]
    assert [int(p.sum()) for p in predictions] == [entry["prediction_0_pixels"], entry["prediction_1_pixels"]]
    calls = []

    def backend_fn(points, labels):
        calls.append(points.shape[0])
        return predictions[len(calls) - 1] if len(calls) <= 2 else gt

    run = build_protocol("iterative-points", n_points=3).iterate(backend_fn, gt)
    assert calls == [1, 2, 3] and run.stopped == "n_points reached"
    last = run[-1].prompt
    assert [[int(x), int(y), lab] for (x, y), lab in zip(last.points, last.point_labels)] == entry["points"]
    assert last.info["tie_candidates"] == entry["tie_candidates"]
    # the first-point prompt the protocol hands out equals the run's first step
    first = build_protocol("iterative-points").prompts(gt.astype(np.uint8))[0]
    assert first.points == run[0].prompt.points


def _synthetic(backend: str) -> list[dict]:
    return [e for e in _fixture()["synthetic"] if e["dt_backend"] == backend]


@pytest.mark.parametrize("backend", ["opencv-c", "opencv-ipp"])
def test_synthetic_entries_match_exactly(backend):
    if backend == "opencv-ipp" and not _ipp_matches_fixture():
        pytest.skip("IPP build differs from the fixture's")
    entries = _synthetic(backend)
    assert len(entries) == 3
    for entry in entries:
        mask = np.array([[c == "1" for c in row] for row in entry["mask_rows"]])
        assert list(mask.shape) == entry["shape_hw"]
        prompts = MazurowskiProtocol(dt_backend=backend).prompts(mask.astype(np.uint8))
        assert _as_reference(prompts) == {k: entry[k] for k in MODE_KEYS}, entry["file"]
        assert _ties(prompts) == entry["tie_candidates"], entry["file"]
        # the low-level function gives the same numbers
        pset = mazurowski_prompt_set(mask, np.random.RandomState(1), backend)
        assert pset.to_reference_dict() == {k: entry[k] for k in MODE_KEYS}


def test_other_seed_changes_only_tie_breaks(shared_data):
    """Seed 7 instead of 1: points without a tie and all boxes stay; something tied moves."""
    moved = 0
    for entry in _entries("per-mask-seed-1", "opencv-c"):
        if entry["empty"]:
            continue
        mask = _mask(entry)
        a = mazurowski_prompt_set(mask, np.random.RandomState(1))
        b = mazurowski_prompt_set(mask, np.random.RandomState(7))
        assert (a.mode3_boxes, a.mode4_boxes, a.mode5_boxes) == (b.mode3_boxes, b.mode4_boxes, b.mode5_boxes)
        for mode in ("mode1", "mode2"):
            for pa, pb, n in zip(getattr(a, f"{mode}_points"), getattr(b, f"{mode}_points"), a.tie_candidates[mode]):
                if n == 1:
                    assert pa == pb
                else:
                    moved += pa != pb
    assert moved > 0
