"""How long the viewer freezes while the widgets work, against an idle viewer measured in the same run.

The GUI tests assert *why* the viewer stays responsive (the heavy work runs on worker
threads, the GUI work lands in separate turns of the event loop: ``tests/gui_probe.py``);
the freeze times themselves are a speed figure, so they live here. A 16 ms QTimer ticks
on the GUI thread; the largest interval between two ticks is the longest the viewer was
frozen. Measured, in a real viewer (Xvfb), widgets docked from the Plugins menu:

* baseline: the idle viewer (Benchmark and Compare docked and painted, nothing running), 3 s;
* a result landing: a LiteMedSAM propagation in the Segment dock on the sample CT
  phantom (Compare docked), until the prediction layer is written and Compare has
  updated (overlay, DSC, per-slice plot); the first result adds the layers, the second
  (another target) replaces them;
* a run folder of 2,000 rows (1,000 synthetic cases written through the result store)
  loaded into the Benchmark dock, until the table, the summary and the plot show them;
* opening benchmark rows of a box-baseline run over 3 hippocampus cases (the first row
  in a fresh viewer adds its layers; the next ones reuse them);
* the end of a benchmark run: a box-baseline run over 6 hippocampus cases, from Run until
  the summary and plot show the last rows;
* a LiteMedSAM benchmark run over 2 hippocampus cases (rows arriving, the bar moving
  per slice), and how long Cancel takes to end it.

First, in a fresh Python process of its own (:mod:`_first_use`): the first Open Sample, the first dock, the
first file read, the first benchmark row and the first pair of two runs, each a user's first, the first three
run from the event loop as napari's menu runs them (``--profile`` profiles those too).

Prints the CPU, the load average, each largest gap and its ratio to the idle baseline's,
and the same as a Markdown table. ``--profile`` adds, per case, the functions that took
the most time on the GUI thread (cProfile, cumulative).

    python benchmarks/responsiveness.py [--shared-data DIR] [--profile] [--first-use-only]

About a minute on two cores. Starts its own Xvfb when there is no display.
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "scripts"))
from _machine import cpu_line  # noqa: E402
from screenshots import on_display  # noqa: E402

PLUGIN = "napari-medsam-eval"
#: rows of the big run folder (two targets per synthetic case)
BIG_ROWS = 2000
#: a freeze the issue allows, seconds
TARGET_S = 0.2


class FreezeSampler:
    """While the GUI thread is late for a tick by more than ``late_s``, sample its Python stack every
    ``every_s`` (a thread of this script): :attr:`samples` counts the stacks seen during freezes, so a
    freeze's cause shows whether it is Python on the GUI thread or the GUI thread waiting (the stack
    then ends in ``processEvents``: Qt's own work, or the GIL held by a worker)."""

    def __init__(self, gaps: "TimerGaps", late_s: float = 0.1, every_s: float = 0.02) -> None:
        self.gaps, self.late_s, self.every_s = gaps, late_s, every_s
        self.samples: dict[str, int] = {}
        self._stop = threading.Event()
        self._main = threading.main_thread().ident
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            ticks = self.gaps.ticks
            if ticks and time.perf_counter() - ticks[-1] > self.late_s:
                frame = sys._current_frames().get(self._main)
                if frame is None:
                    continue
                stack = [f"{Path(f.filename).parent.name}/{Path(f.filename).name}:{f.lineno} {f.name}"
                         for f in traceback.extract_stack(frame)[-7:]]
                key = "\n      ".join(stack)
                self.samples[key] = self.samples.get(key, 0) + 1

    def report(self, top: int = 6) -> str:
        total = sum(self.samples.values())
        lines = [f"  {total} samples ({self.every_s * 1000:.0f} ms apart) while the GUI thread was "
                 f"over {self.late_s * 1000:.0f} ms late; the most frequent stacks (innermost last):"]
        for key, count in sorted(self.samples.items(), key=lambda item: -item[1])[:top]:
            lines.append(f"  {count:4d} x {key}")
        return "\n".join(lines)


