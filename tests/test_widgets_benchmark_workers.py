"""The Benchmark dock says when the machine gives a run fewer workers than asked, in the words the command prints
(``workers: 2 asked, 1 used (...)``), while the run goes."""
from __future__ import annotations

import pytest
from superqt.utils._qthreading import WorkerBase

from plugin_dock import dock
from napari_medsam_eval.benchmark import local_executor

pytestmark = pytest.mark.gui


def test_a_capped_run_says_so_in_the_docks_status(make_napari_viewer, shared_data, tmp_path, qtbot, monkeypatch):
    # memory for one worker only (the reserve kept free, and one worker's share)
    monkeypatch.setattr(local_executor, "available_memory",
                        lambda: local_executor.RESERVED_MEMORY_BYTES + local_executor.WORKER_MEMORY_BYTES)
    monkeypatch.setattr(local_executor, "usable_cores", lambda: 2)
    viewer = make_napari_viewer()
    widget = dock(viewer, "benchmark")
    widget.dataset.value, widget.out_dir.value = shared_data / "hippocampus_mri", tmp_path / "run"
    widget.model.value, widget.limit.value = "box", 2
    widget.workers.max = 2
    widget.workers.value = 2
    worker = widget.run()
    assert worker is not None
    said = widget.status.value
    assert "workers: 2 asked, 1 used" in said and "GB memory available" in said
    qtbot.waitUntil(lambda: worker not in WorkerBase._worker_set, timeout=300_000)
    assert widget.last_status == "completed"
