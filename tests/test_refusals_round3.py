"""Issue 67, third round of "nothing silently wrong": what a dataset declares is obeyed or refused, hostile files
cost nothing, and internal errors end in one line naming the input.

Each test below failed on main 5e84dbe (an exit 0 scoring the wrong regions, a RecursionError, a MemoryError,
an IndexError, a misleading message) and asserts the one-line refusal now given.
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from napari_medsam_eval.api import read_case
from napari_medsam_eval.cli import main
from napari_medsam_eval.core.errors import MedsamEvalError

HIPPO = ("hippocampus_001", "hippocampus_003")


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in "\n".join(err) and "internal error" not in "\n".join(err), err
    return errors[0]


# ------------------------------------------------------------------------------------------------ dataset.json
def _msd(tmp_path: Path, shared: Path, dataset_json: str | None) -> Path:
    """A two-case MSD folder (links to the shared hippocampus files) with ``dataset_json`` as its dataset.json."""
    root = tmp_path / "msd"
    for folder in ("imagesTr", "labelsTr"):
        (root / folder).mkdir(parents=True)
        for case in HIPPO:
            (root / folder / f"{case}.nii.gz").symlink_to(shared / "hippocampus_mri" / folder / f"{case}.nii.gz")
    if dataset_json is not None:
        (root / "dataset.json").write_text(dataset_json)
    return root


BAD_DATASET_JSON = {
    "negative": ('{"labels": {"background": 0, "whole": [1, -2]}}', "'labels' entry 'whole': [1, -2]"),
    "non-integer": ('{"labels": {"background": 0, "core": [2.5]}}', "'labels' entry 'core': [2.5]"),
    "string in a region": ('{"labels": {"background": 0, "whole": [1, "2"]}}', "'labels' entry 'whole': [1, \"2\"]"),
    "nested list": ('{"labels": {"background": 0, "whole": [1, [2]]}}', "'labels' entry 'whole': [1, [2]]"),
    "syntax error": ('{"labels": {"background": 0, "whole": [1, 2],}}', "is not valid JSON"),
    "a JSON list": ('[{"labels": {"1": "anterior"}}]', "holds a JSON list, not an object"),
    "negative single": ('{"labels": {"background": 0, "anterior": -1}}', "'labels' entry 'anterior': -1"),
}


@pytest.mark.parametrize("kind", list(BAD_DATASET_JSON))
def test_a_dataset_json_it_cannot_obey_refuses_the_run_info_and_the_api(tmp_path, shared_data, capsys, kind):
    text, words = BAD_DATASET_JSON[kind]
    root = _msd(tmp_path, shared_data, text)
    out = tmp_path / "run"
    assert main(["run", str(root), "--model", "box", "--out", str(out), "--quiet", "--no-report"]) == 2
    line = _one_line_error(capsys)
    assert str(root / "dataset.json") in line and words in line, line
    assert not out.exists()  # refused before any case: nothing scored as label_1 / label_2
    image = root / "imagesTr" / f"{HIPPO[0]}.nii.gz"
    assert main(["info", str(image)]) == 2
    line = _one_line_error(capsys)
    assert str(root / "dataset.json") in line and words in line, line
    with pytest.raises(MedsamEvalError, match="dataset.json") as refused:
        read_case(image, root / "labelsTr" / f"{HIPPO[0]}.nii.gz")
    assert words in str(refused.value)


def test_a_dataset_json_declaring_regions_is_obeyed(tmp_path, shared_data):
    """The same folder with well-formed regions: the declared regions are the targets, not label_1 / label_2."""
    from napari_medsam_eval.datasets import resolve_layout

    root = _msd(tmp_path, shared_data, '{"labels": {"background": 0, "whole": [1, 2], "back": [2]}}')
    layout = resolve_layout(root, None)
    assert [t.text() for t in layout.dataset_targets(root)] == ["whole=1,2", "back=2"]
    root.joinpath("dataset.json").unlink()
    assert layout.dataset_targets(root) is None  # no file: no error, nothing declared
