"""MedSAM2 as MedSAM2 runs it: our MedSAM2 path reproduces the masks of MedSAM2's own scripts.

The reference masks in ``tests/data/medsam2_reference`` were made by running MedSAM2's
``medsam2_infer_3D_CT.py``, ``medsam2_infer_CT_lesion_npz_recist.py`` and
``medsam2_infer_video.py`` (github.com/bowang-lab/MedSAM2 at 332f30d, on the CPU) with a
seeded random checkpoint; PROVENANCE.md says how. Here the checkpoint is rebuilt from its
recipe, its SHA-256 checked, and ``medsam-eval run`` with the matching protocol must give
the same masks, voxel for voxel. MedSAM2's scripts ran without sam2's CUDA extension, so
without hole filling: ours runs with ``fill_holes: false`` to match (and says so).

Random weights make masks that cover most of each image, so the two 3D scripts' masks
differ by only a few thousand voxels; each test also checks that its masks are not the
other script's, so an equality here cannot come from a step that does not matter.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from napari_medsam_eval.checksum import sha256_file
from napari_medsam_eval.cli import main

REPO_ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).resolve().parent / "data" / "medsam2_reference"
#: SHA-256 of ``scripts/make_random_medsam2_checkpoint.py OUT.pt`` (seed 0), as PROVENANCE.md records it
CHECKPOINT_SHA256 = "25f4460b934a1d8ad1b1c1b0a8595c24f7df9a0f86d6cb93f68cb74fc78f9c98"
#: what the reference runs had: no sam2 CUDA extension, so no hole filling; 2 torch threads (the sums
#: of float32 matrix products depend on how they are split between threads, and an earlier test
#: in the same process may have left torch on 1)
AS_THE_REFERENCE_RAN = json.dumps({"fill_holes": False, "num_threads": 2})
#: the two clips of cvc_clinicdb_video that were run (the first two in the layout's order)
VIDEO_CLIPS = ["seq01", "seq02"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def random_checkpoint(tmp_path_factory) -> Path:
    """The seeded random MedSAM2 checkpoint, rebuilt from its recipe (no network)."""
    path = tmp_path_factory.mktemp("medsam2_reference") / "RANDOM_MEDSAM2.pt"
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "make_random_medsam2_checkpoint.py"), str(path)],
                   check=True, capture_output=True)
    return path


def _run(dataset: Path, checkpoint: Path, out: Path, *extra: str) -> Path:
    code = main(["run", str(dataset), "--model", "medsam2", "--checkpoint", str(checkpoint), "--model-options",
                 AS_THE_REFERENCE_RAN, "--save-predictions", "--quiet", "--no-report", "--out", str(out), *extra])
    assert code == 0
    return out


def _prediction(run_dir: Path, case_id: str) -> np.ndarray:
    (path,) = (run_dir / "predictions").glob(f"{case_id}.*")
    if path.suffix == ".npz":
        with np.load(path) as data:
            return data["segs"] > 0
    return sitk.GetArrayFromImage(sitk.ReadImage(str(path))) > 0


def _differing_voxels(run_dir: Path, reference_file: str) -> dict[str, int]:
    with np.load(REFERENCE / reference_file) as reference:
        out = {}
        for case_id in reference.files:
            ours, theirs = _prediction(run_dir, case_id), reference[case_id]
            assert ours.shape == theirs.shape, case_id
            out[case_id] = int(np.count_nonzero(ours != theirs))
        return out


def test_medsam2_reference_checkpoint_is_rebuilt_from_its_recipe(random_checkpoint):
    assert sha256_file(random_checkpoint) == CHECKPOINT_SHA256


def test_medsam2_reference_3d_ct_script(random_checkpoint, shared_data, tmp_path):
    """``medsam2`` (default protocol) = ``medsam2_infer_3D_CT.py``: box both ways, union, largest 3D component."""
    run = _run(shared_data / "deeplesion_ct_npz", random_checkpoint, tmp_path / "ct3d")
    assert _differing_voxels(run, "medsam2_infer_3D_CT.npz") == dict.fromkeys(
        np.load(REFERENCE / "medsam2_infer_3D_CT.npz").files, 0)
    other = _differing_voxels(run, "medsam2_infer_CT_lesion_npz_recist.npz")
    assert min(other.values()) > 1000, other  # the RECIST script's masks are not these


def test_medsam2_reference_recist_npz_script(random_checkpoint, shared_data, tmp_path):
    """``medsam2-recist`` = ``medsam2_infer_CT_lesion_npz_recist.py --propagate_with_box``:
    the box's mask seeds both passes (``add_new_mask``), every component kept."""
    run = _run(shared_data / "deeplesion_ct_npz", random_checkpoint, tmp_path / "recist", "--protocol",
               "medsam2-recist")
    assert _differing_voxels(run, "medsam2_infer_CT_lesion_npz_recist.npz") == dict.fromkeys(
        np.load(REFERENCE / "medsam2_infer_CT_lesion_npz_recist.npz").files, 0)
    other = _differing_voxels(run, "medsam2_infer_3D_CT.npz")
    assert min(other.values()) > 1000, other


def test_medsam2_reference_video_script(random_checkpoint, shared_data, tmp_path):
    """``medsam2_infer_video.py``: frame 0 seeded with its ground-truth mask, forward, no post-processing."""
    options = json.dumps({"video_frame": "first", "video_prompt": "mask"})
    run = _run(shared_data / "cvc_clinicdb_video", random_checkpoint, tmp_path / "video", "--limit", "2",
               "--protocol-options", options)
    assert _differing_voxels(run, "medsam2_infer_video.npz") == dict.fromkeys(VIDEO_CLIPS, 0)


def test_medsam2_reference_video_script_with_a_box(random_checkpoint, shared_data, tmp_path):
    """The same script with frame 0 prompted by the ground truth's box (the ``medsam2`` default
    for videos); its masks differ from the mask-seeded ones by tens of thousands of pixels."""
    run = _run(shared_data / "cvc_clinicdb_video", random_checkpoint, tmp_path / "video_box", "--limit", "2",
               "--protocol-options", json.dumps({"video_frame": "first"}))
    assert _differing_voxels(run, "medsam2_infer_video_box.npz") == dict.fromkeys(VIDEO_CLIPS, 0)
    other = _differing_voxels(run, "medsam2_infer_video.npz")
    assert min(other.values()) > 1000, other
