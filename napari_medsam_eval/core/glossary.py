"""Terms of the field in plain words, for a clinician: one definition each, shared by the docks and the CLI.

:data:`TERMS` maps a term as a label or a column header writes it (lower case) to what it is and what
its default does, in words a reader without the field's jargon follows; :data:`PROTOCOL_WORDS` says
what each prompt protocol draws. The napari docks build their tooltips from these
(``_widgets/common/_words.py``), ``medsam-eval run``'s help reuses the ones its options share with the
Benchmark widget, and :func:`terms_in` finds the terms a label uses, so a test can require that every
control naming one explains it. No Qt, no napari.
"""
from __future__ import annotations

import re

#: what each ground-truth prompt protocol draws, in plain words
PROTOCOL_WORDS: dict[str, str] = {
    "medsam2": "one tight box around the target on its middle slice (first frame of a video where it shows), "
               "then propagated up and down; MedSAM2's own recipe",
    "medsam2-recist": "the medsam2 box, with the mask it gives on that slice as the starting point",
    "litemedsam-3dbox": "the 3D box of the CVPR 2024 challenge, on the target's middle slice",
    "mazurowski": "points or boxes on the largest parts of the target, in one of five modes "
                  "(Mazurowski et al. 2023)",
    "iterative-points": "a first point inside the target, then one point at a time where the mask is wrong",
    "box-jitter": "the medsam2 box moved and resized a little at random (seeded): how robust is the result?",
    "corrections": "the medsam2 box, propagated, then up to a few corrections a simulated user draws where it "
                   "is wrong",
    "replay": "the prompts a person drew, read back from a prompt log",
}

