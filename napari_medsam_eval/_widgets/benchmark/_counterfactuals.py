"""What would have fixed an opened benchmark row (``medsam-eval explain``): its counterfactual DSCs, and one
variant's mask shown beside the prediction.

:class:`FixChoice` is a combo box beside the row table's why filter (no line of its own: at 1366 x 768 the
rows tab and the status line are full), shown while the opened row has an ``explain.csv`` row
(:func:`~napari_medsam_eval.benchmark.explain.explained_row`). Shut, it reads the gains, largest first
(``fix: box +0.73 · extent +0.18 · prompt slice +0.04``; the whole sentence with each DSC is its
tooltip); open, one line per variant with its DSC and gain. Choosing a variant whose mask was saved
reads the mask in a quiet worker (:class:`._worker.WorkerRunner`) and shows it as an outlined labels layer
over the image (:data:`ROLE`, marked with :data:`._open_row.OPENED_KEY`: the next row opened removes it);
the choice is kept, so the next row opened shows its own mask of that variant. A video's words say frame.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from napari.layers import Layer
from qtpy.QtCore import Qt
from qtpy.QtGui import QFontMetrics
from qtpy.QtWidgets import QComboBox, QHBoxLayout, QStyle, QStyleOptionComboBox, QStylePainter, QWidget

from napari_medsam_eval.benchmark.explain import EXPLAIN_FILE, explained_row, variant_column, variant_dice, \
    variant_mask_path
from napari_medsam_eval.benchmark.open_row import RunCase
from napari_medsam_eval.studies.counterfactuals import STAGE_WORDS, VARIANTS
from napari_medsam_eval._widgets.benchmark._open_row import OpenStep, apply_step
from napari_medsam_eval._widgets.benchmark._variant_layer import ROLE, variant_layer, variant_name
from napari_medsam_eval._widgets.common._layers import transform_kwargs
from napari_medsam_eval._widgets.common._canvas import compose, show_view
from napari_medsam_eval._turns import soon
from napari_medsam_eval._widgets.common._unit_words import in_units, unit_of
from napari_medsam_eval._widgets.common._worker import WorkerRunner
from napari_medsam_eval._widgets.common._removal import remove_layers

#: each variant in a few words (:data:`VARIANT_WORDS` without its article or "on every slice")
SHORT_WORDS = {"oracle_extent": "true extent", "oracle_prompt_slice": "best prompt slice", "oracle_box": "true box"}
#: each variant in a word or two, for the gains all on one shut combo box
GAIN_WORDS = {"oracle_extent": "extent", "oracle_prompt_slice": "prompt slice", "oracle_box": "box"}
#: the first choice's text without a gain to tell
NOT_MEASURED = "fix: not measured"


def choice_text(explained: dict[str, Any], variant: str, unit: str = "slice") -> str:
    """``true extent 0.24 (+0.18)``, or ``true extent: n/a`` where the variant did not apply."""
    found = variant_dice(explained, variant)
    words = in_units(SHORT_WORDS[variant], unit)
    return f"{words}: n/a" if found is None else f"{words} {found[0]:.2f} ({found[1]:+.2f})"


def fix_sentence(explained: dict[str, Any], unit: str = "slice") -> str:
    """``what would fix it: true extent 0.45 (+0.02) · best prompt slice 0.50 (+0.05) · true box 0.56 (+0.11)``."""
    return "what would fix it: " + " · ".join(choice_text(explained, v, unit) for v in VARIANTS)


def fix_summary(explained: dict[str, Any], unit: str = "slice") -> str:
    """``fix: box +0.73 · extent +0.18 · prompt slice +0.04``: the gains, largest first."""
    gains = sorted(((found[1], v) for v in VARIANTS if (found := variant_dice(explained, v)) is not None), reverse=True)
    if not gains:
        return NOT_MEASURED
    return "fix: " + " · ".join(f"{in_units(GAIN_WORDS[v], unit)} {gain:+.2f}" for gain, v in gains)


def fitted(text: str, metrics: QFontMetrics, room: int) -> str:
    """``text``'s first `` · `` parts that fit in ``room`` pixels, `` …`` after them when some are left out."""
    parts = text.split(" · ")
    for keep in range(len(parts), 0, -1):
        shown = " · ".join(parts[:keep]) + ("" if keep == len(parts) else " …")
        if metrics.horizontalAdvance(shown) <= room:
            return shown
    return metrics.elidedText(text, Qt.ElideRight, room)


