"""Issue 29, item 3: a dataset reached twice through links counts each case once; a link loop is a loop.

Every dataset is made in ``tmp_path`` (links to the real files of ``shared/data``
or files written from them); nothing is written into ``shared``.
"""
from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import SimpleITK as sitk
from dicom_series import write_series
from test_datasets import write_camus, write_sunseg_tree

from napari_medsam_eval.benchmark import run_benchmark
from napari_medsam_eval.cli import main
from napari_medsam_eval.datasets import DatasetWarning, get_layout
from napari_medsam_eval.core.errors import DataError

HIPPO = ("hippocampus_001", "hippocampus_004", "hippocampus_007")


def _hippo_npz(folder: Path, shared: Path, cases=HIPPO) -> Path:
    """MedSAM npz files (``MR_Hippo_<n>.npz``) written from real hippocampus volumes."""
    folder.mkdir(parents=True)
    for case in cases:
        image = sitk.GetArrayFromImage(sitk.ReadImage(str(shared / "hippocampus_mri" / "imagesTr" / f"{case}.nii.gz")))
        label = sitk.GetArrayFromImage(sitk.ReadImage(str(shared / "hippocampus_mri" / "labelsTr" / f"{case}.nii.gz")))
        np.savez(folder / f"MR_Hippo_{case[-3:]}.npz", imgs=np.clip(image, 0, 255).astype(np.uint8),
                 gts=label.astype(np.uint8), spacing=np.array([1.0, 1.0, 1.0]))
    return folder


