"""A scripted clinician session in a real napari viewer, every widget docked from the Plugins menu.

What a user does in one sitting, through napari's plugin path
(``viewer.window.add_plugin_dock_widget``: each widget gets napari's proxy of the
viewer): open a DeepLesion CT, draw a box, segment the slice (twice, the same box),
Undo, Changes, propagate, correct a slice, undo twice, next object, compare, next worst
slice, prompt sensitivity (3 runs), benchmark 3 hippocampus cases, cancel, resume,
open 3 rows, a second run, two runs side by side, open a pair, then close the window
while a run is going. Exits 0 only when every step did what it should, and the run
folder the window was closed on has no temporary left behind and resumes to a
complete table. ``faulthandler`` is on: a crash prints where it happened.

``--short`` (``make test``'s session) keeps every kind of step but does less of each:
no prompt sensitivity, 2 hippocampus cases, one row opened, no second run or
two-runs pair; still docked from the Plugins menu, still closed during a run.

Qt binding: what ``QT_API`` names (qtpy's and napari's choice; PyQt5 when unset), printed
at the start. ``make test`` runs the short session under PyQt6 (the ``[pyqt6]`` extra:
``QT_API=pyqt6 python scripts/clinician_session.py --short``), ``make reproduce`` the whole one
under PyQt5.

    xvfb-run -a -s "-screen 0 1600x1000x24" python scripts/clinician_session.py [--short] [--shared-data DIR] [--out DIR]

Without a display the script starts its own Xvfb (``pyvirtualdisplay``). About
5 minutes on two CPU cores (LiteMedSAM on CPU), 2 with ``--short``.
"""
from __future__ import annotations

import argparse
import faulthandler
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from screenshots import WINDOW, on_display  # noqa: E402 - the display set-up, written once

PLUGIN = "napari-medsam-eval"
LESION = "CT_Lesion_000002_03_01_035-047.npz"


class SessionFailed(AssertionError):
    """A step did not do what a user expects."""


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SessionFailed(what)


def process(seconds: float = 0.2) -> None:
    from qtpy.QtWidgets import QApplication

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QApplication.processEvents()
        time.sleep(0.01)


def until(condition: Callable[[], bool], what: str, timeout_s: float = 900) -> None:
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            raise SessionFailed(f"timed out waiting for {what}")
        process(0.05)


def finished(worker: Any) -> bool:
    from superqt.utils._qthreading import WorkerBase

    return worker is None or worker not in WorkerBase._worker_set


