"""Screenshots of the napari widgets on the bundled sample data, for the README and docs/.

Drives a real napari viewer (no mock) and saves, into ``docs/screenshots/``:

1. ``segment.png``: the Segment widget after LiteMedSAM propagated a
   ground-truth box prompt through the CT phantom (``sample_data/CT_phantom_abdomen.npz``);
2. ``compare.png``: the Compare widget docked below the Segment widget, on
   that prediction (TP/FP/FN overlay, its result tab: DSC, per-slice DSC plot,
   Next worst slice);
3. ``benchmark.png``: the Benchmark and Compare widgets docked together
   after a LiteMedSAM run on the sample data's MedSAM npz layout (the CT
   phantom's three organs), the worst row opened and compared; and
   ``benchmark_summary.png``, its summary tab;
4. ``sensitivity.png``: the Compare widget's prompt sensitivity of the
   prediction of 2. (``scripts/_shot_sensitivity.py``);
5. ``prompt_log.png``: a drawn box beside the protocol's, as the prompt log
   records it (``scripts/_shot_prompt_log.py``);
6. ``two_runs.png``: the Benchmark widget's two runs side by side, on two
   LiteMedSAM runs over 5 hippocampus cases of ``../shared/data`` (box margins
   0 and 10; ``scripts/_shot_two_runs.py``);
7. ``objects.png``: the CT phantom's liver (a region holding its lesion), kidney and lesion, nested
   objects each with its own mask (``scripts/_shot_objects.py``);
8. ``endoscopy.png``: a colonoscopy clip of ``../shared/data`` in the Segment and Compare docks, LiteMedSAM
   propagated from the first frame, at the worst frame (``scripts/_shot_endoscopy.py``).

Prediction (warm contour) and ground truth (cool fill) are told apart in all
three. The window is 1600 x 1000, and 1.-3., 6. and 8. are shot again in a 1366 x 768
window (``segment_1366.png``, ``compare_1366.png``, ``benchmark_1366.png``, ``two_runs_1366.png``,
``endoscopy_1366.png``);
the script fails when the docked widgets make a window larger.

The repository's own synthetic sample data are used, and for 6. the public
hippocampus MRI of ``../shared/data`` (read in place). Run from the
repository root (LiteMedSAM on CPU, a few minutes on two cores)::

    xvfb-run -a -s "-screen 0 1600x1000x24" python scripts/screenshots.py

Without a display and without ``xvfb-run`` the script starts its own Xvfb
through ``pyvirtualdisplay`` (installed with ``pytest-xvfb``). PNGs are
downscaled and palette-quantised to stay under 400 KB.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data"
OUT = REPO / "docs" / "screenshots"
WINDOW = (1600, 1000)  # the screen the widgets must fit
#: the smaller screen the Segment, Compare and Benchmark docks are shot at too (``<name>_1366.png``)
SMALL = (1366, 768)
#: the window of the viewer being shot
window_size = WINDOW
MAX_WIDTH = 1300
MAX_BYTES = 400_000


def in_viewer(shot: Callable[..., None], *args: Any, size: tuple[int, int] = WINDOW) -> None:
    """``shot(viewer, *args)`` in a new viewer of ``size`` (1600 x 1000), closed afterwards."""
    import napari

    global window_size
    window_size = size
    viewer = napari.Viewer(title="napari-medsam-eval")
    viewer.window._qt_window.resize(*size)
    try:
        shot(viewer, *args)
    finally:
        viewer.close()
        window_size = WINDOW


def named(name: str) -> str:
    """``name`` for the window being shot: ``segment.png`` at 1600 x 1000, ``segment_1366.png`` at 1366 x 768."""
    return name if window_size == WINDOW else name.replace(".png", f"_{window_size[0]}.png")


def on_display(job: Callable[[], None]) -> int:
    """Run ``job`` with a display (a virtual one started here when there is none); 0."""
    display = _display()
    try:
        job()
    finally:
        if display is not None:
            display.stop()
    return 0


def _display() -> Any:
    """A virtual display when there is none (kept alive by the returned object)."""
    if os.environ.get("DISPLAY") or os.environ.get("QT_QPA_PLATFORM") == "offscreen":
        return None
    from pyvirtualdisplay import Display

    display = Display(visible=False, size=(WINDOW[0] + 100, WINDOW[1] + 100), color_depth=24)
    display.start()
    return display


def _process(seconds: float = 0.3) -> None:
    from qtpy.QtWidgets import QApplication

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QApplication.processEvents()
        time.sleep(0.02)


def _wait(worker: Any, timeout_s: float = 1800) -> None:
    """Process Qt events until ``worker`` and its finished handlers are done."""
    from superqt.utils._qthreading import WorkerBase

    end = time.monotonic() + timeout_s
    while worker in WorkerBase._worker_set:
        if time.monotonic() > end:
            raise TimeoutError("worker did not finish")
        _process(0.1)
    _process(0.5)


def _close_toasts(viewer: Any) -> None:
    """Close napari's notification pop-ups (e.g. the PyQt5 deprecation notice), which cover the canvas."""
    try:
        from napari._qt.dialogs.qt_notification import NapariQtNotification
    except ImportError:  # another napari layout: keep them
        return
    for toast in viewer.window._qt_window.findChildren(NapariQtNotification):
        toast.close()


