"""The row table's filter by why a result missed: all rows, or those whose dominant error part is one part
(:mod:`napari_medsam_eval.evaluation.error_parts`), ``ok`` or ``n/a`` (no parts: failed, or an old run).
Each part's choice shows the colour an opened row's "why" layer paints it in: with the why column's
colour chips, the layer's legend."""
from __future__ import annotations

from qtpy.QtCore import Qt
from qtpy.QtGui import QColor
from qtpy.QtWidgets import QComboBox

from napari_medsam_eval.core.palette import ERROR_PART_COLORS
from napari_medsam_eval.evaluation.error_parts import OK, OK_DICE, PART_MEANINGS, PARTS, part_name
from napari_medsam_eval._widgets.benchmark._row_cells import WHY_NONE
from napari_medsam_eval._widgets.benchmark._rows_model import RowsModel

#: the first choice: every row
ALL = "all results"
#: the choices after it: the dominant part's values
CHOICES = (OK, *PARTS, WHY_NONE)


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
        self.setToolTip("show only the results whose largest error part (why it missed) is this one; the why "
                        "column says it for each row (its tooltip gives every part), on the colour an opened "
                        "row's 'why' layer paints that part in")
        self.currentIndexChanged.connect(self._chosen)

    def choose(self, part: str | None) -> None:
        """Show the rows dominated by ``part`` (None: all rows)."""
        self.setCurrentIndex(0 if part is None else 1 + CHOICES.index(part))

    def _chosen(self, _index: int) -> None:
        part = self.currentData()
        self.model.set_filter(None if part is None else (lambda cell: cell.why == part))


__all__ = ["ALL", "CHOICES", "WhyFilter"]
