"""Screenshot of the Compare widget's "Prompt sensitivity": the agreement map of 10 perturbed prompts.

:func:`shot` is what ``scripts/screenshots.py`` calls after its Compare
screenshot, with the viewer (1600 x 1000) and the docked Compare widget: the
CT phantom's prediction, propagated by the Segment widget with LiteMedSAM, is
given again 10 times with its box perturbed (box-jitter rule, seeded); the
agreement map (inferno, 0..1), the worst run (contour), the DSC spread and its
histogram are shown on the prompted slice, and ``docs/screenshots/sensitivity.png``
is saved with ``screenshots.save``.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import screenshots  # noqa: E402  (scripts/screenshots.py: save, _wait, _process, _check_fits)

NAME = "sensitivity.png"
RUNS = 10


def shot(viewer: Any, compare: Any) -> None:
    """Run the sensitivity section on the prediction ``compare`` compares, show it, save :data:`NAME`."""
    section = compare.sensitivity
    section.runs.value = RUNS
    worker = section.start()
    if worker is None:
        raise RuntimeError(f"prompt sensitivity did not start: {section.status.value}")
    screenshots._wait(worker)
    result = section.result
    if result is None or not result.dice:
        raise RuntimeError(f"prompt sensitivity gave no result: {section.status.value}")
    for layer in viewer.layers:  # the image, the agreement map and the worst run say it
        layer.visible = layer.metadata.get("role") not in ("prediction", "ground_truth", "overlay")
    prompt = result.prompts[0]
    if prompt.slice_index is not None:
        compare.go_to(int(prompt.slice_index))
    compare.show_tab("sensitivity")
    screenshots._check_fits(viewer)
    screenshots.save(viewer, NAME)
    spread = result.spread()
    print(f"sensitivity: {result.done} runs, DSC {spread['dice_min']:.3f} / {spread['dice_median']:.3f} / "
          f"{spread['dice_max']:.3f}")