def save(viewer: Any, name: str) -> Path:
    """Grab the whole window (dock widgets included), downscale, quantise, write ``docs/screenshots/<name>``."""
    from PIL import Image

    _close_toasts(viewer)
    _process(1.0)
    array = np.asarray(viewer.screenshot(canvas_only=False, flash=False))
    image = Image.fromarray(array[..., :3])
    if image.width > MAX_WIDTH:
        image = image.resize((MAX_WIDTH, round(image.height * MAX_WIDTH / image.width)), Image.LANCZOS)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    for colors in (256, 128, 64):  # octree keeps a legend's small, rare colours (median cut greyed the FN line)
        image.quantize(colors=colors, method=Image.Quantize.FASTOCTREE).save(path, optimize=True)
        if path.stat().st_size < MAX_BYTES:
            break
    print(f"{path.relative_to(REPO)}: {image.width}x{image.height}, {path.stat().st_size // 1024} KB")
    return path


#: the widgets' names in the Plugins menu (napari.yaml), by a short name
PLUGIN_WIDGETS = {"Segment": "Segment", "Compare": "Compare / failure analysis", "Benchmark": "Benchmark"}


def dock(viewer: Any, name: str) -> tuple[Any, Callable[[], None]]:
    """Dock widget ``name`` (Segment, Compare, Benchmark) as the Plugins menu does (napari hands it its proxy
    of the viewer); returns the widget and a function that undocks it."""
    dock_widget, widget = viewer.window.add_plugin_dock_widget("napari-medsam-eval", PLUGIN_WIDGETS[name])
    return widget, lambda: viewer.window.remove_dock_widget(dock_widget)


def dock_titled(viewer: Any, name: str) -> Any:
    """The QDockWidget of our widget ``name`` (napari titles it "<name> (napari-medsam-eval)")."""
    from qtpy.QtWidgets import QDockWidget

    return next(d for d in viewer.window._qt_window.findChildren(QDockWidget)
                if d.windowTitle().startswith(PLUGIN_WIDGETS[name]))


