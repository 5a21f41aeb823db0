"""Stop reasons in plain words (propagation/stop_words.py): every rule has a sentence and a label, with
the value measured and the limit crossed; videos speak of frames."""
from __future__ import annotations

import numpy as np

from napari_medsam_eval.propagation.rules import STOP_REASONS, Reference, PropagationRules, stop_finding
from napari_medsam_eval.propagation.slice_by_slice import DirectionStop, PropagationRecord
from napari_medsam_eval.propagation.stop_words import STOP_LABELS, stop_sentence


def test_every_rule_has_words_and_a_label():
    assert set(STOP_LABELS) == set(STOP_REASONS)
    for reason in STOP_REASONS:
        if reason != "end":
            assert stop_sentence(reason) != reason and "(" not in stop_sentence(reason), reason  # no numbers: none shown


def test_the_iou_stop_names_the_overlap_it_measured():
    previous = np.zeros((20, 20), bool)
    previous[2:10, 2:10] = True
    moved = np.zeros((20, 20), bool)
    moved[8:16, 8:16] = True  # overlaps 4 of 124 pixels
    finding = stop_finding(PropagationRules(intensity_k=None), Reference(64, 0.0, 0.0, float("nan")), previous,
                           moved, None, np.zeros((20, 20), np.uint8), None)
    assert finding.reason == "iou" and finding.limit == 0.3
    assert np.isclose(finding.measured, 4 / 124)
    stop = DirectionStop("up", 8, 9, finding.reason, finding.measured, finding.limit)
    assert stop.text() == ("up: kept to slice 8, stopped at slice 9: the mask changed too much from the slice "
                           "before (overlap IoU 0.03 < 0.30)")


def test_a_video_speaks_of_frames():
    record = PropagationRecord(stops=[DirectionStop("forward", 30, None, "end"),
                                      DirectionStop("backward", 4, 3, "empty")], unit="frame")
    assert record.summary() == ("forward: kept to frame 30 (the end of the video); "
                                "backward: kept to frame 4, stopped at frame 3: the model found nothing on this frame")
    assert "slice" not in record.summary()
