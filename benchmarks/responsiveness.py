"""How long the viewer freezes while the widgets work, against an idle viewer measured in the same run.

The GUI tests assert *why* the viewer stays responsive (the heavy work runs on worker
threads, the GUI work lands in separate turns of the event loop: ``tests/gui_probe.py``);
the freeze times themselves are a speed figure, so they live here. A 16 ms QTimer ticks
on the GUI thread; the largest interval between two ticks is the longest the viewer was
frozen. Measured, in a real viewer (Xvfb), widgets docked from the Plugins menu:

* baseline: the idle viewer (Benchmark and Compare docked, nothing running), 3 s;
* opening benchmark rows of a box-baseline run over 3 hippocampus cases (the first row
  in a fresh viewer adds its layers; the next ones reuse them);
* a LiteMedSAM benchmark run over 2 hippocampus cases (rows arriving, the bar moving
  per slice), and how long Cancel takes to end it.

Prints the CPU, each largest gap, and its ratio to the idle baseline's.

    python benchmarks/responsiveness.py [--shared-data DIR]

About 3 minutes on two cores. Starts its own Xvfb when there is no display.
"""
from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "scripts"))
from _machine import cpu_line  # noqa: E402
from screenshots import on_display  # noqa: E402

PLUGIN = "napari-medsam-eval"


class TimerGaps:
    """A 16 ms QTimer on the GUI thread; :attr:`max_gap` is the largest interval between two ticks."""

    def __init__(self) -> None:
        from qtpy.QtCore import QTimer

        self.ticks: list[float] = []
        self.timer = QTimer()
        self.timer.setInterval(16)
        self.timer.timeout.connect(lambda: self.ticks.append(time.perf_counter()))

    def __enter__(self) -> "TimerGaps":
        gc.collect()  # a full collection would stop every thread for a third of a second, whoever caused it
        self.ticks = [time.perf_counter()]
        self.timer.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.timer.stop()
        self.ticks.append(time.perf_counter())

    @property
    def max_gap(self) -> float:
        return float(np.diff(self.ticks).max())


def process_until(condition: Callable[[], bool], timeout_s: float = 1800) -> None:
    from qtpy.QtWidgets import QApplication

    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError("timed out")
        QApplication.processEvents()
        time.sleep(0.005)


def finished(worker: Any) -> bool:
    from superqt.utils._qthreading import WorkerBase

    return worker not in WorkerBase._worker_set


def measure(shared: Path) -> list[tuple[str, float, str]]:
    import napari
    from napari.layers import Labels

    from napari_medsam_eval.benchmark import CaseStep, run_benchmark
    import napari_medsam_eval.models.litemedsam  # noqa: F401 - torch's one-time import before the viewer

    out = Path(tempfile.mkdtemp(prefix="responsiveness_"))
    run_benchmark(shared / "hippocampus_mri", out / "box_run", model="box", limit=3, save_predictions=True)
    Labels(np.zeros((2, 4, 4), np.uint8))  # napari's one-time Labels set-up (JIT), not a widget's doing
    viewer = napari.Viewer()
    viewer.window._qt_window.resize(1600, 1000)
    _, bench = viewer.window.add_plugin_dock_widget(PLUGIN, "Benchmark")
    viewer.window.add_plugin_dock_widget(PLUGIN, "Compare / failure analysis")
    results: list[tuple[str, float, str]] = []
    with TimerGaps() as idle:
        process_until(lambda: time.perf_counter() - idle.ticks[0] > 3.0)
    results.append(("idle viewer (baseline)", idle.max_gap, ""))

    bench.out_dir.value = out / "box_run"
    process_until(lambda: bench.results.table.rowCount() == 6)
    rows = sorted((bench.results.row_at(i) for i in range(6)), key=lambda r: (r["case_id"], -int(r["target_label"])))
    for number, row in enumerate(rows[::2] + [rows[1]]):
        with TimerGaps() as gaps:
            worker = bench.open_row(row)
            process_until(lambda: finished(worker))
            end = time.perf_counter() + 0.3
            process_until(lambda: time.perf_counter() > end)  # the canvas and plots repaint
        what = "first row into a fresh viewer (adds its layers)" if number == 0 else f"row {number + 1} (reuses them)"
        results.append((f"opening a row: {what}", gaps.max_gap, ""))

    bench.dataset.value = shared / "hippocampus_mri"
    bench.out_dir.value = out / "litemedsam_run"
    bench.model.value = "litemedsam"
    bench.limit.value = 2
    steps: list[Any] = []
    with TimerGaps() as gaps:
        worker = bench.run()
        worker.yielded.connect(steps.append)

        def second_case_going() -> bool:
            cases = [s for s in steps if isinstance(s, CaseStep)]
            return len({s.case_id for s in cases}) >= 2 and cases[-1].done >= 3
        process_until(lambda: second_case_going() or finished(worker))
    results.append(("a LiteMedSAM run (rows arriving, the bar per slice)", gaps.max_gap, ""))
    start = time.perf_counter()
    bench.cancel()
    process_until(lambda: finished(worker))
    results.append(("Cancel until the run has ended", time.perf_counter() - start, "(not a gap: the time to stop)"))
    viewer.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args(argv)
    results: list[tuple[str, float, str]] = []
    on_display(lambda: results.extend(measure(args.shared_data)))
    print(cpu_line())
    baseline = results[0][1]
    print(f"{'what':58s} {'largest gap':>12s} {'x idle':>7s}")
    for what, seconds, note in results:
        ratio = "" if note else f"{seconds / baseline:7.1f}"
        print(f"{what:58s} {seconds:10.3f} s {ratio:>7s} {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
