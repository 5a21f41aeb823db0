"""Plain words in the three docks (issue 42, item 7), docked from the Plugins menu (real viewer, Xvfb).

A clinician reading the docks meets terms of the field (anchors, protocol, propagation margin,
executor, seed, Wilcoxon p ...): every control naming one explains it in its tooltip
(:mod:`napari_medsam_eval.core.glossary`), and no two controls of a dock share a visible label.
A table cell too narrow for its text (``hippoc...us_007``) shows the whole text on hover; the
Segment widget's object title follows the image and never widens the dock; the Compare widget's
target label follows the Segment widget's object.
"""
from __future__ import annotations

import pytest
from magicgui.widgets import ComboBox, FileEdit
from magicgui.widgets._concrete import _LabeledWidget
from magicgui.widgets.bases import ButtonWidget
from qtpy.QtCore import QEvent
from qtpy.QtGui import QHelpEvent
from qtpy.QtWidgets import QApplication, QScrollArea, QTableWidget, QToolTip, QWidget

from napari_medsam_eval._widgets.benchmark._results_table import ROW_HEADERS
from plugin_dock import dock
from napari_medsam_eval.benchmark import run_benchmark
from napari_medsam_eval.core.glossary import PROTOCOL_WORDS, terms_in
from napari_medsam_eval.session.session import Session

pytestmark = pytest.mark.gui

LESION = "CT_Lesion_000002_03_01_035-047.npz"


def _inside(native: QWidget, kind: type) -> bool:
    """Whether ``native`` is part of a magicgui widget of ``kind`` (a file field's own button)."""
    parent = native.parentWidget()
    while parent is not None:
        if isinstance(getattr(parent, "_magic_widget", None), kind):
            return True
        parent = parent.parentWidget()
    return False


def controls(widget) -> list[tuple[str, list[str], object]]:
    """Every control of ``widget``'s dock, found in its Qt tree (sections added as Qt widgets too):
    (its visible label or text, the tooltips that explain it, the control)."""
    found = []
    for native in widget.native.findChildren(QWidget):
        control = getattr(native, "_magic_widget", None)
        if isinstance(control, _LabeledWidget):  # a form row: its name on the left
            inner = control._inner_widget
            found.append((control._label_widget.value, [control._label_widget.native.toolTip(),
                                                        inner.native.toolTip()], inner))
        elif isinstance(control, ButtonWidget) and control.text and not _inside(native, FileEdit):
            found.append((control.text, [native.toolTip()], control))
    return found


def unnamed_choices(widget) -> list[str]:
    """The choices (combo boxes) of ``widget``'s dock with no name shown: no form row, no accessible name."""
    return [repr(control.value) for native in widget.native.findChildren(QWidget)
            if isinstance(control := getattr(native, "_magic_widget", None), ComboBox)
            and control._labeled_widget() is None and not native.accessibleName()]


def headers(widget) -> list[tuple[str, str]]:
    """(header, tooltip) of every column of every table in ``widget``'s dock."""
    return [(table.horizontalHeaderItem(c).text(), table.horizontalHeaderItem(c).toolTip())
            for table in widget.native.findChildren(QTableWidget) for c in range(table.columnCount())]


def test_every_control_naming_a_term_explains_it_and_no_label_repeats(make_napari_viewer):
    viewer = make_napari_viewer()
    unexplained, repeated = [], []
    for name in ("segment", "compare", "benchmark"):
        widget = dock(viewer, name)
        found = controls(widget)
        assert len(found) > 8, (name, found)  # the walk sees the dock's controls (Compare's sections too)
        for label, tips, control in found:
            if terms_in(label) and not all(tips):
                unexplained.append(f"{name}: {label!r}")
            value = getattr(control, "value", None)
            if isinstance(value, str) and value in PROTOCOL_WORDS and value not in tips[-1]:
                unexplained.append(f"{name}: {label!r} does not say what its default {value} does")
        unexplained += [f"{name}: column {h!r}" for h, tip in headers(widget) if terms_in(h) and not tip]
        unexplained += [f"{name}: a choice without a name, now {value}" for value in unnamed_choices(widget)]
        labels = [label.strip().lower() for label, _tips, _control in found if label.strip()]
        repeated += [f"{name}: {label!r}" for label in sorted(set(labels)) if labels.count(label) > 1]
    assert unexplained == [] and repeated == [], (unexplained, repeated)
    benchmark = dock(viewer, "benchmark")
    assert "Wilcoxon" in dict(headers(benchmark))["Wilcoxon p"]
    assert "-1" in benchmark.propagation_margin.tooltip and "local" in benchmark.executor.tooltip


def _hover(view: QWidget, at) -> str:
    """The tooltip shown when the mouse rests at ``at`` (viewport coordinates) of an item view."""
    viewport = view.viewport()
    QToolTip.hideText()
    QApplication.sendEvent(viewport, QHelpEvent(QEvent.ToolTip, at, viewport.mapToGlobal(at)))
    return QToolTip.text()


