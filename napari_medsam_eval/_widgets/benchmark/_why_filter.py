"""The row table's filter by why a result missed: all rows, or those whose dominant error part is one part
(:mod:`napari_medsam_eval.evaluation.error_parts`), ``ok`` or ``n/a`` (no parts: failed, or an old run),
or those that missed a lesion (a lesion-by-lesion target's: opened at the missed lesion's slice).
Each part's choice shows the colour an opened row's "why" layer paints it in: with the why column's
colour chips, the layer's legend."""
from __future__ import annotations

from qtpy.QtCore import Qt
from qtpy.QtGui import QColor
from qtpy.QtWidgets import QComboBox

from napari_medsam_eval.core.palette import ERROR_PART_COLORS
from napari_medsam_eval.evaluation.error_parts import OK, OK_DICE, PART_MEANINGS, PARTS, part_name
from napari_medsam_eval._widgets.benchmark._row_cells import WHY_NONE
from napari_medsam_eval._widgets.common._unit_words import in_units
from napari_medsam_eval._widgets.benchmark._rows_model import RowsModel

#: the first choice: every row
ALL = "all results"
#: the choices after it: the dominant part's values
CHOICES = (OK, *PARTS, WHY_NONE)
#: the last choice: the rows that missed a lesion
MISSED_LESIONS = "missed lesions"


class WhyFilter(QComboBox):
    """Shows the rows of one dominant part only (the choice's index 0: all of them) in ``model``."""

    def __init__(self, model: RowsModel) -> None:
        super().__init__()
        self.model = model
        self.addItem(ALL, None)
        for choice in CHOICES:
            self.addItem(f"why: {part_name(choice)}", choice)
            tip = PART_MEANINGS.get(choice) or (f"DSC >= {OK_DICE:g}" if choice == OK else "no error parts")
            self.setItemData(self.count() - 1, tip, Qt.ToolTipRole)
            if choice in ERROR_PART_COLORS:  # the legend of an opened row's "why" layer
                self.setItemData(self.count() - 1, QColor(ERROR_PART_COLORS[choice]), Qt.DecorationRole)
        self.addItem(MISSED_LESIONS, MISSED_LESIONS)
        self.setItemData(self.count() - 1, "the results that missed a true lesion (targets taken lesion by lesion); "
                         "a double-click opens the case at the smallest missed lesion's largest slice", Qt.ToolTipRole)
        self.setToolTip("show only the results whose largest error part (why it missed) is this one; the why "
                        "column says it for each row (its tooltip gives every part), on the colour an opened "
                        "row's 'why' layer paints that part in")
        self.currentIndexChanged.connect(self._chosen)

    def show_unit(self, unit: str) -> None:
        """The parts' names in ``unit`` (``frame``: the rows are all of videos), their values kept."""
        for index in range(self.count()):
            if self.itemData(index) in PARTS:
                self.setItemText(index, f"why: {in_units(part_name(self.itemData(index)), unit)}")

    def choose(self, part: str | None) -> None:
        """Show the rows dominated by ``part`` (None: all rows; :data:`MISSED_LESIONS`: those that missed one)."""
        self.setCurrentIndex(0 if part is None else self.findData(part))

    def _chosen(self, _index: int) -> None:
        part = self.currentData()
        if part == MISSED_LESIONS:
            self.model.set_filter(lambda cell: cell.missed_lesions > 0)
        else:
            self.model.set_filter(None if part is None else (lambda cell: cell.why == part))


__all__ = ["ALL", "CHOICES", "MISSED_LESIONS", "WhyFilter"]
