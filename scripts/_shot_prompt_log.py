"""Screenshot of "Drawn vs protocol prompts": a drawn box beside the protocol's, the log's row shown.

``shot(viewer)`` opens the CT phantom sample, docks the Segment widget with LiteMedSAM,
draws a box a little off the ground truth's on the object's key slice, segments that
slice (the widget logs the prompt beside the ``medsam2`` box), shows the protocol's box
as a dashed layer of its own and the logged row as the viewer's text overlay, and saves
``docs/screenshots/prompt_log.png`` with :func:`screenshots.save`. Standalone::

    python scripts/_shot_prompt_log.py      # (starts its own Xvfb when there is no display)
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from screenshots import _process, _wait, dock, in_viewer, on_display, save  # noqa: E402


def shot(viewer: Any, target: int = 2, log_path: str | Path | None = None, name: str | None = "prompt_log.png") -> None:
    """Set ``viewer`` up to show the prompt log (module doc) and save ``docs/screenshots/<name>`` (None: no file)."""
    from napari_medsam_eval._widgets.common._layers import from_image_coords
    from napari_medsam_eval._widgets.common._prompt_layers import box_vertices
    from napari_medsam_eval.protocols.geometry import tight_box
    from napari_medsam_eval.session.session import Session

    image, gt = viewer.open_sample("napari-medsam-eval", "phantom_ct")[:2]
    widget, _ = dock(viewer, "Segment")
    widget.set_backend(Session.build_backend("litemedsam", device="cpu"))
    widget.target_label.value = target
    log_path = Path(log_path) if log_path is not None else Path(tempfile.mkdtemp(prefix="prompt-log-")) / "prompt_log.csv"
    widget.prompt_log.path.value = log_path
    widget.prompt_log.log_drawn.value = True  # off until the user asks (issue 65)
    _process()
    z = int(np.argmax((np.asarray(gt.data) == target).sum(axis=(1, 2))))
    x0, y0, x1, y1 = tight_box(np.asarray(gt.data[z]) == target)
    w, h = x1 - x0, y1 - y0
    drawn = (x0 - 0.25 * w, y0 - 0.1 * h, x1 + 0.1 * w, y1 + 0.3 * h)  # a person's box, a little off
    boxes, _points = widget.new_prompt_layers()
    boxes.add_rectangles(from_image_coords(boxes, image, box_vertices(drawn, z)))
    viewer.dims.set_point(0, image.data_to_world([z, 0, 0])[0])
    _wait(widget.segment_slice())
    for _ in range(600):  # the protocol's side is computed in a worker of its own
        if widget.prompt_log.rows_written and not widget.prompt_log.pending:
            break
        _process(0.1)
    row = widget.prompt_log.last_row
    if row is None:
        raise RuntimeError(f"no prompt was logged: {widget.prompt_log.summary.value}")
    protocol_box = [float(v) for v in row["protocol_box"].strip("[]").split(",")]
    theirs = viewer.add_shapes(from_image_coords(boxes, image, box_vertices(protocol_box, z))[None],
                               shape_type="rectangle", name=f"{row['protocol']} box (protocol)", edge_width=0.6,
                               edge_color="magenta", face_color="transparent", scale=boxes.scale,
                               translate=boxes.translate)
    theirs.editable = False
    viewer.layers.selection.active = boxes
    viewer.text_overlay.visible = True
    viewer.text_overlay.color = "white"
    viewer.text_overlay.font_size = 11
    viewer.text_overlay.text = (f"prompt log {log_path.name}: drawn box (yellow) vs {row['protocol']} box (magenta)\n"
                                f"box IoU {float(row['box_iou']):.2f}, centre offset {float(row['centre_offset_px']):.1f} px"
                                f" ({float(row['centre_offset_mm']):.1f} mm)\n"
                                f"DSC drawn {float(row['drawn_dsc_slice']):.3f} vs protocol "
                                f"{float(row['protocol_dsc_slice']):.3f} on slice {row['slice_index']}")
    widget.prompt_log.native.setFocus()
    if name is not None:
        save(viewer, name)


def main() -> int:
    return on_display(lambda: in_viewer(shot))


if __name__ == "__main__":
    sys.exit(main())