def test_a_cell_too_narrow_for_its_text_shows_it_whole_on_hover(make_napari_viewer, shared_data, tmp_path, qtbot):
    out = tmp_path / "run"
    run_benchmark(shared_data / "hippocampus_mri", out, model="box", limit=3)
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1600, 1000)
    widget = dock(viewer, "benchmark")
    assert widget.load_results(out) == 6  # three cases, anterior and posterior
    view = widget.results
    qtbot.waitUntil(lambda: not view.pending and view.summary.rowCount() == 2, timeout=60_000)
    why = ROW_HEADERS.index("why")  # its tooltip says more than its text: every error part, its share, slices
    for table in (view.table, view.summary):  # every other cell, whatever its column's width: its whole text
        cells = [table.item(r, c) for r in range(table.rowCount()) for c in range(table.columnCount())
                 if table is not view.table or c != why]
        # (a summary's task: the part that tells the tasks apart, the whole name on hover)
        assert [(i.text(), i.toolTip()) for i in cells if i.toolTip() != i.text()
                and not (table is view.summary and i.toolTip().endswith("/" + i.text()))] == []
    for line in range(view.table.rowCount()):
        cell = view.table.item(line, why)
        assert cell.toolTip().startswith("why it missed: ") and f"dominant: {cell.text()}" in cell.toolTip()
    # a dock narrow enough that the case and task names are cut: hovering one shows it whole
    for table in (view.table, view.summary):
        header = table.horizontalHeader()  # the name column takes what the others leave
        table.setFixedWidth(sum(header.sectionSize(c) for c in range(1, table.columnCount())) + 70)
    for tab, table in (("rows", view.table), ("summary", view.summary)):  # each on its tab, in view
        widget.show_tab(tab)
        qtbot.wait(100)
        item = table.item(0, 0)
        rect = table.visualItemRect(item)
        if table is view.summary:  # a task: the part that tells it apart, whole in the cell, the whole name on hover
            assert table.fontMetrics().horizontalAdvance(item.text()) <= rect.width(), item.text()
            assert _hover(table, rect.center()) == f"hippocampus_mri/{item.text()}"
            continue
        assert table.fontMetrics().horizontalAdvance(item.text()) > rect.width(), item.text()  # elided
        assert _hover(table, rect.center()) == item.text()


def _open_mr(viewer, shared_data, case="hippocampus_015"):
    root = shared_data / "hippocampus_mri"
    return viewer.open(str(root / "imagesTr" / f"{case}.nii.gz"), plugin="napari-medsam-eval")


def test_object_title_follows_the_image_and_never_widens_the_dock(make_napari_viewer, shared_data, qtbot):
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1600, 1000)
    ct, ct_truth = viewer.open(str(shared_data / "deeplesion_ct_npz" / LESION), plugin="napari-medsam-eval")
    mr, mr_truth = _open_mr(viewer, shared_data)
    widget = dock(viewer, "segment", Session.build_backend("box"))
    widget.image_layer.value = mr
    title = widget.objects.title
    assert widget.gt_layer.value is mr_truth and title.value == "label 1 (anterior)"
    widget.image_layer.value = ct  # the CT's object 1 has no name: the MR's is not kept
    assert widget.gt_layer.value is ct_truth and int(widget.target_label.value) == 1
    assert title.value == "label 1" and title.native.toolTip() == "label 1"
    qtbot.wait(100)
    width = widget.native.minimumSizeHint().width()
    name = "left hippocampus, anterior part (head), as the second reader outlined it on the T1 series"
    mr_truth.metadata["label_names"] = {1: name, 2: "posterior"}
    widget.image_layer.value = mr
    qtbot.wait(100)
    assert title.value == f"label 1 ({name})" and title.native.toolTip() == title.value  # whole on hover
    assert widget.native.minimumSizeHint().width() == width  # elided in its row, the dock as wide as before
    area = widget.native.findChild(QScrollArea)  # the dock's scrolling body: the title ends inside it
    native = title.native
    assert native.mapTo(area.viewport(), native.rect().topRight()).x() < area.viewport().width()


def test_compare_target_follows_the_segment_object(make_napari_viewer, shared_data, qtbot):
    viewer = make_napari_viewer()
    mr, mr_truth = _open_mr(viewer, shared_data)
    compare = dock(viewer, "compare")  # docked first: it learns of the Segment widget docked after it
    segment = dock(viewer, "segment", Session.build_backend("box"))
    assert segment.image_layer.value is mr and segment.gt_layer.value is mr_truth
    segment.prompt_from_ground_truth()
    qtbot.waitUntil(lambda: not segment.busy, timeout=10_000)
    segment.segment_slice()
    qtbot.waitUntil(lambda: f"{mr.name} prediction" in viewer.layers and not segment.busy, timeout=60_000)
    prediction = viewer.layers[f"{mr.name} prediction"]
    assert compare.pred_layer.value is prediction and compare.gt_layer.value is mr_truth
    assert int(compare.target_label.value) == 1
    segment.objects.step(+1)  # the next object: label 2 (posterior), not segmented yet
    assert int(segment.target_label.value) == 2 and int(compare.target_label.value) == 2
    segment.objects.step(-1)
    assert int(compare.target_label.value) == 1
    # another image's object is not this prediction's: the target stays
    ct, _ct_truth = viewer.open(str(shared_data / "deeplesion_ct_npz" / LESION), plugin="napari-medsam-eval")
    segment.image_layer.value = ct
    assert compare.pred_layer.value is None  # the CT has no prediction yet: nothing of the MR's stays
    compare.pred_layer.value, compare.gt_layer.value = prediction, mr_truth  # the user compares the MR's
    segment.target_label.value = 3
    assert compare.pred_layer.value is prediction and int(compare.target_label.value) == 1