def _listed(layout: str, root: Path) -> tuple[list[str], list[str]]:
    """Case ids of the dataset and the DatasetWarnings its listing gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ids = [ref.case_id for ref in get_layout(layout).list_cases(root)]
    return ids, [str(w.message) for w in caught if issubclass(w.category, DatasetWarning)]


# ------------------------------------------------------------ n and medians
def test_selfdir_and_duplicate_links_leave_n_and_medians_unchanged(tmp_path, shared_data):
    plain = _hippo_npz(tmp_path / "plain", shared_data)
    linked = _hippo_npz(tmp_path / "linked", shared_data)
    (linked / "selfdir").symlink_to(".")
    (linked / "again.npz").symlink_to("MR_Hippo_001.npz")   # a second name through a symbolic link
    os.link(linked / "MR_Hippo_004.npz", linked / "MR_Hippo_904.npz")  # and through a hard link
    ids, warned = _listed("npz", linked)
    assert ids == _listed("npz", plain)[0] == ["MR_Hippo_001", "MR_Hippo_004", "MR_Hippo_007"]
    assert any(f"{linked / 'selfdir'} -> . leads back to" in w and "(a link loop)" in w for w in warned), warned
    assert any(f"symbolic link {linked / 'again.npz'} -> MR_Hippo_001.npz reaches 1 case(s) already listed "
               "(MR_Hippo_001)" in w for w in warned), warned
    assert any("MR_Hippo_904.npz (a hard link to" in w for w in warned), warned
    with pytest.warns(DatasetWarning):
        tables = {name: run_benchmark(root, tmp_path / f"run_{name}", model="box")
                  for name, root in (("plain", plain), ("linked", linked))}
    a, b = tables["plain"], tables["linked"]
    assert len(a) == len(b) == 6 and (a["status"] == "ok").all() and (b["status"] == "ok").all()
    assert sorted(b["case_id"]) == sorted(a["case_id"])
    for metric in ("dice", "nsd"):  # tasks are named after the dataset folder: compare by label
        assert b.groupby("label_name")[metric].median().to_dict() == a.groupby("label_name")[metric].median().to_dict()


# ------------------------------------------------------------ every layout
def _msd(root: Path, shared: Path) -> None:
    for sub in ("imagesTr", "labelsTr"):
        (root / sub).mkdir(parents=True)
        for case in HIPPO[:2]:
            (root / sub / f"{case}.nii.gz").symlink_to(shared / "hippocampus_mri" / sub / f"{case}.nii.gz")
    (root / "imagesTr" / "selfdir").symlink_to(".")


def _msd_duplicate(root: Path) -> None:
    for sub in ("imagesTr", "labelsTr"):
        (root / sub / "hippocampus_901.nii.gz").symlink_to(root / sub / "hippocampus_001.nii.gz")


def _folder2d(root: Path, shared: Path) -> None:
    for sub in ("images", "masks"):
        (root / sub).mkdir(parents=True)
    for image in sorted((shared / "kvasir_seg_2d" / "images").iterdir())[:2]:
        (root / "images" / image.name).symlink_to(image)
        (root / "masks" / f"{image.stem}.png").symlink_to(shared / "kvasir_seg_2d" / "masks" / f"{image.stem}.png")


def _folder2d_duplicate(root: Path) -> None:
    first = sorted((root / "images").iterdir())[0]
    (root / "images" / f"zz{first.suffix}").symlink_to(first)
    (root / "masks" / "zz.png").symlink_to(root / "masks" / f"{first.stem}.png")


def _sammed2d(root: Path, shared: Path) -> None:
    root.mkdir()
    for entry in (shared / "sammed2d_ct_2d").iterdir():
        (root / entry.name).symlink_to(entry)


def _dicom(root: Path, shared: Path) -> None:
    volume = sitk.ReadImage(str(shared / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"))[:, :, :4]
    label = sitk.ReadImage(str(shared / "hippocampus_mri" / "labelsTr" / "hippocampus_001.nii.gz"))[:, :, :4]
    for index, case in enumerate(("case_a", "case_b")):
        write_series(sitk.Cast(volume, sitk.sitkInt16), root / case / "image", f"1.2.826.0.1.3680043.2.1125.{index}")
        sitk.WriteImage(label, str(root / case / "label.nii.gz"))


Builder = Callable[[Path, Path], None]
#: layout -> (write the dataset, add a second name for one of its cases, or None)
LAYOUT_CASES: dict[str, tuple[Builder, Callable[[Path], None] | None]] = {
    "msd": (_msd, _msd_duplicate),
    "npz": (lambda root, shared: _hippo_npz(root, shared, HIPPO[:2]) and None,
            lambda root: (root / "group").mkdir() or (root / "group" / "x.npz").symlink_to(root / "MR_Hippo_001.npz")),
    "camus": (lambda root, shared: write_camus(root), lambda root: (root / "patient0009").symlink_to("patient0001")),
    "sunseg": (lambda root, shared: write_sunseg_tree(root),
               lambda root: (root / "TestEasyDataset" / "Alias").symlink_to("Seen")),
    "folder2d": (_folder2d, _folder2d_duplicate),
    "sammed2d": (_sammed2d, None),
    "dicom": (_dicom, lambda root: (root / "case_c").symlink_to("case_a")),
}


#: layouts that look into the sub-folders of the dataset folder (the others read fixed folders only)
WALKS_FOLDERS = {"npz", "camus", "sunseg", "dicom"}


@pytest.mark.parametrize("layout", sorted(LAYOUT_CASES))
def test_every_layout_lists_a_case_once_through_links(tmp_path, shared_data, layout):
    build, duplicate = LAYOUT_CASES[layout]
    root = tmp_path / layout
    build(root, shared_data)
    before, warned = _listed(layout, root)
    assert before and not warned
    (root / "selfdir").symlink_to(".")
    deeper = next((p for p in sorted(root.rglob("*")) if p.is_dir() and not p.is_symlink()), None)
    if deeper is not None:
        (deeper / "up").symlink_to("..")
    if duplicate is not None:
        duplicate(root)
    after, warned = _listed(layout, root)
    assert after == before, "each case once, under the name it has without the links"
    if layout in WALKS_FOLDERS:
        assert any("selfdir -> . leads back to" in w and "(a link loop)" in w for w in warned), warned
    if duplicate is not None:
        assert any(re.search(r"reaches \d case\(s\) already listed .*; each is counted once", w) for w in warned), \
            warned


# ------------------------------------------------------------ loops
def test_link_loop_is_called_a_loop_when_listing_loading_and_running(tmp_path, shared_data, capsys):
    root = tmp_path / "msd"
    _msd(root, shared_data)
    (root / "dataset.json").write_text((shared_data / "hippocampus_mri" / "dataset.json").read_text())
    for sub in ("imagesTr", "labelsTr"):
        (root / sub / "hippocampus_999.nii.gz").symlink_to("hippocampus_999.nii.gz")  # points at itself
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    layout = get_layout("msd")
    refs = layout.list_cases(root)
    assert [r.case_id for r in refs] == ["hippocampus_001", "hippocampus_004", "hippocampus_999"]
    with pytest.raises(DataError, match=r"hippocampus_999.nii.gz: image of case hippocampus_999: symbolic link "
                                        r"loop: hippocampus_999.nii.gz -> hippocampus_999.nii.gz leads back"):
        layout.load(refs[2])
    loop = root / "imagesTr" / "hippocampus_999.nii.gz"
    code = main(["info", str(loop)])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == (f"error: {loop}: symbolic link loop: hippocampus_999.nii.gz -> "
                                         "hippocampus_999.nii.gz leads back to itself and never reaches a file")
    with pytest.warns(DatasetWarning, match=r"/a -> b is a symbolic link loop"):
        get_layout("npz").list_cases(root)  # a folder loop among the cohort folders
    table = run_benchmark(root, tmp_path / "run", model="box")
    failed = table[table["case_id"] == "hippocampus_999"]
    assert (failed["status"] == "failed").all() and failed["error"].str.contains("symbolic link loop").all()
    assert (table[table["case_id"] != "hippocampus_999"]["status"] == "ok").all()
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["counts"]["cases_done"] == 3


def test_2d_study_counts_an_image_reached_twice_once(tmp_path, shared_data):
    from napari_medsam_eval.datasets import find_2d_samples

    root = tmp_path / "kvasir"
    _folder2d(root, shared_data)
    before = [s.image_id for s in find_2d_samples(root)]
    _folder2d_duplicate(root)
    with pytest.warns(DatasetWarning, match=r"zz\.jpg -> .* reaches 1 case\(s\) already listed"):
        after = [s.image_id for s in find_2d_samples(root)]
    assert after == before and len(after) == 2