def wait(worker: Any, what: str, widget: Any = None) -> None:
    """Until ``worker`` has finished (and ``widget`` is idle: a job started once a model has loaded)."""
    check(worker is not None, f"{what}: no job was started")
    until(lambda: finished(worker) and (widget is None or not widget.busy), what)
    process(0.2)


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def segment_steps(viewer: Any, shared: Path, out: Path, errors: list[str], short: bool) -> tuple[Any, Any]:
    """Open a CT, prompt, segment, undo, propagate, correct, undo, next object; returns (segment, compare)."""
    from napari_medsam_eval._widgets.common._layers import from_image_coords
    from napari_medsam_eval._widgets.common._prompt_layers import box_vertices
    from napari_medsam_eval.protocols.geometry import tight_box

    image, truth = viewer.open(str(shared / "deeplesion_ct_npz" / LESION), plugin=PLUGIN)
    _, segment = viewer.window.add_plugin_dock_widget(PLUGIN, "Segment")
    _, compare = viewer.window.add_plugin_dock_widget(PLUGIN, "Compare / failure analysis")
    process(0.5)
    check(segment.image_layer.value is image and segment.gt_layer.value is truth, "the Segment widget picks the CT")
    segment.prompt_log.log_drawn.value = True  # drawn prompts logged beside the protocol's, into the out folder
    segment.prompt_log.path.value = out / "prompt_log.csv"
    z = int(np.argmax((truth.data == 1).sum(axis=(1, 2))))
    boxes, _points = segment.new_prompt_layers()
    boxes.add_rectangles(from_image_coords(boxes, image, box_vertices(tight_box(truth.data[z] == 1), z)))
    viewer.dims.set_point(0, image.data_to_world([z, 0, 0])[0])
    say("segment slice (model loads first), twice with the same box")
    wait(segment.segment_slice(), "segment slice", segment)
    wait(segment.segment_slice(), "segment slice again", segment)
    prediction = viewer.layers[f"{image.name} prediction"]
    check((prediction.data[z] == 1).sum() > 20, "the slice was segmented")
    check(segment.objects.show_changes() is not None, "Changes after two identical attempts")
    check(segment.objects.undo() is not None, "Undo after two identical attempts")
    say("propagate")
    wait(segment.propagate(), "propagation", segment)
    check(len(np.unique(np.nonzero(prediction.data == 1)[0])) > 1, "the propagation reached other slices")
    worst = compare.next_worst()
    check(worst is not None, "Compare found a worst slice")
    say(f"correct slice {worst}")
    box = tight_box(truth.data[worst] == 1) if (truth.data[worst] == 1).any() else None
    if box is not None:
        boxes.data = []
        boxes.add_rectangles(from_image_coords(boxes, image, box_vertices(box, worst)))
        viewer.dims.set_point(0, image.data_to_world([worst, 0, 0])[0])
        wait(segment.correct_slice(), "correction", segment)
    segment.objects.undo()
    segment.objects.undo()
    segment.objects.step(+1)
    segment.objects.step(-1)
    check(compare.update_comparison() is not None, "Compare compares the prediction")
    if short:
        check(not errors, f"no error notifications: {errors}")
        return segment, compare
    say("prompt sensitivity, 3 runs")
    wait(segment.propagate(), "propagation before sensitivity", segment)
    compare.sensitivity.runs.value = 3
    worker = compare.sensitivity.start()
    check(worker is not None, f"prompt sensitivity starts ({compare.sensitivity.status.value})")
    wait(worker, "prompt sensitivity")
    check(compare.sensitivity.result is not None and compare.sensitivity.result.done == 3, "3 sensitivity runs")
    check(not errors, f"no error notifications: {errors}")
    return segment, compare


def cases_run(short: bool) -> int:
    """How many hippocampus cases each benchmark run of the session takes."""
    return 2 if short else 3


def benchmark_steps(viewer: Any, shared: Path, out: Path, compare: Any, errors: list[str], short: bool) -> Any:
    """Run 3 cases, cancel, resume, open 3 rows, a second run, two runs, open a pair; returns the widget.
    ``short``: 2 cases, one row, no second run."""
    from napari_medsam_eval.benchmark import CaseStep

    _, bench = viewer.window.add_plugin_dock_widget(PLUGIN, "Benchmark")
    bench.dataset.value = shared / "hippocampus_mri"
    bench.out_dir.value = out / "run_a"
    bench.model.value = "litemedsam"
    bench.limit.value = cases_run(short)
    bench.save_predictions.value = True
    say(f"benchmark {cases_run(short)} hippocampus cases, cancel in the second")
    steps: list[Any] = []
    worker = bench.run()
    worker.yielded.connect(steps.append)
    until(lambda: bench.results.table.rowCount() >= 2 and any(
        isinstance(s, CaseStep) and s.done >= 2 for s in steps[-3:]), "the second case to start")
    bench.cancel()
    wait(worker, "the cancelled run")
    check(bench.last_status == "cancelled", f"the run was cancelled ({bench.last_status})")
    say("resume")
    wait(bench.run(resume=True), "the resumed run")
    rows = 2 * cases_run(short)
    check(bench.last_status == "completed" and bench.results.table.rowCount() == rows, f"the run completed, {rows} rows")
    for line in range(1 if short else 3):
        row = bench.results.row_at(line)
        wait(bench.open_row(row), f"opening row {line}")
        until(lambda: compare.comparison is not None and str(row["case_id"]) in compare.status.value,
              f"Compare to compare row {line}", 60)
        for role in ("image", "ground_truth", "prediction"):
            check(role in bench.opened and bench.opened[role] in viewer.layers, f"row {line}: its {role} is shown")
    if short:
        check(not errors, f"no error notifications: {errors}")
        return bench
    say("a second run (box baseline) and the two runs side by side")
    bench.out_dir.value = out / "run_b"
    bench.model.value = "box"
    wait(bench.run(), "the second run")
    two = bench.two_runs
    wait(two.compare(out / "run_a", out / "run_b"), "pairing the two runs")
    check(two.pair is not None and len(two.pair.pairs) == 6, "6 pairs")
    wait(two.open_case(two.view.key_at(two.view.table, 0)), "opening a pair")  # the line a user double-clicks
    check("image" in two.opened and two.opened["image"] in viewer.layers, "the pair's case is shown")
    check(not errors, f"no error notifications: {errors}")
    return bench