class TimerGaps:
    """A 16 ms QTimer on the GUI thread; :attr:`max_gap` is the largest interval between two ticks.

    ``profile``: cProfile the GUI thread while the timer runs and sample its stack during freezes
    (:attr:`stats`)."""

    def __init__(self, profile: bool = False) -> None:
        from qtpy.QtCore import QTimer

        self.ticks: list[float] = []
        self.timer = QTimer()
        self.timer.setInterval(16)
        self.timer.timeout.connect(lambda: self.ticks.append(time.perf_counter()))
        self.profiler = cProfile.Profile() if profile else None
        self.sampler = FreezeSampler(self) if profile else None
        self.stats = ""

    def __enter__(self) -> "TimerGaps":
        gc.collect()  # a full collection would stop every thread for a third of a second, whoever caused it
        self.ticks = [time.perf_counter()]
        self.timer.start()
        if self.profiler is not None:
            self.sampler.start()
            self.profiler.enable()
        return self

    def __exit__(self, *_exc: Any) -> None:
        if self.profiler is not None:
            self.profiler.disable()
            out = io.StringIO()
            pstats.Stats(self.profiler, stream=out).sort_stats("cumulative").print_stats(28)
            self.sampler.stop()
            at = int(np.argmax(np.diff(self.ticks)))
            self.stats = (f"largest gap {self.max_gap * 1000:.0f} ms, {self.ticks[at] - self.ticks[0]:.2f} s after the "
                          f"start of {self.ticks[-1] - self.ticks[0]:.2f} s\n{self.sampler.report()}\n{out.getvalue()}")
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


def settle(seconds: float = 0.3) -> None:
    """Let the canvas and the plots repaint."""
    end = time.perf_counter() + seconds
    process_until(lambda: time.perf_counter() > end)


def finished(worker: Any) -> bool:
    from superqt.utils._qthreading import WorkerBase

    return worker not in WorkerBase._worker_set


def big_run_folder(box_run: Path, out: Path, rows: int = BIG_ROWS) -> Path:
    """A run folder of ``rows`` rows: the box run's rows copied to synthetic case names and scores, written
    as the runner writes them (whole cases, :func:`~napari_medsam_eval.benchmark.store.encode_case`)."""
    from napari_medsam_eval.benchmark import ResultStore
    from napari_medsam_eval.benchmark.store import encode_case

    by_case: dict[str, list[dict[str, Any]]] = {}
    for row in ResultStore(box_run).recover(truncate=False):
        by_case.setdefault(str(row["case_id"]), []).append(row)
    cases = list(by_case.values())
    rng = np.random.default_rng(0)
    blocks: list[list[dict[str, Any]]] = []
    while sum(len(block) for block in blocks) < rows:
        case = cases[len(blocks) % len(cases)]
        blocks.append([{**row, "case_id": f"synthetic_{len(blocks):04d}", "dice": float(rng.uniform(0.5, 0.95)),
                        "nsd": float(rng.uniform(0.5, 1.0))} for row in case])
    out.mkdir(parents=True, exist_ok=True)
    ResultStore(out).path.write_bytes(b"".join(encode_case(block) for block in blocks))
    return out


