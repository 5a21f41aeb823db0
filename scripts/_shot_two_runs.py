"""Screenshot of the Benchmark widget's "Two runs" section: two runs side by side, a case opened.

:func:`shot` is what ``scripts/screenshots.py`` calls with a viewer (1600 x
1000) and two run folders over one dataset, made with ``--save-predictions``:
it docks the Benchmark widget, compares the runs, opens the case with the
largest drop B - A (both predictions and the A/B overlay, at the slice where
they differ most), scrolls the dock to the section and saves
``docs/screenshots/two_runs.png`` with ``screenshots.save`` (``two_runs_1366.png`` in a 1366 x 768 window).

Run alone, it makes the two runs itself (LiteMedSAM, medsam2 protocol with
box margins 0 and 10, 5 hippocampus MRI cases from ``../shared/data``; about
three minutes on two cores) unless given two run folders::

    python scripts/_shot_two_runs.py [RUN_A RUN_B]
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import screenshots  # noqa: E402  (scripts/screenshots.py: save, _wait, _process, dock, _check_fits)

NAME = "two_runs.png"
DATASET = screenshots.REPO.parent / "shared" / "data" / "hippocampus_mri"


def shot(viewer: Any, run_a: Path, run_b: Path) -> None:
    """Dock the Benchmark widget, open runs A and B side by side and their largest drop; save the PNG."""
    from qtpy.QtCore import Qt
    from qtpy.QtWidgets import QDockWidget

    widget, _ = screenshots.dock(viewer, "Benchmark")
    two = widget.two_runs
    worker = two.compare(Path(run_a), Path(run_b))
    if worker is None:
        raise RuntimeError(f"the comparison did not start: {two.status.value}")
    screenshots._wait(worker)
    if two.pair is None:
        raise RuntimeError(f"the runs were not paired: {two.status.value}")
    view = two.view
    if view.table.rowCount() == 0:
        raise RuntimeError("the two runs have no case scored in both")
    line = _telling_line(two)
    view.table.selectRow(line)
    screenshots._wait(two.open_case(view.key_at(view.table, line)))
    if "ab_overlay" not in two.opened:
        raise RuntimeError(f"the case opened without the A/B overlay: {two.status.value}")
    for role in ("prompt_boxes", "prompt_points", "prediction", "prediction_b"):  # the canvas composer hid them
        if role in two.opened and two.opened[role].visible:
            raise RuntimeError(f"the A vs B view shows the {role} layer too")
    window = viewer.window._qt_window
    docks = [dock for dock in window.findChildren(QDockWidget) if dock.windowTitle().startswith(screenshots.PLUGIN_WIDGETS["Benchmark"])]
    if docks:
        window.resizeDocks(docks, [640], Qt.Horizontal)
    screenshots._process(0.5)
    widget.show_tab("two runs")  # the section's own tab
    screenshots._process(0.5)
    viewer.reset_view()
    screenshots._check_fits(viewer)
    screenshots.save(viewer, screenshots.named(NAME))


def _telling_line(two: Any) -> int:
    """The first line of the pairs table (largest drop first) whose A/B map shows A only, B only and both
    at its slice; else the first line."""
    import numpy as np

    from napari_medsam_eval.evaluation.mask_comparison import AB_A_ONLY, AB_B_ONLY, AB_BOTH
    from napari_medsam_eval.report.run_pairs import load_case_pair

    view, pair = two.view, two.pair
    for line in range(view.table.rowCount()):
        case = load_case_pair(pair.run_a.path, pair.run_b.path, *pair.rows(view.key_at(view.table, line)))
        if case.overlay is not None and case.slice_index is not None:
            if {AB_A_ONLY, AB_B_ONLY, AB_BOTH} <= set(np.unique(case.overlay[case.slice_index]).tolist()):
                return line
    return 0


def make_runs(root: Path) -> tuple[Path, Path]:
    """LiteMedSAM with the medsam2 protocol's box margin 0 (A) and 10 (B) on 5 hippocampus cases."""
    for name, margin in (("A", 0), ("B", 10)):
        subprocess.run([sys.executable, "-m", "napari_medsam_eval", "run", str(DATASET), "--model", "litemedsam",
                        "--protocol", "medsam2", "--protocol-options", f'{{"margin": {margin}}}', "--limit", "5",
                        "--save-predictions", "--no-report", "--quiet", "--out", str(root / name)], check=True)
    return root / "A", root / "B"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv

    def job() -> None:
        with tempfile.TemporaryDirectory(prefix="medsam-eval-two-runs-") as tmp:
            runs = (Path(argv[0]), Path(argv[1])) if len(argv) == 2 else make_runs(Path(tmp))
            for size in (screenshots.WINDOW, screenshots.SMALL):
                screenshots.in_viewer(shot, *runs, size=size)
    return screenshots.on_display(job)


if __name__ == "__main__":
    sys.exit(main())
