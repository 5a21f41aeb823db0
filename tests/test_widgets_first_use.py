"""First use without a frozen window: what napari calls on its GUI thread (File > Open Sample, a file read
with the plugin's reader, a dock from the Plugins menu) does its work on a thread while the viewer's event
loop turns, says what is loading, and puts each layer in the viewer in a turn of its own.

No stopwatch (the freeze times are ``benchmarks/responsiveness.py``'s first-use table): what keeps the
viewer live is asserted instead (``gui_probe``). A script's call, outside the event loop, keeps getting every
layer at once.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from napari.layers import Image, Labels
from napari.utils import progress

import napari_medsam_eval._widgets as widgets
from gui_probe import LoopTurns, ThreadLog, from_the_event_loop, on_gui_thread
from plugin_dock import dock
from napari_medsam_eval import _reader, _sample_data
from napari_medsam_eval._meanwhile import MEASURED_GLYPHS
from napari_medsam_eval._widgets.benchmark import _open_row

pytestmark = pytest.mark.gui

PLUGIN = "napari-medsam-eval"
#: how long the watched job is kept going (seconds), so that a live loop ticks many times meanwhile
HELD_S = 0.3


def _held(owner, name: str, turns: LoopTurns, log: dict, monkeypatch) -> None:
    """``owner.name`` kept going HELD_S longer; ``log`` gets the loop's ticks meanwhile, whether it ran on the
    GUI thread, and the notes napari's activity indicator showed while it ran."""
    original = getattr(owner, name)

    def held(*args, **kwargs):
        start = turns.mark()
        result = original(*args, **kwargs)
        time.sleep(HELD_S)
        log.update(ticks=turns.mark() - start, on_gui=on_gui_thread(),
                   notes=[bar.desc for bar in progress._all_instances])
        return result

    monkeypatch.setattr(owner, name, held)


def _insertions(viewer, turns: LoopTurns) -> list[tuple[str, int, bool]]:
    """Per layer put in ``viewer``: its name, the loop's ticks so far, whether it was visible then."""
    seen: list[tuple[str, int, bool]] = []
    viewer.layers.events.inserted.connect(lambda event: seen.append((event.value.name, turns.mark(),
                                                                     event.value.visible)))
    return seen


def test_open_sample_from_the_menu_builds_on_a_thread_and_adds_its_layers_in_turns(make_napari_viewer, qtbot,
                                                                                    monkeypatch):
    viewer = make_napari_viewer(show=True)
    turns, built = LoopTurns(), {}
    _held(_sample_data, "_built", turns, built, monkeypatch)
    added = _insertions(viewer, turns)
    with turns:
        from_the_event_loop(lambda: viewer.open_sample(PLUGIN, "phantom_ct"))
        qtbot.waitUntil(lambda: len(viewer.layers) == 2 and all(layer.visible for layer in viewer.layers),
                        timeout=10_000)
    # the phantom was built off the GUI thread while the loop kept turning, and napari said what loads
    assert built["on_gui"] is False and built["ticks"] >= 5, built
    assert built["notes"] == ["building the CT phantom"], built
    # the image was put in the viewer hidden (drawn a turn later), the ground truth in a later turn
    (image, image_mark, image_visible), (truth, truth_mark, truth_visible) = added
    assert truth == f"{image} ground truth" and truth_mark > image_mark, added
    assert not image_visible and not truth_visible
    assert viewer.layers[truth].source.sample == (PLUGIN, "phantom_ct")
    assert viewer.layers[truth].metadata["role"] == "ground_truth"


def test_a_scripts_open_sample_gets_both_layers_at_once(make_napari_viewer):
    viewer = make_napari_viewer()
    image, truth = viewer.open_sample(PLUGIN, "phantom_ct")
    assert image.visible and truth.visible and truth.metadata["role"] == "ground_truth"
    assert _sample_data.phantom_ct()[1][2] == "labels"  # called as a function: the layer data, both


def test_a_file_opened_from_the_event_loop_is_read_on_a_thread(make_napari_viewer, shared_data: Path, qtbot,
                                                                monkeypatch):
    viewer = make_napari_viewer(show=True)
    path = shared_data / "hippocampus_mri" / "imagesTr" / "hippocampus_001.nii.gz"
    turns, read = LoopTurns(), {}
    _held(_reader, "_read", turns, read, monkeypatch)
    added = _insertions(viewer, turns)
    with turns:
        from_the_event_loop(lambda: viewer.open(str(path), plugin=PLUGIN))
        qtbot.waitUntil(lambda: len(viewer.layers) == 2 and all(layer.visible for layer in viewer.layers),
                        timeout=10_000)
    assert read["on_gui"] is False and read["ticks"] >= 5, read
    assert "reading hippocampus_001.nii.gz" in read["notes"], read  # beside napari's own "Opening Files"
    assert added[1][1] > added[0][1], added
    truth = viewer.layers[added[1][0]]
    assert truth.source.path == str(path) and truth.source.reader_plugin == PLUGIN