def measure(shared: Path, profile: bool) -> list[tuple[str, float, str, str]]:
    import napari
    from napari.layers import Labels

    from napari_medsam_eval.benchmark import CaseStep, run_benchmark
    from napari_medsam_eval.session.session import Session

    # torch's one-time import and the model, before the viewer
    backend = Session.build_backend("litemedsam", device="cpu")

    out = Path(tempfile.mkdtemp(prefix="responsiveness_"))
    run_benchmark(shared / "hippocampus_mri", out / "box_run", model="box", limit=3, save_predictions=True)
    big = big_run_folder(out / "box_run", out / "big_run")
    Labels(np.zeros((2, 4, 4), np.uint8))  # napari's one-time Labels set-up (JIT), not a widget's doing
    viewer = napari.Viewer()
    viewer.window._qt_window.resize(1600, 1000)
    _, bench = viewer.window.add_plugin_dock_widget(PLUGIN, "Benchmark")
    _, compare = viewer.window.add_plugin_dock_widget(PLUGIN, "Compare / failure analysis")
    results: list[tuple[str, float, str, str]] = []  # what, seconds, note, profile

    def record(what: str, gaps: TimerGaps, note: str = "") -> None:
        results.append((what, gaps.max_gap, note, gaps.stats))

    settle(2.0)  # the docks' first layout and paint, before the idle viewer is measured
    with TimerGaps() as idle:
        process_until(lambda: time.perf_counter() - idle.ticks[0] > 3.0)
    record("idle viewer (baseline)", idle)

    # (a) a result landing: prediction layer written, Compare updated
    _, segment = viewer.window.add_plugin_dock_widget(PLUGIN, "Segment")
    segment.set_backend(backend)
    viewer.open_sample(PLUGIN, "phantom_ct")
    settle(1.0)
    for number, target in enumerate((1, 2)):
        segment.target_label.value = target
        if segment.prompt_from_ground_truth() is None:
            raise RuntimeError(f"no prompt: {segment.status.value}")
        settle()
        with TimerGaps(profile) as gaps:
            worker = segment.propagate()
            process_until(lambda: finished(worker))
            process_until(lambda: compare.comparison is not None
                          and compare.status.value.startswith(f"label {target}:"), timeout_s=60)
            settle()
        what = "first, adds the layers" if number == 0 else "second, replaces them"
        record(f"a propagation's result lands ({what})", gaps)
    viewer.window.remove_dock_widget(segment.native)
    viewer.layers.clear()
    settle(1.0)

    # (d) a run folder of 2,000 rows
    with TimerGaps(profile) as gaps:
        bench.out_dir.value = big
        process_until(lambda: bench.results.table.rowCount() == BIG_ROWS and not bench.results.pending)
        settle()
    record(f"loading a run folder of {BIG_ROWS:,} rows", gaps)
    with TimerGaps(profile) as gaps:
        bench.out_dir.value = out / "box_run"
        process_until(lambda: bench.results.table.rowCount() == 6 and not bench.results.pending)
        settle()
    record(f"from {BIG_ROWS:,} rows back to a run of 6", gaps)

    # (c) opening rows
    rows = sorted((bench.results.row_at(i) for i in range(6)), key=lambda r: (r["case_id"], -int(r["target_label"])))
    for number, row in enumerate(rows[::2] + [rows[1]]):
        with TimerGaps(profile) as gaps:
            worker = bench.open_row(row)
            process_until(lambda: finished(worker))
            settle()
        what = "first row into a fresh viewer (adds its layers)" if number == 0 else f"row {number + 1} (reuses them)"
        record(f"opening a row: {what}", gaps)

    # (b) the end of a benchmark run
    bench.dataset.value = shared / "hippocampus_mri"
    bench.out_dir.value = out / "box_run_6"
    bench.model.value = "box"
    bench.limit.value = 6
    with TimerGaps(profile) as gaps:
        worker = bench.run()
        process_until(lambda: finished(worker))
        process_until(lambda: not bench.results.pending)
        settle()
    if bench.last_status != "completed":
        raise RuntimeError(f"the box run ended {bench.last_status}: {bench.status.value}")
    record("a box run of 6 cases, to its end (summary shown)", gaps)

    bench.out_dir.value = out / "litemedsam_run"
    bench.model.value = "litemedsam"
    bench.limit.value = 2
    steps: list[Any] = []
    with TimerGaps(profile) as gaps:
        worker = bench.run()
        worker.yielded.connect(steps.append)

        def second_case_going() -> bool:
            cases = [s for s in steps if isinstance(s, CaseStep)]
            return len({s.case_id for s in cases}) >= 2 and cases[-1].done >= 3
        process_until(lambda: second_case_going() or finished(worker))
    record("a LiteMedSAM run (rows arriving, the bar per slice)", gaps)
    start = time.perf_counter()
    bench.cancel()
    process_until(lambda: finished(worker))
    results.append(("Cancel until the run has ended", time.perf_counter() - start, "(not a gap: the time to stop)", ""))
    viewer.close()
    return results


