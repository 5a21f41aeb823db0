"""The Benchmark widget with the Ray executor: a local Ray started by the run (in the widget's worker thread),
progress case by case as with local workers, and the table of a local run."""
from __future__ import annotations

import pandas as pd
import pytest

from plugin_dock import dock
from napari_medsam_eval._widgets.common import _worker as worker_module
from napari_medsam_eval.benchmark import comparable, load_table, read_manifest, run_benchmark

from test_widgets_benchmark import _expected, _shown, _wait, _widget

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("one_ray_at_a_time")]
pytest.importorskip("ray")  # in the test extra: CI has it


def test_executor_choice_shows_the_address_field(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    widget = dock(viewer, "benchmark")
    assert widget.executor.value == "local" and widget.ray_address.native.isHidden()  # (the dock is not shown)
    assert widget.executor.native.toolTip() and widget.ray_address.native.toolTip()
    widget.executor.value = "ray"
    assert not widget.ray_address.native.isHidden() and widget.workers.max >= 64
    widget.dataset.value, widget.out_dir.value = tmp_path, tmp_path / "run"
    widget.ray_address.value = " 10.0.0.1:6379 "
    request = widget.request()
    assert request.executor == "ray" and request.ray_address == "10.0.0.1:6379"
    widget.executor.value = "local"
    assert widget.ray_address.native.isHidden() and widget.request().ray_address is None


def test_a_run_on_ray_shows_progress_and_the_local_table(make_napari_viewer, shared_data, tmp_path, qtbot,
                                                         monkeypatch):
    errors: list[str] = []
    monkeypatch.setattr(worker_module, "show_error", errors.append)
    viewer = make_napari_viewer()
    out, dataset = tmp_path / "run", shared_data / "hippocampus_mri"
    widget = _widget(viewer, dataset, out, model="box", limit=4)
    widget.executor.value = "ray"
    widget.workers.value = 2
    seen: list[tuple[int, tuple[int, int]]] = []  # (rows shown, (cases done, cases)) at each case done
    widget.rows_added.connect(lambda n: seen.append((n, widget.job.cases)))
    worker = widget.run()
    _wait(qtbot, worker, timeout=300_000)
    assert errors == [] and widget.last_status == "completed"
    assert seen == [(2, (1, 4)), (4, (2, 4)), (6, (3, 4)), (8, (4, 4))]  # case by case, as with local workers
    table = load_table(out)
    assert _shown(widget) == _expected(table)
    local = run_benchmark(dataset, tmp_path / "local", "box", limit=4, save_predictions=True)
    pd.testing.assert_frame_equal(comparable(table), comparable(local))
    assert read_manifest(out)["config"]["executor"] == "ray"