def test_a_dock_is_loaded_on_a_thread(make_napari_viewer, qtbot, monkeypatch):
    """The Plugins menu asks ``napari_medsam_eval._widgets`` for the widget class on the GUI thread: its module
    is imported, and what the widget needs first prepared (OpenVINO asked for the CPU's precisions, napari's
    Shapes layer compiled by numba), on a thread."""
    make_napari_viewer(show=True)
    turns, loaded, warmed = LoopTurns(), {}, ThreadLog(monkeypatch)
    _held(widgets, "_loaded", turns, loaded, monkeypatch)
    from napari_medsam_eval._widgets.segment import dock as segment_dock

    warmed.watch(segment_dock, "warm_up")
    with turns:
        widget_class = from_the_event_loop(lambda: widgets.SegmentWidget)
    assert widget_class is segment_dock.SegmentWidget
    assert loaded["on_gui"] is False and loaded["ticks"] >= 5, loaded
    assert loaded["notes"] == ["loading the Segment dock"], loaded
    assert warmed.count("warm_up") == 1 and warmed.on_gui == []


def test_a_dock_has_the_canvas_font_render_the_measured_glyphs_in_a_turn_of_its_own(make_napari_viewer, qtbot):
    """vispy renders 'ÅÉÑŐjgpqy ' before it lays out any text; napari's canvas shares one font among its text
    visuals: rendered once when a dock opens, a first prompt layer is drawn without them (200 -> 140 ms)."""
    viewer = make_napari_viewer(show=True)
    info = viewer.window._qt_viewer.canvas._font_info
    font = info.font_manager.get_font(info.face)
    font._glyphs.clear()
    dock(viewer, "segment")
    assert not set(MEASURED_GLYPHS) <= set(font._glyphs)  # not while the dock is built: in a later turn
    qtbot.waitUntil(lambda: set(MEASURED_GLYPHS) <= set(font._glyphs), timeout=5_000)


def test_an_opened_rows_stale_layers_are_retired_in_a_turn_of_their_own(make_napari_viewer, qtbot):
    """napari collects garbage in full when layers are removed (170-230 ms with the docks loaded): the last
    row's layers the new view has no use for are retired instead (hidden, emptied, named for what they held,
    their role set aside), in a turn before it is brought into view; the next row of that role reuses them."""
    viewer = make_napari_viewer(show=True)
    stale = viewer.add_labels(np.ones((2, 4, 4), np.uint8), name="hippocampus_004 why [label 1]",
                              metadata={_open_row.OPENED_KEY: "error_parts", "role": "error_parts"})
    image = Image(np.zeros((2, 4, 4), np.uint8), name="this row's image", metadata={_open_row.OPENED_KEY: "image"})
    ack, shown, marks, turns = threading.Event(), {}, {}, LoopTurns()
    stale.events.visible.connect(lambda _event: marks.setdefault("retired", turns.mark()))
    viewer.layers.events.removed.connect(lambda _event: marks.setdefault("removed", turns.mark()))
    handle = _open_row.paced(viewer.window._qt_window, ack, viewer, shown,
                             lambda _case: marks.setdefault("brought into view", turns.mark()))
    with turns:
        handle(_open_row.OpenStep("image", image))
        qtbot.waitUntil(ack.is_set, timeout=5_000)
        ack.clear()
        handle("the loaded case")  # the job's last item
        qtbot.waitUntil(ack.is_set, timeout=5_000)
    assert "removed" not in marks and marks["brought into view"] > marks["retired"], marks
    assert stale in viewer.layers and not stale.visible and not np.asarray(stale.data).any()
    assert stale.name == "unused: why" and "role" not in stale.metadata
    # the next row with a "why" layer fills the retired one again
    why = Labels(np.full((2, 4, 4), 2, np.uint8), name="hippocampus_001 why [label 2]",
                 metadata={_open_row.OPENED_KEY: "error_parts", "role": "error_parts"})
    assert _open_row.apply_step(viewer, _open_row.OpenStep("error_parts", why), {}) is stale
    assert stale.visible and stale.name == why.name and stale.metadata["role"] == "error_parts"
    assert (np.asarray(stale.data) == 2).all()
