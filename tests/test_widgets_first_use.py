"""First use without a frozen window: what napari calls on its GUI thread (File > Open Sample, a file read
with the plugin's reader, a dock from the Plugins menu) does its work on a thread while the viewer's event
loop turns, says what is loading, and puts each layer in the viewer in a turn of its own; a dock's removal
of layers spares the viewer napari's full garbage collection.

No stopwatch (the freeze times are ``benchmarks/responsiveness.py``'s first-use table): what keeps the
viewer live is asserted instead (``gui_probe``). A script's call, outside the event loop, keeps getting every
layer at once.
"""
from __future__ import annotations

import gc
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
from napari.utils import progress

import napari_medsam_eval._widgets as widgets
from gui_probe import LoopTurns, ThreadLog, from_the_event_loop, on_gui_thread
from napari_medsam_eval import _reader, _sample_data
from napari_medsam_eval._widgets.common._removal import remove_layers

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


def test_a_dock_removes_layers_without_napari_walking_every_object(make_napari_viewer, monkeypatch):
    """napari collects garbage in full at each removal (170-200 ms with the docks loaded): a dock's removal sets
    the objects that existed before aside for that collection only, and the removed layer is still freed."""
    viewer = make_napari_viewer()
    layers = [viewer.add_labels(np.zeros((4, 8, 8), np.uint8), name=name) for name in ("kept", "removed")]
    gone = weakref.ref(layers.pop())
    frozen_at_collections: list[int] = []
    collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *args: frozen_at_collections.append(gc.get_freeze_count())
                        or collect(*args))
    assert gc.get_freeze_count() == 0
    remove_layers(viewer, [viewer.layers["removed"]])
    assert [layer.name for layer in viewer.layers] == ["kept"]
    assert frozen_at_collections and all(count > 0 for count in frozen_at_collections), frozen_at_collections
    assert gc.get_freeze_count() == 0  # set aside for the removal only
    collect()
    assert gone() is None
