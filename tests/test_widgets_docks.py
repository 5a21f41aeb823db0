"""The three docks together in a 1600 x 1000 window, docked from the Plugins menu (real viewer, Xvfb).

With Segment, Compare and Benchmark docked at once (and any two of them), each dock in front shows
its main actions, its progress bar and its status line without scrolling (they sit in a
footer below the dock's scrolling body), and no button is narrower than its text needs. Three docks do not fit
the column with Compare's plot at 140 pixels: they give way to each other as tabs (issue 65), and each, brought
to the front, shows all of that.
"""
from __future__ import annotations

import itertools

import pytest
from qtpy.QtWidgets import QPushButton

from plugin_dock import dock
from napari_medsam_eval._widgets.common._dock_tabs import bring_forward

pytestmark = pytest.mark.gui

#: what each dock must always show: its main actions, progress and status
MAIN = {
    "segment": ("segment_button", "propagate_button", "correct_button", "cancel_button", "progress", "status"),
    "compare": ("compare_button", "worst_button", "status"),
    "benchmark": ("run_button", "resume_button", "cancel_button", "progress", "status"),
}
COMBINATIONS = [("segment", "compare", "benchmark"), *itertools.combinations(("segment", "compare", "benchmark"), 2)]


def _in_view(widget) -> bool:
    return widget.isVisible() and not widget.visibleRegion().isEmpty()


@pytest.mark.parametrize("names", COMBINATIONS, ids=["+".join(c) for c in COMBINATIONS])
def test_docks_show_their_main_actions_at_1600_by_1000(make_napari_viewer, shared_data, qtbot, names):
    viewer = make_napari_viewer(show=True)
    viewer.open(str(shared_data / "deeplesion_ct_npz" / "CT_Lesion_000002_03_01_035-047.npz"),
                plugin="napari-medsam-eval")
    window = viewer.window._qt_window
    window.resize(1600, 1000)
    widgets = {name: dock(viewer, name) for name in names}
    for name, widget in widgets.items():
        bring_forward(widget.native)  # a tab away where the docks gave way: the dock in use in front
        natives = [getattr(widget, attribute).native for attribute in MAIN[name]]
        qtbot.waitUntil(lambda: all(_in_view(native) for native in natives), timeout=10_000)
        assert window.width() <= 1600 and window.height() <= 1000, window.size()
        for attribute in MAIN[name]:
            native = getattr(widget, attribute).native
            assert native.height() >= native.minimumSizeHint().height(), f"{name}: {attribute} is cut in height"
        for button in widget.native.findChildren(QPushButton):
            if _in_view(button):  # a button in view shows its whole text
                assert button.width() >= button.sizeHint().width(), (name, button.text(), button.width(),
                                                                     button.sizeHint().width())


def test_a_long_error_is_readable_in_full_in_the_dock(make_napari_viewer, qtbot):
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1600, 1000)
    widgets = {name: dock(viewer, name) for name in ("segment", "compare", "benchmark")}
    message = "cannot read /a/very/long/folder/name/without/any/space/case.nii.gz: " + "a long reason " * 60
    widget = widgets["benchmark"]
    widget.runner.error(message)  # as a failed job reports it: a notification, and the status line
    bring_forward(widget.native)  # the docks gave way to each other as tabs: the Benchmark dock in front
    status = widget.status.native
    qtbot.waitUntil(lambda: _in_view(status.parentWidget()), timeout=10_000)
    assert widget.status.value == message  # the whole message, not its first 200 characters
    assert status.wordWrap()
    assert _in_view(widget.run_button.native)  # a long message scrolls in the footer, the actions stay