def segment_and_compare(viewer: Any, target: int) -> None:
    """Screenshots 1 and 2: propagate a ground-truth prompt, then compare with the ground truth."""
    from napari_medsam_eval.session.session import Session

    viewer.open_sample("napari-medsam-eval", "phantom_ct")
    segment, remove_segment = dock(viewer, "Segment")
    segment.set_backend(Session.build_backend("litemedsam", device="cpu"))
    _process()
    segment.target_label.value = target
    prompt = segment.prompt_from_ground_truth()
    if prompt is None:
        raise RuntimeError(f"no prompt: {segment.status.value}")
    worker = segment.propagate()
    if worker is None:
        raise RuntimeError(f"propagation did not start: {segment.status.value}")
    _wait(worker)
    if segment.last_result is None:
        raise RuntimeError(f"propagation failed: {segment.status.value}")
    _check_fits(viewer)
    save(viewer, named("segment.png"))

    compare, _ = dock(viewer, "Compare")  # below the Segment dock: Compare's result tab in view beside it
    _process(1.0)
    comparison = compare.compare()  # as the button: the TP / FP / FN view, its legend on the canvas
    if comparison is None:
        raise RuntimeError("the Compare widget found no prediction/ground truth pair")
    per_slice = comparison.per_slice  # show a badly segmented slice where all three colours occur
    partial = np.flatnonzero(np.nan_to_num(per_slice, nan=0.0) > 0)
    compare.go_to(int(partial[np.argmin(per_slice[partial])]) if partial.size else int(compare.next_worst() or 0))
    _check_fits(viewer)
    save(viewer, named("compare.png"))
    print(f"compare: volume DSC {comparison.dice:.3f}")
    if window_size == WINDOW:
        from _shot_sensitivity import shot as sensitivity_shot

        remove_segment()  # the Compare dock alone: its sensitivity tab with the window's height
        _process(1.0)
        sensitivity_shot(viewer, compare)


def benchmark(viewer: Any, run_dir: Path) -> None:
    """Screenshot 3: a LiteMedSAM run on the sample data's npz layout, a row opened."""
    widget, _ = dock(viewer, "Benchmark")
    widget.dataset.value = SAMPLE
    widget.layout_choice.value = "npz"  # sample_data/ also looks like SUN-SEG (its video folder)
    widget.out_dir.value = run_dir
    worker = widget.run()
    if worker is None:
        raise RuntimeError(f"the run did not start: {widget.status.value}")
    _wait(worker)
    if widget.last_status != "completed":
        raise RuntimeError(f"the run ended {widget.last_status}: {widget.status.value}")
    view = widget.results
    line = min(range(view.table.rowCount()), key=lambda i: float(view.row_at(i)["dice"]))
    view.table.selectRow(line)
    _wait(widget.open_row(view.row_at(line)))
    compare, _ = dock(viewer, "Compare")
    _process(1.0)
    if compare.compare() is None:
        raise RuntimeError("the Compare widget found no prediction/ground truth pair in the opened row")
    _check_fits(viewer)
    save(viewer, named("benchmark.png"))  # the rows tab, in front since the rows arrived
    if window_size == WINDOW:
        widget.show_tab("summary")  # one click away: the per-task summary and the box plot
        _process(1.0)
        save(viewer, "benchmark_summary.png")


def _check_fits(viewer: Any) -> None:
    """Fail when the docked widgets push the window past its size (:data:`WINDOW` or :data:`SMALL`)."""
    _process(0.5)
    size, (width, height) = viewer.window._qt_window.size(), window_size
    if size.width() > width or size.height() > height:
        raise RuntimeError(f"the window grew to {size.width()}x{size.height()}, past {width}x{height}")
    print(f"window {size.width()}x{size.height()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=int, default=2, help="CT phantom label to segment (1 liver, 2 kidney, 3 lesion)")
    args = parser.parse_args(argv)
    return on_display(lambda: all_shots(args.target))


def all_shots(target: int) -> None:
    """Every screenshot, each in a viewer of its own."""
    import _shot_endoscopy
    import _shot_objects
    import _shot_prompt_log
    import _shot_two_runs

    for size in (WINDOW, SMALL):
        in_viewer(segment_and_compare, target, size=size)
        with tempfile.TemporaryDirectory(prefix="medsam-eval-screens-") as tmp:
            in_viewer(benchmark, Path(tmp) / "run", size=size)
        in_viewer(_shot_endoscopy.shot, size=size)
    in_viewer(_shot_prompt_log.shot)
    in_viewer(_shot_objects.shot)
    with tempfile.TemporaryDirectory(prefix="medsam-eval-two-runs-") as tmp:
        runs = _shot_two_runs.make_runs(Path(tmp))
        for size in (WINDOW, SMALL):
            in_viewer(_shot_two_runs.shot, *runs, size=size)


if __name__ == "__main__":
    sys.modules.setdefault("screenshots", sys.modules[__name__])  # the shot scripts' `import screenshots`: this one
    sys.exit(main())