def fix_tooltip(explained: dict[str, Any], unit: str = "slice") -> str:
    """The whole sentence, what each variant makes perfect, and what the row's explain note says."""
    stages = ", ".join(f"{variant_name(v, unit)} (what {in_units(STAGE_WORDS[v], unit)} costs)" for v in VARIANTS)
    notes = [str(n) for n in [explained.get("note")] + [explained.get(variant_column("note", v)) for v in VARIANTS]
             if isinstance(n, str) and n]
    said = "".join(f"\n{in_units(note, unit)}" for note in dict.fromkeys(notes))
    return (f"{fix_sentence(explained, unit)} (DSC, gain over the run's). medsam-eval explain re-ran this result "
            f"with one stage made perfect: {stages}. Choose one to show its mask beside the prediction.{said}")


def read_explained(run_dir: Path, loaded: RunCase, variant: str | None, image_name: str,
                   transform: dict[str, Any]) -> tuple[dict[str, Any] | None, Layer | None]:
    """Worker: the row's explain.csv row and, for ``variant``, its mask's layer (None when not saved)."""
    explained = explained_row(run_dir, loaded.row)
    if explained is None or variant is None:
        return explained, None
    return explained, variant_layer(run_dir, explained, variant, loaded, image_name, transform)


class FixChoice(QComboBox):
    """The opened row's counterfactual DSCs, and the variant shown as a layer (module doc).

    ``opened()`` gives the opened row's layers by role (the browser's), where the variant's layer goes too.
    """

    def __init__(self, viewer: Any, opened: Callable[[], dict[str, Layer]]) -> None:
        super().__init__()
        self.viewer, self._opened = viewer, opened
        #: reads explain.csv and the masks off the GUI thread; quiet (no status line, nothing locked)
        self.reader = WorkerRunner(None)
        #: the variant chosen last (None: the prediction only), kept from row to row
        self.wanted: str | None = None
        #: the opened row's explain row, its run folder and case; which row they are (:meth:`forget` counts)
        self.explained: dict[str, Any] | None = None
        self._run_dir: Path | None = None
        self._loaded: RunCase | None = None
        self._row = 0  # bumped by forget()
        self.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)  # never widens the dock
        self.setMinimumContentsLength(12)
        self.setToolTip("what would have fixed the opened row: 'medsam-eval explain RUN_DIR' measures it")
        self.setVisible(False)
        self.activated.connect(self._chosen)  # the user's choice only (not items set here)

    def forget(self) -> None:
        """A row starts opening: what is being read for the last one is not to be shown."""
        self._row += 1

    def show_row(self, run_dir: Path, loaded: RunCase) -> Any:
        """The row ``loaded`` is open: read its explain row (and the chosen variant's mask) in the worker;
        hidden at once when the run has no explain.csv. Returns the worker (or None)."""
        self.forget()
        self._run_dir, self._loaded, row = Path(run_dir), loaded, self._row
        image = self._opened().get("image")
        if image is None or not (self._run_dir / EXPLAIN_FILE).is_file():
            return self._fill(None)
        return self.reader.start(read_explained, self._run_dir, loaded, self.wanted, image.name,
                                 transform_kwargs(image), text="",
                                 returned=lambda got: soon(self, lambda: self._show(row, *got)))

    def _show(self, row: int, explained: dict[str, Any] | None, layer: Layer | None) -> None:
        if row == self._row:  # else another row was opened meanwhile
            self._fill(explained)
            self._put(layer)

    def _fill(self, explained: dict[str, Any] | None) -> None:
        """Items for ``explained`` (hidden without it), the kept choice selected when its mask is there."""
        self.explained = explained
        self.clear()
        self.setVisible(explained is not None)
        self.setEnabled(explained is not None)
        if explained is None or self._run_dir is None or self._loaded is None:
            return
        unit = unit_of(self._loaded.case.kind)
        self.addItem(fix_summary(explained, unit), None)
        self.setItemData(0, "the prediction only (no variant's mask shown)", Qt.ToolTipRole)
        for variant in VARIANTS:
            self.addItem(choice_text(explained, variant, unit), variant)
            if variant_mask_path(self._run_dir, explained, variant) is None:
                self.model().item(self.count() - 1).setEnabled(False)
                note = explained.get(variant_column("note", variant))
                why = note if isinstance(note, str) and note else "its mask was not saved (medsam-eval explain --masks save)"
                self.setItemData(self.count() - 1, in_units(why, unit), Qt.ToolTipRole)
        self.setToolTip(fix_tooltip(explained, unit))
        kept = self.findData(self.wanted) if self.wanted else -1
        self.setCurrentIndex(kept if kept > 0 and self.model().item(kept).isEnabled() else 0)
        if self.currentData() is None:
            self._put(None)

    def choose(self, variant: str | None) -> Any:
        """Show ``variant``'s mask (None: the prediction only), as choosing its item does; returns the worker."""
        index = self.findData(variant) if variant is not None else 0
        if index < 0:
            raise ValueError(f"no choice {variant!r} for the opened row")
        self.setCurrentIndex(index)
        return self._chosen(index)

    def paintEvent(self, _event: Any) -> None:  # noqa: N802 - Qt's name
        """The shut text cut between two gains (:func:`fitted`), never in a number."""
        painter = QStylePainter(self)
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        room = self.style().subControlRect(QStyle.CC_ComboBox, option, QStyle.SC_ComboBoxEditField, self).width()
        option.currentText = fitted(option.currentText, self.fontMetrics(), room)
        painter.drawComplexControl(QStyle.CC_ComboBox, option)
        painter.drawControl(QStyle.CE_ComboBoxLabel, option)

    def _chosen(self, index: int) -> Any:
        """The user chose an item: show that variant's mask (read in the worker), or none."""
        self.wanted = variant = self.itemData(index)
        image = self._opened().get("image")
        if variant is None or image is None or self.explained is None or self._loaded is None:
            return self._put(None)
        row = self._row
        return self.reader.start(variant_layer, self._run_dir, self.explained, variant, self._loaded, image.name,
                                 transform_kwargs(image), text="",
                                 returned=lambda layer: soon(self, lambda: self._show_layer(row, layer)))

    def _show_layer(self, row: int, layer: Layer | None) -> None:
        if row == self._row:
            self._put(layer)

    def _put(self, layer: Layer | None) -> Layer | None:
        """GUI thread: ``layer`` in the viewer in the place of the last variant's (None: that one removed)."""
        opened = self._opened()
        old = opened.get(ROLE)
        if layer is None:
            if old is not None:
                remove_layers(self.viewer, [old])
            opened.pop(ROLE, None)
            image = opened.get("image")
            if image is not None and image in self.viewer.layers:
                show_view(self.viewer, "truth & prediction", image)
            return None
        image = opened.get("image")
        if image is None or image not in self.viewer.layers or tuple(image.data.shape[:layer.ndim]) != layer.data.shape:
            return None  # the row's image is gone (another view took its layers)
        shown = apply_step(self.viewer, OpenStep(ROLE, layer), opened)  # the last variant's layer reused
        unit = unit_of(getattr(self._loaded.case, "kind", "volume")) if self._loaded is not None else "slice"
        compose(self.viewer, "variant", image, {ROLE: shown},
                words={ROLE: variant_name(str(shown.metadata.get("variant")), unit)})
        return shown


def beside(anchor: QWidget, widget: QWidget) -> None:
    """Put ``widget`` right of ``anchor`` in ``anchor``'s layout, sharing its line (no line of its own)."""
    layout = anchor.parentWidget().layout()
    index = layout.indexOf(anchor)
    layout.removeWidget(anchor)
    line = QHBoxLayout()
    line.setContentsMargins(0, 0, 0, 0)
    line.addWidget(anchor, 1)
    line.addWidget(widget, 2)  # the wider: its shut text holds the gains
    layout.insertLayout(index, line)


__all__ = ["FixChoice", "NOT_MEASURED", "ROLE", "GAIN_WORDS", "SHORT_WORDS", "beside", "choice_text",
           "fitted", "fix_sentence", "fix_summary", "fix_tooltip", "read_explained", "variant_layer", "variant_name"]