#: the field's terms, as a label or a column header writes them (lower case), in plain words
TERMS: dict[str, str] = {
    "anchors": "the prompts the segmentation is built from, one line per slice: the prompt you propagated "
               "and every slice you corrected since. A correction propagates again only up to the "
               "neighbouring anchors, so slices already fixed stay as they are",
    "protocol": "the fixed recipe that draws the prompt (a box or points) from the ground truth instead of "
                "by hand, so a result can be repeated and compared. The default, medsam2: "
                + PROTOCOL_WORDS["medsam2"],
    "protocol options": "settings of the protocol, written as JSON, e.g. {\"margin\": 10} for a box 10 pixels "
                        "wider than the target; empty: the protocol's own settings",
    "propagation": "carrying a segmentation from the prompted slice to the next ones, one slice (video frame) "
                   "at a time: each slice is prompted with a box around the mask found on the slice before",
    "margin": "how many pixels the box around one slice's mask is widened on each side to prompt the next "
              "slice: wider follows a structure that grows, narrower keeps neighbours out",
    "stop rule": "when propagation stops going further: by default at an empty mask, at a jump in brightness "
                 "inside the mask, or when the mask overlaps the previous slice's too little; 'empty mask "
                 "only' goes on until nothing is found",
    "seed": "a number that fixes the random choices of a protocol (where a moved box lands, which points are "
            "drawn): the same seed gives the same prompts, and so the same result, again. The default 0 "
            "changes nothing for a protocol without random choices, such as medsam2",
    "executor": "where the cases are computed: local (the default) uses this computer's processors; ray "
                "shares the cases out to Ray workers, on this computer or on a cluster of computers (it "
                "needs pip install 'napari-medsam-eval[ray]')",
    "workers": "how many cases are segmented at the same time; with 1 (the default) the progress bar moves "
               "with each slice, more finish sooner on a computer with more cores but take more memory",
    "ray address": "a running Ray cluster to join (HOST:PORT as 'ray start --head' prints it, or auto); "
                   "without one, a Ray is started on this computer for the run. The workers read the cases by "
                   "their path, so the computers must share the folders",
    "precision": "how exactly LiteMedSAM's image encoder computes: fp32 (the default) is the exact model; "
                 "bf16 and int8 are faster on processors built for them, and a mask can move by a few pixels",
    "checkpoint": "the file of the model's trained weights: LiteMedSAM's come with the plugin (leave it "
                  "empty), MedSAM2, SAM2 and SAM need theirs",
    "device": "where the model computes: auto (the default) takes an NVIDIA graphics card (cuda) when one is "
              "usable, else the processor (cpu)",
    "encode ahead": "the model first summarises each slice (its embedding: the slow part), then turns a "
                    "prompt into a mask (fast). Encoding ahead does the slow part for every slice in the "
                    "background, nearest to the slice on screen first, while you draw",
    "first look": "a quicker, slightly less exact first pass: every slice is encoded at a cheaper precision "
                  "first, then again at the model's own; until then masks come from the quick pass, and the "
                  "status line says so",
    "ground truth": "the reference segmentation drawn by an expert (a Labels layer): predictions are scored "
                    "against it, and protocols draw their prompts from it",
    "target label": "the number the structure has in the label maps (e.g. 1 anterior, 2 posterior "
                    "hippocampus): the one prediction value compared with the same ground-truth value",
    "object": "one structure you segment, with its own number (label value) in the prediction layer and its "
              "own prompts",
    "targets": "what is scored, each target as NAME=V[,V...][:lesions]: a region uniting label values "
               "(liver=1,3: the liver with its tumour), one label (tumour=3), or a label's lesions one by one "
               "(lesion=1:lesions: each lesion prompted and judged on its own: found, missed, false positives). "
               "Several are separated by spaces. Empty: the regions the dataset's dataset.json declares, else "
               "each label",
    "region": "the ground-truth labels one object is: empty for its own label value, or several, e.g. 1,3 for "
              "the liver with the tumour inside it (BraTS's whole tumour is 1,2,3). The prompt from ground truth "
              "and Compare's score use the region's mask",
    "mazurowski mode": "the five prompt modes of Mazurowski et al. 2023: 1 a point in the largest part, 2 "
                       "points in the three largest, 3 a box around the largest, 4 boxes around the three "
                       "largest, 5 one box around the whole target",
    "prompt log": "a CSV file where each prompt you draw is written beside the protocol's prompt for the same "
                  "target, with their overlap and scores; it holds case ids and image paths",
    "layout": "how the dataset folder is organised (MSD / nnU-Net, MedSAM npz, videos, 2D images ...); "
              "auto-detect recognises it from its files",
    "dsc": "Dice similarity coefficient: how much the prediction overlaps the ground truth, from 0 (not at "
           "all) to 1 (exactly); twice the shared area divided by the two areas added",
    "nsd": "normalized surface distance: the share of both outlines lying within 2 mm of the other one, from "
           "0 to 1; it judges the border, where DSC judges the area",
    "iqr": "interquartile range: the middle half of the cases scored between these two values",
    "95% ci": "95% confidence interval (bootstrap) of the median difference: the true difference lies in this "
              "range with 95% confidence; a range that holds 0 does not tell the runs apart",
    "wilcoxon p": "the Wilcoxon signed-rank test's p-value: how likely differences between run A and run B at "
                  "least this one-sided would be if both runs were equally good; below 0.05 chance is an "
                  "unlikely explanation (n/a below 6 cases that differ)",
    "prompt sensitivity": "the same prompt given again several times, each shifted and resized a little at "
                          "random, to tell whether a poor result comes from the model or from the prompt",
    "perturbed runs": "how many times the prompt is given again, each time shifted and resized a little at "
                      "random (seeded: the same runs again each time)",
    "agreement map": "for each pixel, the share of the perturbed runs that segmented it: where they agree the "
                     "prompt does not matter, where they split it does",
    "tp/fp/fn": "true positive (in both prediction and ground truth), false positive (predicted only), false "
                "negative (missed: in the ground truth only)",
}

_WORD = r"(?<![\w-]){}(?![\w-])"


def terms_in(text: str) -> list[str]:
    """The :data:`TERMS` that ``text`` (a label, a button's text, a header) names, as whole words, any case."""
    lowered = str(text).lower()
    return [term for term in TERMS if re.search(_WORD.format(re.escape(term)), lowered)]


def explain(term: str, *more: str) -> str:
    """The plain-words text of ``term`` (a key of :data:`TERMS`), with ``more`` sentences after it."""
    return ". ".join([TERMS[term], *more]) if more else TERMS[term]


__all__ = ["PROTOCOL_WORDS", "TERMS", "explain", "terms_in"]
