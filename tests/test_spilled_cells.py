"""Issue 67: a lesion target's long cells (prompts, stops, lesions) kept in files of their own, streamed.

A row of a target taken lesion by lesion held its lesions' prompts, stops and records as JSON text in the
row (about 1 kB a lesion), and a run held them as Python objects and text several times over: 20,000
lesions added 178 MB. Now each cell longer than a spreadsheet cell goes, item by item, to ``records/``
and the row holds a reference; a run's table reads back as it did, and a resume redoes a case whose file
is missing or changed. The volumes are synthetic (small cubes apart, the weight-free ``box`` model).
"""
from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from napari_medsam_eval.benchmark import run_benchmark, spilled_cells
from napari_medsam_eval.benchmark.files import RECORDS_DIR, ROWS_FILE
from napari_medsam_eval.benchmark.lesion_table import row_lesions
from napari_medsam_eval.benchmark.spilled_cells import ListCell, cell_reference, resolve_cell
from napari_medsam_eval.benchmark.store import load_table, read_rows
from napari_medsam_eval.core.errors import DataError
from napari_medsam_eval.core.targets import parse_targets
from napari_medsam_eval.datasets import detect_layout
from napari_medsam_eval.protocols import build_protocol

SHAPE = (8, 128, 128)
LESION = ["lesion=1:lesions"]


def cubes_case(folder: Path, count: int, seed: int = 0) -> Path:
    """``folder/CT_cubes.npz``: ``count`` 2x2x2 cubes on a grid of 4 (never touching) in a uint8 volume."""
    rng = np.random.default_rng(seed)
    z, y, x = SHAPE
    slots = np.stack(np.meshgrid(np.arange(0, z - 2, 4), np.arange(0, y - 2, 4), np.arange(0, x - 2, 4),
                                 indexing="ij"), axis=-1).reshape(-1, 3)
    label = np.zeros(SHAPE, dtype=np.uint8)
    for cz, cy, cx in slots[rng.choice(len(slots), count, replace=False)]:
        label[cz:cz + 2, cy:cy + 2, cx:cx + 2] = 1
    folder.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(folder / "CT_cubes.npz", imgs=(rng.integers(0, 60, SHAPE) + label * 150).astype(np.uint8),
                        gts=label, spacing=np.array([1.0, 1.0, 1.0]))
    return folder


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path]:
    """The same 300-lesion case run with cells kept in the row (a limit no cell reaches) and as issued."""
    root = tmp_path_factory.mktemp("spilled")
    data = cubes_case(root / "data", 300)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spilled_cells, "CELL_CHARACTERS", 10 ** 9)
        run_benchmark(data, root / "inline", "box", targets=LESION)
    run_benchmark(data, root / "spilled", "box", targets=LESION)
    return root / "inline", root / "spilled"


def test_long_cells_go_to_files_and_the_table_reads_as_when_they_were_in_the_row(two_runs):
    inline, spilled = two_runs
    row = read_rows(spilled / ROWS_FILE)[0]
    for column in ("prompt", "stops", "lesions"):
        reference = cell_reference(row[column])
        assert reference is not None, f"{column} is in the row ({len(row[column])} characters)"
        assert reference["file"].startswith(RECORDS_DIR + "/") and (spilled / reference["file"]).is_file()
    assert (spilled / ROWS_FILE).stat().st_size < 8_000 < (inline / ROWS_FILE).stat().st_size / 10
    assert json.loads(resolve_cell(row["lesions"], spilled))[0]["source"] == "true"
    a, b = load_table(inline), load_table(spilled)
    assert a.iloc[0]["lesions_true"] == 300 and a.iloc[0]["status"] == "ok"
    for column in ("prompt", "stops", "lesions", "dice", "nsd", "lesions_found", "lesion_dice"):
        assert a.iloc[0][column] == b.iloc[0][column], column
    assert (inline / "lesions.csv").read_text() == (spilled / "lesions.csv").read_text()
    assert len(pd.read_csv(spilled / "lesions.csv").query("source == 'true'")) == 300
    assert cell_reference(pd.read_csv(spilled / "results.csv").iloc[0]["lesions"]) is not None


def test_a_row_lesions_kept_in_a_file_are_refused_without_the_run_folder(two_runs):
    _inline, spilled = two_runs
    row = read_rows(spilled / ROWS_FILE)[0]
    with pytest.raises(DataError, match=r"records/.*lesions\.jsonl.*run folder"):
        row_lesions(row)
    assert len(row_lesions(row, spilled)) == 300 + row["lesions_false"] + row["lesions_found"]


def test_a_missing_or_changed_cell_file_is_named_and_a_resume_computes_the_case_again(two_runs, tmp_path):
    import shutil

    _inline, spilled = two_runs
    run = tmp_path / "run"
    shutil.copytree(spilled, run)
    files = sorted((run / RECORDS_DIR).iterdir())
    lesions = next(f for f in files if f.name.endswith(".lesions.jsonl"))
    lesions.write_bytes(lesions.read_bytes().replace(b'"status":"missed"', b'"status":"found"', 1))
    with pytest.raises(DataError, match="lesions.jsonl.*changed since the run wrote it"):
        load_table(run)
    lesions.unlink()
    with pytest.raises(DataError, match="lesions.jsonl"):
        load_table(run)
    table = run_benchmark(spilled.parent / "data", run, "box", targets=LESION, resume=True)
    assert lesions.is_file() and table.iloc[0]["lesions_true"] == 300
    assert load_table(run).iloc[0]["lesions"] == load_table(spilled).iloc[0]["lesions"]


