"""The objects set aside from Python's collector when a dock loads (``_set_aside``) come back before napari
collects a removed layer and when the viewer closes: a removed layer's memory is freed as before."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import napari_medsam_eval._widgets as widgets
from napari_medsam_eval._set_aside import give_back, set_aside

pytestmark = pytest.mark.gui


class _Cycle:
    """An object in a reference cycle (freed only by the collector), holding an array."""

    def __init__(self) -> None:
        self.me = self
        self.data = np.zeros(1000, np.uint8)


@pytest.fixture(autouse=True)
def _nothing_left_aside():
    yield
    give_back()


def test_a_docks_code_loaded_for_napari_sets_aside_what_loaded(make_napari_viewer):
    viewer = make_napari_viewer()
    layer = viewer.add_labels(np.zeros((2, 4, 4), np.uint8))
    give_back()
    # what napari's Plugins menu calls (npe2 keeps the class it got: a second dock in a process asks no more)
    assert widgets.__getattr__("CompareWidget").__name__ == "CompareWidget"
    assert gc.get_freeze_count() > 0
    viewer.layers.remove(layer)
    assert gc.get_freeze_count() == 0


def test_a_removed_layer_made_before_is_collected_by_napari_as_before(make_napari_viewer):
    viewer = make_napari_viewer()
    layer = viewer.add_labels(np.zeros((4, 8, 8), np.uint8), name="truth")
    layer.metadata["held"] = held = _Cycle()
    gone = weakref.ref(held)
    del held
    set_aside(viewer)
    assert gc.get_freeze_count() > 0
    gc.collect()
    assert gone() is not None  # set aside: not walked
    viewer.layers.remove(layer)
    del layer
    assert gc.get_freeze_count() == 0
    gc.collect()  # napari collects on removal; once more here, whatever its version does
    assert gone() is None


def test_the_viewer_closing_gives_everything_back(make_napari_viewer):
    viewer = make_napari_viewer()
    set_aside(viewer)
    assert gc.get_freeze_count() > 0
    viewer.close()
    assert gc.get_freeze_count() == 0


def test_layers_made_after_are_collected_while_the_rest_is_set_aside(make_napari_viewer):
    viewer = make_napari_viewer()
    set_aside(viewer)
    held = _Cycle()
    gone = weakref.ref(held)
    del held
    gc.collect()
    assert gone() is None and gc.get_freeze_count() > 0


def test_nothing_is_set_aside_without_a_viewer_to_give_it_back():
    give_back()
    set_aside(None)
    assert gc.get_freeze_count() == 0