def _first_use_process(shared: Path, *flags: str) -> tuple[list[list], str]:
    import json
    import subprocess

    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "_first_use.py"), "--shared-data", str(shared),
                           *flags], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the first-use measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def first_use(shared: Path, profile: bool = False) -> list[tuple[str, float, str, str]]:
    """The first uses (:mod:`_first_use`), each the largest gap of its own, in a fresh Python process (nothing
    loaded beforehand, as when a user starts napari); its idle baseline is that process's idle viewer. Beside each,
    napari's own cost of the same layers, measured in another fresh process (``_first_use.py --napari-own``), and
    ours above it (the target: at most :data:`OURS_ABOVE_NAPARI_S`). ``profile``: each case's GUI-thread profile."""
    ours, stderr = _first_use_process(shared, *(["--profile"] if profile else []))
    if profile:
        print(stderr, file=sys.stderr)
    own = dict(_first_use_process(shared, "--napari-own")[0])
    results = []
    for what, seconds in ours:
        if what in own and not what.startswith("idle"):
            above = seconds - own[what]
            beside = (f" [napari's own {own[what] * 1000:.0f} ms, ours {above * 1000:+.0f} ms: "
                      f"{'within' if above <= OURS_ABOVE_NAPARI_S else 'over'} {OURS_ABOVE_NAPARI_S * 1000:.0f}]")
            results.append((f"first use: {what}{beside}", seconds, "", ""))
        else:
            results.append((f"first use: {what}", seconds, "", ""))
    return results


#: what our code may add to a first use above napari's own cost of the same layers (issue 65)
OURS_ABOVE_NAPARI_S = 0.100


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--profile", action="store_true", help="print each case's GUI-thread profile")
    parser.add_argument("--first-use-only", action="store_true", help="measure the first uses only (a minute)")
    args = parser.parse_args(argv)
    results: list[tuple[str, float, str, str]] = []
    load_before = os.getloadavg()
    started = time.perf_counter()
    results.extend(first_use(args.shared_data, args.profile))  # first: in a fresh process of its own
    if not args.first_use_only:
        on_display(lambda: results.extend(measure(args.shared_data, args.profile)))
    load_after = os.getloadavg()
    if args.profile:
        for what, _seconds, _note, stats in results:
            if stats:
                print(f"\n=== {what}\n{stats}")
    print(cpu_line())
    print(f"load average (1, 5, 15 min) before {' '.join(f'{v:.2f}' for v in load_before)}, "
          f"after {' '.join(f'{v:.2f}' for v in load_after)}; {time.perf_counter() - started:.0f} s in all")
    baseline = results[0][1]  # the idle viewer of the first-use process
    print(f"{'what':62s} {'largest gap':>12s} {'x idle':>7s}")
    for what, seconds, note, _ in results:
        ratio = "" if note else f"{seconds / baseline:7.1f}"
        print(f"{what:62s} {seconds * 1000:9.0f} ms {ratio:>7s} {note}")
    print("\n| case | largest gap | x idle | under 200 ms |\n|---|---|---|---|")
    for what, seconds, note, _ in results:
        if note:
            print(f"| {what} | {seconds * 1000:.0f} ms {note} | - | - |")
        else:
            print(f"| {what} | {seconds * 1000:.0f} ms | {seconds / baseline:.1f} | "
                  f"{'yes' if seconds < TARGET_S else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
