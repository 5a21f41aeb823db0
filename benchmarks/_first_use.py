"""First use: how long the viewer freezes the first time a user does each thing, in a fresh process.

Run by ``benchmarks/responsiveness.py`` in a Python process of its own (nothing imported or built
beforehand, as when a user starts napari): the sample data opened from File > Open Sample, the first
dock (Segment), the first file through the plugin's reader, the first benchmark row and the first pair
of two runs opened. Each is measured as the largest interval between two ticks of a 16 ms timer on the
GUI thread (:class:`responsiveness.TimerGaps`) from the user's action until its result is on screen.

    python benchmarks/_first_use.py --shared-data DIR [--profile]   # prints one JSON list: [what, seconds], ...
    python benchmarks/_first_use.py --napari-own                      # napari's own cost of the same layers

``--napari-own`` is the baseline each case is measured against (issue 65: ours at most 100 ms above it): in a
fresh process of its own, napari alone puts the same layers on the canvas (the same arrays, read before the viewer
starts; plain ``add_image`` / ``add_labels`` / ``add_shapes`` / ``add_points``, a plain Qt widget for the dock),
so the difference is what our code adds to each first use.

Open Sample, the dock and the file are run from the event loop (``gui_probe.from_the_event_loop``), as a
menu choice or a file drop is: napari's sample, reader and dock commands then put their layers in turns.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "tests"))  # gui_probe: an action run from the event loop, as the tests run it

PLUGIN = "napari-medsam-eval"
#: the cases measured, in the order a new user meets them
CASES = ("Open Sample (phantom CT)", "the first dock (Segment)", "the first file read (NIfTI)",
         "the first benchmark row opened", "the first pair of two runs opened")


def _runs(shared: Path, out: Path) -> tuple[Path, Path]:
    """Two box-baseline runs of 2 hippocampus cases with their predictions (margins 5 and 15), made in a
    child process: this one stays fresh."""
    import subprocess

    for name, margin in (("a", 5), ("b", 15)):
        subprocess.run([str(Path(sys.executable).with_name("medsam-eval")), "run", str(shared / "hippocampus_mri"),
                        "--model", "box", "--protocol", "medsam2", "--protocol-options", json.dumps({"margin": margin}),
                        "--limit", "2", "--save-predictions", "--no-report", "--quiet", "--out", str(out / name)],
                       check=True)
    return out / "a", out / "b"


def _idle_viewer() -> tuple[Any, list[tuple[str, float]]]:
    """A new viewer (1600 x 1000) and its idle gaps over 3 s, the baseline of this process."""
    import napari

    from responsiveness import TimerGaps, process_until, settle

    viewer = napari.Viewer()
    viewer.window._qt_window.resize(1600, 1000)
    settle(2.0)
    with TimerGaps() as idle:
        process_until(lambda: time.perf_counter() - idle.ticks[0] > 3.0)
    return viewer, [("idle viewer (baseline of this process)", idle.max_gap)]


def measure(shared: Path, profile: bool = False) -> list[tuple[str, float]]:
    from gui_probe import from_the_event_loop
    from responsiveness import TimerGaps, finished, process_until, settle

    out = Path(tempfile.mkdtemp(prefix="first_use_"))
    run_a, run_b = _runs(shared, out)
    viewer, results = _idle_viewer()
    with TimerGaps(profile) as gaps:
        from_the_event_loop(lambda: viewer.open_sample(PLUGIN, "phantom_ct"))
        settle()
    _profiled(gaps)
    results.append((CASES[0], gaps.max_gap))
    with TimerGaps(profile) as gaps:
        from_the_event_loop(lambda: viewer.window.add_plugin_dock_widget(PLUGIN, "Segment"))
        settle()
    _profiled(gaps)
    results.append((CASES[1], gaps.max_gap))
    image = sorted((shared / "hippocampus_mri" / "imagesTr").glob("*.nii.gz"))[0]
    with TimerGaps(profile) as gaps:
        from_the_event_loop(lambda: viewer.open(str(image), plugin=PLUGIN))
        settle()
    _profiled(gaps)
    results.append((CASES[2], gaps.max_gap))
    _, bench = viewer.window.add_plugin_dock_widget(PLUGIN, "Benchmark")
    bench.out_dir.value = run_a
    process_until(lambda: bench.results.table.rowCount() > 0 and not bench.results.pending, timeout_s=60)
    settle()
    with TimerGaps(profile) as gaps:
        worker = bench.open_row(bench.results.row_at(0))
        process_until(lambda: finished(worker), timeout_s=60)
        settle()
    _profiled(gaps)
    results.append((CASES[3], gaps.max_gap))
    two = bench.two_runs
    worker = two.compare(run_a, run_b)
    process_until(lambda: finished(worker) and two.pair is not None, timeout_s=60)
    settle()
    with TimerGaps(profile) as gaps:
        worker = two.open_case(two.view.key_at(two.view.table, 0))
        process_until(lambda: finished(worker), timeout_s=60)
        settle()
    _profiled(gaps)
    results.append((CASES[4], gaps.max_gap))
    viewer.close()
    return results


def measure_napari_own(shared: Path) -> list[tuple[str, float]]:
    """napari's own cost of the same first uses: the same layers (data read before the viewer starts) added with
    napari's own calls, each case from the event loop, as :func:`measure` does ours."""
    import numpy as np
    import SimpleITK as sitk

    from gui_probe import from_the_event_loop
    from responsiveness import TimerGaps, settle

    from napari_medsam_eval._reader import case_to_layer_data
    from napari_medsam_eval.datasets.phantoms import phantom_ct_case
    sample = [(np.asarray(data), kind) for data, _kwargs, kind in case_to_layer_data(phantom_ct_case())]
    image_file = sorted((shared / "hippocampus_mri" / "imagesTr").glob("*.nii.gz"))[0]
    volume = sitk.GetArrayFromImage(sitk.ReadImage(str(image_file)))
    truth = sitk.GetArrayFromImage(sitk.ReadImage(str(shared / "hippocampus_mri" / "labelsTr" / image_file.name)))
    from qtpy.QtWidgets import QLabel

    viewer, results = _idle_viewer()

    def add(layers: list[tuple[np.ndarray, str]]) -> None:
        for data, kind in layers:
            (viewer.add_image if kind == "image" else viewer.add_labels)(data)

    def case(what: str, action) -> None:
        with TimerGaps() as gaps:
            from_the_event_loop(action)
            settle()
        results.append((what, gaps.max_gap))

    case(CASES[0], lambda: add(sample))
    case(CASES[1], lambda: viewer.window.add_dock_widget(QLabel("a dock"), name="a dock"))
    case(CASES[2], lambda: add([(volume, "image"), (truth, "labels")]))
    box = np.array([[[volume.shape[0] // 2, 5, 5], [volume.shape[0] // 2, 5, 20], [volume.shape[0] // 2, 20, 20],
                     [volume.shape[0] // 2, 20, 5]]], dtype=float)
    row = [(volume, "image"), (truth, "labels"), ((truth == 1).astype(np.uint8), "labels"),
           ((truth == 2).astype(np.uint8), "labels")]
    case(CASES[3], lambda: (add(row), viewer.add_shapes(box, shape_type="rectangle")))
    case(CASES[4], lambda: (add(row + [((truth > 0).astype(np.uint8), "labels")]),
                            viewer.add_shapes(box, shape_type="rectangle")))
    viewer.close()
    return results


def _profiled(gaps) -> None:
    """With ``--profile``: the GUI thread's profile of that case, on stderr."""
    if gaps.stats:
        print(gaps.stats, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    from screenshots import on_display

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--profile", action="store_true", help="each case's GUI-thread profile on stderr")
    parser.add_argument("--napari-own", action="store_true", help="napari's own cost of the same layers (baseline)")
    args = parser.parse_args(argv)
    results: list[tuple[str, float]] = []
    if args.napari_own:
        on_display(lambda: results.extend(measure_napari_own(args.shared_data)))
    else:
        on_display(lambda: results.extend(measure(args.shared_data, args.profile)))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