def close_during_run(viewer: Any, segment: Any, bench: Any, out: Path) -> Path:
    """Start a run, segment a slice (its drawn-vs-protocol row is logged in a worker of its own) and
    close the window while they go; returns the run's folder."""
    from napari_medsam_eval.benchmark import CaseStep

    run = out / "closed_run"
    bench.out_dir.value = run
    bench.model.value = "litemedsam"
    steps: list[Any] = []
    worker = bench.run()
    worker.yielded.connect(steps.append)
    until(lambda: any(isinstance(s, CaseStep) and s.done >= 2 for s in steps), "the run to get going")
    check(segment.segment_slice() is not None, "a slice is segmented during the run")
    say("closing the window during the run and the segmentation")
    viewer.close()
    process(0.5)
    return run


def check_resumable(run: Path, dataset: Path, short: bool) -> None:
    """No temporary is left in ``run``, and ``medsam-eval run --resume`` completes it (3 cases, 6 rows; 2 and 4
    when ``short``)."""
    from napari_medsam_eval.benchmark import load_table
    from napari_medsam_eval.cli import main

    leftovers = sorted(p.name for p in run.glob(".*.tmp"))
    check(not leftovers, f"temporaries left in the run folder: {leftovers}")
    cases = cases_run(short)
    code = main(["run", str(dataset), "--resume", "--out", str(run), "--model", "litemedsam", "--limit", str(cases),
                 "--save-predictions", "--quiet", "--no-report"])
    check(code == 0, f"the run folder resumes (exit {code})")
    table = load_table(run)
    check(len(table) == 2 * cases and set(table["status"]) == {"ok"},
          f"the resumed run holds {2 * cases} ok rows ({len(table)})")


def session(shared: Path, out: Path, short: bool = False) -> None:
    import napari
    import qtpy
    from napari.utils import notifications

    say(f"Qt binding: {qtpy.API_NAME} {qtpy.PYQT_VERSION or qtpy.PYSIDE_VERSION} (Qt {qtpy.QT_VERSION})")  # QT_API picks it

    errors: list[str] = []
    notifications.notification_manager.notification_ready.connect(
        lambda n: errors.append(str(n.message)) if n.severity >= notifications.NotificationSeverity.ERROR else None)
    viewer = napari.Viewer(title="clinician session")
    viewer.window._qt_window.resize(*WINDOW)
    segment, compare = segment_steps(viewer, shared, out, errors, short)
    bench = benchmark_steps(viewer, shared, out, compare, errors, short)
    run = close_during_run(viewer, segment, bench, out)
    say("checking the run folder the window was closed on")
    check_resumable(run, shared / "hippocampus_mri", short)
    say("session done")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    parser.add_argument("--short", action="store_true", help="less of each step (make test's session)")
    args = parser.parse_args(argv)
    faulthandler.enable()
    out = args.out or Path(tempfile.mkdtemp(prefix="clinician_session_"))
    try:
        on_display(lambda: session(args.shared_data, out, args.short))
    except SessionFailed as failure:
        print(f"session failed: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