def test_a_cell_is_its_json_list_in_the_row_or_in_its_file(tmp_path):
    items = [{"n": n, "text": "x" * 20} for n in range(50)]
    short = ListCell(tmp_path, f"{RECORDS_DIR}/a.jsonl", json.dumps, ", ", limit=10 ** 6)
    long = ListCell(tmp_path, f"{RECORDS_DIR}/b.jsonl", json.dumps, ", ", limit=200)
    for item in items:
        short.add(item)
        long.add(item)
    assert short.text() == json.dumps(items)
    reference = long.text()
    assert cell_reference(reference)["items"] == 50 and resolve_cell(reference, tmp_path) == json.dumps(items)
    assert sorted(p.name for p in (tmp_path / RECORDS_DIR).iterdir()) == ["b.jsonl"]
    dropped = ListCell(tmp_path, f"{RECORDS_DIR}/c.jsonl", json.dumps, limit=200)
    for item in items:
        dropped.add(item)
    dropped.discard()  # a failed row keeps no half list
    assert sorted(p.name for p in (tmp_path / RECORDS_DIR).iterdir()) == ["b.jsonl"]
    assert ListCell(None, f"{RECORDS_DIR}/d.jsonl", json.dumps, limit=2).text() == "[]"
    with pytest.raises(DataError, match="not a file of the run's records/"):
        resolve_cell(json.dumps({"file": "../x.jsonl", "items": 1, "separator": ",", "sha256": ""}), tmp_path)


def test_lesion_prompts_one_at_a_time_are_the_protocols_prompts(tmp_path):
    layout = detect_layout(cubes_case(tmp_path / "data", 40))
    case = layout.load(layout.list_cases(tmp_path / "data")[0])
    target = parse_targets(LESION, case.label_names)[0]
    protocol = build_protocol("medsam2")
    whole = protocol.prompts(case, targets=[target])
    streamed = list(protocol.lesion_prompts(case, target))
    assert len(whole) == 40 and [p.to_dict() for p in streamed] == [p.to_dict() for p in whole]
    assert all(p.target == target for p in streamed)


def _run_peak(tmp_path: Path, count: int) -> int:
    data = cubes_case(tmp_path / f"data{count}", count)
    tracemalloc.start()
    try:
        table = run_benchmark(data, tmp_path / f"run{count}", "box", targets=LESION)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert table.iloc[0]["lesions_true"] == count
    return peak


def test_a_runs_memory_does_not_grow_with_its_lesion_count(tmp_path):
    """Traced peak of a whole run (numpy's buffers too) at 150 and at 2,000 lesions of the same case: the
    records held before added 5.9 kB a lesion here; what is left (about 1.4 kB a lesion up to 2,000, 0.9
    above: Python's free lists filling, scipy's box of each lesion) stays under half of that."""
    run_benchmark(cubes_case(tmp_path / "warm", 5), tmp_path / "warm_run", "box", targets=LESION)
    few, many = _run_peak(tmp_path, 150), _run_peak(tmp_path, 2000)
    assert many - few < 1850 * 3 * 1024, f"{(many - few) / 1850:.0f} bytes a lesion more"


def test_the_official_loop_gives_its_masks_one_at_a_time(monkeypatch):
    """``litemedsam-3dbox`` on a lesion target runs every lesion's box in one official loop: its masks come one
    at a time from the loop's label map (they were a list, a full-size mask a box), and the run unites them."""
    from collections.abc import Iterator

    from napari_medsam_eval.core.prompt import Prompt
    from napari_medsam_eval.propagation import segment

    count, shape = 40, (8, 256, 256)
    label = np.zeros(shape, dtype=np.uint8)
    for value in range(1, count + 1):
        label[2:5, 6 * value:6 * value + 4, 10:14] = value
    monkeypatch.setattr(segment, "propagate_official_litemedsam", lambda _backend, _image, boxes, **_: label)
    prompts = [Prompt(target_label=1, slice_index=3, boxes=[(10.0, 6.0 * v, 13.0, 6.0 * v + 3)],
                      info={"box_3d": [10, 6 * v, 2, 13, 6 * v + 3, 5]}) for v in range(1, count + 1)]
    masks = segment.segment_official(None, np.zeros(shape, dtype=np.uint8), prompts)
    assert isinstance(masks, Iterator)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        union = next(masks)
        for mask in masks:
            assert np.count_nonzero(mask) == 3 * 4 * 4  # (its box: compared whole below, no temporary here)
            union |= mask
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert np.array_equal(union, label > 0)
    # the union, a mask and the next as it is made (a list held 40)
    assert peak < 5 * union.nbytes, f"{peak / union.nbytes:.1f} masks held at once"
