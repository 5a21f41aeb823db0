"""The docks' words: every tooltip that explains a term of the field, written once, from the glossary.

The definitions themselves are :mod:`napari_medsam_eval.core.glossary`'s (the command line's help
shares them); here they are put to each control, with what its default does there. :data:`TIPS`
holds a control's tooltip by a short name; :func:`header_tip` gives a table column's. Each is rich text
(:func:`wrapped`), so that Qt wraps a long tooltip instead of showing it on one line wider than the
screen. No Qt.
"""
from __future__ import annotations

import html

from napari_medsam_eval.core.glossary import PROTOCOL_WORDS, TERMS, explain, terms_in

#: the box margin's default in the Segment widget and the propagation rules' own, in words
RULES_MARGIN = "2 pixels, or a tenth of the box's side where that is more"


def protocol_tip(what: str = "the prompt") -> str:
    """The protocol field's tooltip: what a protocol is and what each one draws (``what``: the prompt(s))."""
    others = "; ".join(f"{name}: {words}" for name, words in PROTOCOL_WORDS.items()
                       if name not in ("medsam2", "replay"))
    return (f"how {what} is drawn from the ground truth: a fixed recipe instead of a hand-drawn box, so a "
            f"result can be repeated and compared. The default, medsam2, draws {PROTOCOL_WORDS['medsam2']}. "
            f"The others: {others}")


def wrapped(text: str) -> str:
    """``text`` as rich text, which Qt word-wraps in a tooltip (plain text stays on one line)."""
    return f"<qt>{html.escape(text, quote=False)}</qt>"


#: a control's tooltip, by a short name
TIPS: dict[str, str] = {
    # the Segment widget
    "checkpoint": explain("checkpoint"),
    "device": explain("device"),
    "precision": explain("precision", "The status line names the precision of each mask"),
    "encode ahead": explain("encode ahead", "Tick 'on' to start it: segmenting and propagating then only wait "
                                            "for the fast part. Off by default"),
    "first look at": explain("first look", "model's (the default): no quick pass. LiteMedSAM only; bf16 is "
                                           "offered where this computer's processor computes it"),
    "encoded": "slices of the image encoded so far (the count names the pass of a first look)",
    "object": explain("object", "Its name comes from the ground truth, where it names its labels"),
    "region": explain("region", "Each object keeps its own mask: nested and overlapping objects are all kept"),
    "ground truth": explain("ground truth"),
    "protocol": protocol_tip(),
    "prompt slice": "the slice the protocol's prompt is drawn on: its own key slice (the default: the middle "
                    "of the target), or the slice on screen",
    "mazurowski mode": explain("mazurowski mode"),
    "propagation": explain("propagation", "These options apply to Propagate and Correct slice"),
    "box margin": explain("margin", f"The default: {RULES_MARGIN}"),
    "stop rule": explain("stop rule"),
    "anchors": explain("anchors"),
    "prompt log": explain("prompt log", "The protocol compared is the one chosen above (docs: Using it in "
                                        "napari, 'Prompt log')"),
    "log file": "the CSV file the prompt log's rows are added to (empty: {default})",
    "drawn vs protocol": "whether drawn prompts are logged and where; then how the last drawn prompt compares "
                         "with the protocol's: box overlap (IoU), centre offset and the DSC of each",
    "progress": "how far the running job is: slices done of the slices to do",
    # the Compare widget
    "target label": explain("target label", "It follows the object chosen in the Segment widget when the "
                                            "prediction compared is that image's"),
    "DSC (all)": explain("dsc", "Here: of the whole prediction, every slice"),
    "DSC (slice)": explain("dsc", "Here: of the slice (frame) on screen"),
    "why": "why the whole prediction missed: its largest error part, then the largest shares of the error "
           "(they add up to 1 - DSC). leak: false positives on slices without ground truth; missed slices: false "
           "negatives on slices without prediction; off target: a piece of prediction touching no ground truth; "
           "over / under: too much / too little at the object's border on slices with both",
    "worst": "the worst slice shown (lowest DSC among the slices with the target), its rank and its DSC",
    "prompt sensitivity": explain("prompt sensitivity", "It runs the Segment widget's model and shows where "
                                                        "the runs agree, their DSC spread and the worst run"),
    "perturbed runs": explain("perturbed runs"),
    "runs": "perturbed runs done so far",
    "DSC spread": "the lowest, median and highest DSC of the perturbed runs against the ground truth: a wide "
                  "spread means the result depends on the prompt",
    "agreement map": explain("agreement map"),
    "sensitivity": "what the prompt sensitivity did last",
    # the Benchmark widget
    "layout": explain("layout"),
    "bench protocol": protocol_tip("each case's prompt"),
    "targets": explain("targets"),
    "protocol options": explain("protocol options"),
    "propagation rules": explain("propagation", "The rules: the data's default (volumes and videos measured "
                                                "apart) or a preset (medsam-eval run --propagation)"),
    "propagation margin": explain("margin", f"-1 (the default) keeps the rules' own: {RULES_MARGIN}"),
    "seed": explain("seed"),
    "workers": explain("workers"),
    "executor": explain("executor"),
    "ray address": explain("ray address"),
    "bench precision": explain("precision", "The rows' precision column records it"),
    "bench progress": "cases done, moving with the slices of the case running",
}
TIPS = {name: wrapped(text) for name, text in TIPS.items()}

#: a table column's tooltip, by its header
HEADERS: dict[str, str] = {
    "case": "the case (image) the line is about",
    "target": "the structure scored: its name and its number (label value)",
    "task": "the dataset and the target (structure) scored, e.g. hippocampus_mri/anterior",
    "status": "ok, or why the case failed (hover a failed line for the error)",
    "why": "why the result missed: its largest error part (leak, missed slices, off target, over, under), ok "
           "at DSC >= 0.9; hover for every part's share and slices",
    "n": "the cases scored (failed ones in brackets)",
    "median DSC": explain("dsc", "The median over the task's cases"),
    "DSC IQR": explain("iqr", "Of DSC"),
    "median NSD": explain("nsd", "The median over the task's cases"),
    "paired": "cases and targets scored in both runs: the statistics use these",
    "only A": "lines only run A has", "only B": "lines only run B has",
    "unscored": "lines failed or not scored in one of the runs",
    "median A": "the median DSC of run A over the paired cases", "median B": "the same for run B",
    "median diff (B-A)": "the median of B's DSC minus A's over the paired cases: above 0, B did better",
    "B better / A better": "how many paired cases scored higher in B, and how many in A",
    "note": "why a statistic is missing or approximate",
    "DSC A": "the case's DSC in run A", "DSC B": "the case's DSC in run B",
    "B-A": "B's DSC minus A's for this case: above 0, B did better",
    "why not paired": "why the line is left out of the statistics (missing from a run, failed, unscored)",
}


def header_tip(header: str) -> str:
    """A column's tooltip: its own (:data:`HEADERS`), else the glossary's text of the term it names."""
    if header in HEADERS:
        return wrapped(HEADERS[header])
    for term in terms_in(header):
        return wrapped(TERMS[term])
    return ""


__all__ = ["HEADERS", "RULES_MARGIN", "TIPS", "header_tip", "protocol_tip", "wrapped"]
