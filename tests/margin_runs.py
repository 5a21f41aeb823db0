"""Two real runs over one dataset for the tests of "two runs side by side": the medsam2 protocol
with two box margins, predictions saved, made by the real CLI (its ``main``, in the test's process: a
subprocess would start Python and load the model again for each run)."""
from __future__ import annotations

import json
from pathlib import Path

from napari_medsam_eval.cli import main


def make_run(dataset: Path, out: Path, margin: int, model: str = "box", limit: int = 4,
             extra: tuple[str, ...] = ()) -> None:
    """``medsam-eval run`` with the medsam2 protocol's ``margin`` (predictions saved, no report)."""
    assert main(["run", str(dataset), "--model", model, "--protocol", "medsam2",
                 "--protocol-options", json.dumps({"margin": margin}), "--limit", str(limit), "--save-predictions",
                 "--no-report", "--quiet", "--out", str(out), *extra]) == 0


def margin_runs(dataset: Path, root: Path, model: str, limit: int, extra: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """(A, B): margins 0 and 10 under ``root`` (``extra``: more options of both runs)."""
    make_run(dataset, root / "A", 0, model, limit, extra)
    make_run(dataset, root / "B", 10, model, limit, extra)
    return root / "A", root / "B"
