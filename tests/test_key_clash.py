"""Our keys against napari's own: none is one napari binds, each works whatever layer is active.

napari looks a key up in the active layer's keymap before the viewer's, and the window's menu
shortcuts (app-model keybindings, Qt shortcuts) come before both, so a plugin key that napari
also binds does nothing, or something else, while that layer is active: Shift+P, the old
propagate key, drew a polygon lasso on the box layer instead. napari 0.9.2 keeps its keys in
- each layer class's ``class_keymap`` (and its bases'): keys bound with ``Layer.bind_key``
  (Labels' Ctrl+Z paint undo) and, once a Qt viewer exists, the shortcuts of the actions the
  action manager registered for that class (``register_layer_action``);
- ``get_settings().shortcuts.shortcuts`` (defaults ``napari.utils.shortcuts.default_shortcuts``)
  and ``action_manager._shortcuts``: action name -> keys, the action's ``keymapprovider`` the class
  they are bound on (a layer class, or ``ViewerModel`` for the viewer's keys);
- ``ViewerModel.class_keymap``: the viewer's keys;
- the app-model's ``keybindings``: the menus' shortcuts (File > Open, the command palette...).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from plugin_dock import dock
from napari_medsam_eval._widgets.benchmark._bench_results import ResultsBrowser
from napari_medsam_eval._widgets.compare._compare_metrics import ComparisonSection
from napari_medsam_eval._widgets.segment._objects import ObjectControls
from napari_medsam_eval._widgets.segment._segment_actions import SegmentActions
from napari_medsam_eval._widgets.common._shortcuts import BENCHMARK_SHORTCUTS, COMPARE_SHORTCUTS, SEGMENT_SHORTCUTS

pytestmark = pytest.mark.gui

#: every key of ours: (widget, action, napari key name)
OURS = [(widget, action, key) for widget, keys in (("Segment", SEGMENT_SHORTCUTS), ("Compare", COMPARE_SHORTCUTS),
                                                   ("Benchmark", BENCHMARK_SHORTCUTS)) for action, key in keys.items()]


def _canonical(key):
    """napari's own normal form of a key (``Control-Shift-N``, ``Ctrl+Shift+N``, an int...): an app-model
    KeyBinding, written as napari writes it (``Ctrl+Shift+N``)."""
    from napari.utils.key_bindings import coerce_keybinding

    return str(coerce_keybinding(key))


def _layer_types():
    from napari import layers

    return [layers.Image, layers.Labels, layers.Points, layers.Shapes, layers.Surface, layers.Tracks, layers.Vectors]


def napari_keys() -> dict[str, dict[str, set[str]]]:
    """Where napari binds what: owner (a layer type, "viewer", "window") -> canonical key -> what napari does
    with it. Call with a Qt viewer open (it binds the settings' shortcuts and builds the menus)."""
    from napari._app_model import get_app_model
    from napari.components import ViewerModel
    from napari.settings import get_settings
    from napari.utils.action_manager import action_manager
    from napari.utils.shortcuts import default_shortcuts

    owners = {cls.__name__: cls for cls in _layer_types()} | {"viewer": ViewerModel}
    found: dict[str, dict[str, set[str]]] = {owner: defaultdict(set) for owner in [*owners, "window"]}
    settings = get_settings().shortcuts.shortcuts
    for owner, cls in owners.items():
        for name, action in action_manager._actions.items():
            if action.keymapprovider is not None and action.keymapprovider in cls.__mro__:
                for key in [*settings.get(name, []), *default_shortcuts.get(name, []),
                            *action_manager._shortcuts.get(name, [])]:
                    found[owner][_canonical(key)].add(name)
        for base in cls.__mro__:  # the actions' keys again (already named), and those bound with bind_key
            for key, func in vars(base).get("class_keymap", {}).items():
                if key is not Ellipsis and not found[owner].get(_canonical(key)):
                    found[owner][_canonical(key)].add(getattr(func, "__qualname__", repr(func)))
    for rule in get_app_model().keybindings:
        found["window"][_canonical(rule.keybinding)].add(rule.command_id)
    return found


def test_the_enumeration_finds_napari_s_keys(make_napari_viewer):
    """Known bindings are there, in the canonical form ours are compared in: the clash test cannot pass
    by enumerating nothing, or by writing keys one way on one side and another way on the other."""
    make_napari_viewer()
    found = napari_keys()
    assert all(found[cls.__name__] for cls in _layer_types()), {o: len(k) for o, k in found.items()}
    assert "napari:activate_add_polygon_lasso_mode" in found["Shapes"][_canonical("Shift-P")]
    assert "napari:activate_add_rectangle_mode" in found["Shapes"][_canonical("R")]
    assert "napari:activate_labels_paint_mode" in found["Labels"][_canonical("P")]
    assert "napari:activate_labels_erase_mode" in found["Labels"][_canonical("E")]
    assert found["Labels"][_canonical("Control-Z")] and found["Labels"][_canonical("Ctrl+Shift+Z")]  # bind_key
    assert "napari:select_append_all_in_slice" in found["Points"][_canonical("Shift-A")]
    assert "napari:auto_contrast_once" in found["Image"][_canonical("C")]
    assert "napari:activate_vectors_pan_zoom_mode" in found["Vectors"][_canonical("1")]
    assert "napari:toggle_unselected_visibility" in found["viewer"][_canonical("Shift-V")]
    assert "napari.window.view.toggle_command_palette" in found["window"][_canonical("Control-Shift-P")]
    assert "napari.window.file.open_files_dialog" in found["window"][_canonical("Ctrl+O")]
    assert _canonical("Control-Shift-N") == _canonical("Ctrl+Shift+N") != _canonical("Ctrl+N")


def test_no_key_of_ours_is_one_napari_binds(make_napari_viewer):
    make_napari_viewer()
    found = napari_keys()
    clashes = [f"{widget} {action}: {key} is napari's {', '.join(sorted(found[owner][_canonical(key)]))} "
               f"({owner})" for widget, action, key in OURS for owner in found if found[owner].get(_canonical(key))]
    assert not clashes, "\n".join(clashes)
    assert len({_canonical(key) for _w, _a, key in OURS}) == len(OURS)  # nor two actions of ours on one key


def _spy(monkeypatch) -> list[str]:
    """Every keyed action records its name instead of running (patched on the classes before the widgets are
    built: the widgets bind their methods when docked). No model, no job."""
    ran: list[str] = []
    for action in ("segment_slice", "propagate", "correct_slice", "cancel"):
        monkeypatch.setattr(SegmentActions, action, lambda self, _action=action: ran.append(_action))
    monkeypatch.setattr(ObjectControls, "undo", lambda self: ran.append("undo"))
    monkeypatch.setattr(ObjectControls, "step",
                        lambda self, direction: ran.append("next_object" if direction > 0 else "previous_object"))
    monkeypatch.setattr(ComparisonSection, "next_worst", lambda self: ran.append("next_worst"))
    monkeypatch.setattr(ResultsBrowser, "next_row", lambda self: ran.append("next_row"))
    return ran


def _press(qtbot, widget, key: str) -> None:
    """Type napari key ``key`` on ``widget`` as a person does: the modifiers pressed first and held, the key
    clicked, the modifiers released (Shift alone is a key of the Shapes layer's, too)."""
    from app_model.types import KeyBinding
    from qtpy.QtCore import Qt

    (part,) = KeyBinding.from_str(_canonical(key)).parts
    held = [(Qt.Key_Control, Qt.ControlModifier)] * part.ctrl + [(Qt.Key_Shift, Qt.ShiftModifier)] * part.shift
    assert not (part.alt or part.meta), key  # none of ours: add them here if one comes
    modifiers = Qt.NoModifier
    for qt_key, modifier in held:
        modifiers |= modifier
        qtbot.keyPress(widget, qt_key, modifiers)
    qtbot.keyClick(widget, getattr(Qt, f"Key_{part.key}"), modifiers)
    for qt_key, modifier in reversed(held):
        modifiers &= ~modifier
        qtbot.keyRelease(widget, qt_key, modifiers)


def test_every_key_works_whatever_layer_is_active(make_napari_viewer, qtbot, monkeypatch):
    """The real path: Qt key events on the canvas (the window active, the canvas focused: the menus' shortcuts
    and the Benchmark's window shortcut are looked up first), napari's keymap chain with each layer type active,
    starting with the box layer the Segment widget draws on, in the mode it draws boxes in."""
    ran = _spy(monkeypatch)
    viewer = make_napari_viewer()
    image = viewer.add_image(np.zeros((4, 16, 16), np.float32), name="image")
    segment = dock(viewer, "segment")
    dock(viewer, "compare")
    dock(viewer, "benchmark")
    boxes, points = segment.new_prompt_layers()
    boxes.mode, points.mode = "add_rectangle", "add"
    layers = [boxes, points, image, viewer.add_labels(np.zeros((4, 16, 16), np.uint8), name="mask"),
              viewer.add_vectors(np.zeros((2, 2, 3)), name="vectors"),
              viewer.add_tracks(np.array([[0, 0, 2, 2, 2], [0, 1, 3, 3, 3]], float), name="tracks"),
              viewer.add_surface((np.array([[0, 0, 0], [0, 5, 0], [0, 0, 5]], float), np.array([[0, 1, 2]])),
                                 name="surface")]
    assert sorted(type(layer).__name__ for layer in layers) == sorted(cls.__name__ for cls in _layer_types())

    window, canvas = viewer.window._qt_window, viewer.window._qt_viewer.canvas.native
    window.show()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5_000)
    missed = []
    for layer in layers:
        viewer.layers.selection.active = layer
        mode = layer.mode
        for _widget, action, key in OURS:
            canvas.setFocus()
            ran.clear()
            _press(qtbot, canvas, key)
            if ran != [action]:
                missed.append(f"{key} with the {type(layer).__name__} layer {layer.name!r} active ran {ran}, "
                              f"not {action}")
        if layer.mode != mode:
            missed.append(f"our keys turned the {type(layer).__name__} layer's mode {mode} into {layer.mode}")
    assert not missed, "\n".join(missed)
    assert len(boxes.data) == 0 and len(points.data) == 0
