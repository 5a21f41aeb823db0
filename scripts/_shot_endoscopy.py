"""Screenshot of an endoscopy video: the Segment and Compare docks on a colonoscopy clip, in frames.

:func:`shot` is what ``scripts/screenshots.py`` calls with a viewer (1600 x 1000, then 1366 x 768): it opens
the first sequence of the public CVC-ClinicDB clips of ``../shared/data`` (read in place) through the
plugin's reader, docks Segment and Compare from the Plugins menu, propagates LiteMedSAM from the MedSAM2
protocol's first-frame box, goes to the worst frame and saves ``docs/screenshots/endoscopy.png``
(``endoscopy_1366.png``): the prediction's contour and the comparison's colours over the mucosa, every word
in frames. Run alone (about a minute on two cores)::

    python scripts/_shot_endoscopy.py
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import screenshots  # noqa: E402  (scripts/screenshots.py: save, _wait, _process, dock, _check_fits)

NAME = "endoscopy.png"
CLIPS = screenshots.REPO.parent / "shared" / "data" / "cvc_clinicdb_video" / "Frame"


def shot(viewer: Any) -> None:
    """Open the first clip, propagate LiteMedSAM from its first frame, go to the worst frame; save the PNG."""
    from napari_medsam_eval.session.session import Session

    clip = sorted(path for path in CLIPS.iterdir() if path.is_dir())[0]
    viewer.open(str(clip), plugin="napari-medsam-eval")
    segment, _ = screenshots.dock(viewer, "Segment")
    compare, _ = screenshots.dock(viewer, "Compare")
    segment.set_backend(Session.build_backend("litemedsam"))
    if segment.prompt_from_ground_truth() is None:
        raise RuntimeError(f"no prompt: {segment.status.value}")
    screenshots._wait(segment.propagate())
    screenshots._process(1.0)
    if compare.comparison is None:
        raise RuntimeError(f"nothing compared: {compare.status.value}")
    compare.next_worst()
    viewer.reset_view()
    screenshots._check_fits(viewer)
    screenshots.save(viewer, screenshots.named(NAME))


def main() -> int:
    def job() -> None:
        for size in (screenshots.WINDOW, screenshots.SMALL):
            screenshots.in_viewer(shot, size=size)
    return screenshots.on_display(job)


if __name__ == "__main__":
    sys.exit(main())
