"""A saved prediction reproduces its row (issue: why it failed, item 3): where two targets overlap, the
case's label map loses the earlier target's voxels, so that target's own mask is saved and its row names
it; `medsam-eval score` on a row's file gives the row's DSC and parts. The time columns add up."""
from __future__ import annotations

import numpy as np
import pytest

from napari_medsam_eval.benchmark.store import load_table
from napari_medsam_eval.cli import main
from napari_medsam_eval.cli.score import score_files
from napari_medsam_eval.evaluation.error_parts import PART_COLUMNS
from napari_medsam_eval.io import read_label


@pytest.fixture(scope="module")
def box_run(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("rows") / "run"
    assert main(["run", str(shared_data / "hippocampus_mri"), "--model", "box", "--limit", "2", "--save-predictions",
                 "--out", str(out), "--no-report", "--quiet"]) == 0
    return out, load_table(out)


def test_every_row_s_file_reproduces_its_row(box_run, shared_data):
    out, table = box_run
    own_files = 0
    for _, row in table.iterrows():
        prediction = out / row["prediction_path"]
        gt = shared_data / "hippocampus_mri" / "labelsTr" / f"{row['case_id']}.nii.gz"
        label = int(row["target_label"])
        scored = score_files(prediction, gt, labels=[label])[0]
        assert scored["dice"] == pytest.approx(row["dice"], abs=1e-12), (row["case_id"], label)
        assert [scored[c] for c in PART_COLUMNS] == pytest.approx([row[c] for c in PART_COLUMNS], abs=1e-12)
        assert scored["dominant_error"] == row["dominant_error"]
        own_files += ".label" in row["prediction_path"]
    # the box model's anterior and posterior boxes overlap: the anterior's own file was needed
    assert own_files >= 1
    combined = {row["prediction_path"] for _, row in table.iterrows() if ".label" not in row["prediction_path"]}
    for relative in combined:  # the case's label map is still the composed one, the later target winning
        assert set(np.unique(read_label(out / relative).array)) <= {0, 1, 2}


def test_the_time_columns_add_up(box_run):
    _, table = box_run
    parts = table["time_encoder_s"] + table["time_decoder_s"] + table["time_other_s"]
    assert np.allclose(parts, table["time_total_s"], atol=1e-9)
    assert (table["time_other_s"] >= 0).all()


def test_every_encoder_pass_is_counted_once():
    """A backend that embeds slices outside ``segment`` too (LiteMedSAM's video rule reads a frame's feature
    grid before its mask): the timer counts each ``embed`` pass once, those inside ``segment`` included, and
    the rest of the wall time is ``time_other_s``."""
    import time

    from napari_medsam_eval.benchmark.timing import SegmentTimer
    from napari_medsam_eval.models.base import SegmentResult

    class Backend:
        def embed(self, image, cache_key=None):
            time.sleep(0.02)
            return "embedding", 0.5  # the seconds the backend says the pass took

        def feature_grid(self, image):
            return self.embed(image)[0]

        def segment(self, image, prompt, cache_key=None):
            _, seconds = self.embed(image)
            return SegmentResult(mask=np.zeros((2, 2), bool), timings={"encoder": seconds, "decoder": 0.25})

    backend = Backend()
    with SegmentTimer(backend) as timer:
        for _ in range(3):
            backend.feature_grid(None)  # outside segment: counted
            backend.segment(None, None)  # its pass: counted once, not twice
    times = timer.columns()
    assert times["time_encoder_s"] == pytest.approx(6 * 0.5) and times["time_decoder_s"] == pytest.approx(3 * 0.25)
    assert times["time_other_s"] == pytest.approx(max(0.0, times["time_total_s"] - 3.75))
    assert "embed" not in backend.__dict__ and "segment" not in backend.__dict__  # the wrappers are gone
