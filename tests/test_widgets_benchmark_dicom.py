"""The Benchmark dock saves a run's predictions as DICOM SEGs when asked (*save predictions as dicom-seg*), as
``run --prediction-format dicom-seg`` does: each a SEG on its case's own series, each target a named segment
holding the voxels its row scored."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pydicom
import pytest
from superqt.utils._qthreading import WorkerBase

from plugin_dock import dock
from test_dicom_seg_write import CT_LABEL_NAMES, make_phantom_ct, truth_beside, write_ct_series
from napari_medsam_eval.benchmark.prediction_files import PREDICTION_FORMATS
from napari_medsam_eval.io import read_case, read_label

pytestmark = pytest.mark.gui


def _dicom_dataset(root):
    """One case: the CT phantom as a DICOM series (``patient1/image``) with its label map beside it."""
    hu, label = make_phantom_ct(np.random.default_rng(0))
    write_ct_series(root / "patient1" / "image", hu)
    return truth_beside(root, label)


def test_the_dock_saves_dicom_seg_predictions_on_each_cases_series(make_napari_viewer, tmp_path, qtbot):
    root = _dicom_dataset(tmp_path / "dataset")
    viewer = make_napari_viewer()
    widget = dock(viewer, "benchmark")
    assert widget.prediction_format.value == "nifti" and list(widget.prediction_format.choices) == \
        list(PREDICTION_FORMATS)
    widget.dataset.value, widget.out_dir.value = root, tmp_path / "run"
    widget.model.value, widget.limit.value, widget.prediction_format.value = "box", 1, "dicom-seg"
    worker = widget.run()
    qtbot.waitUntil(lambda: worker not in WorkerBase._worker_set, timeout=300_000)
    rows = pd.read_csv(tmp_path / "run" / "results.csv")
    assert set(rows["status"]) == {"ok"} and len(rows) == len(CT_LABEL_NAMES), rows["error"].tolist()
    for _, row in rows.iterrows():
        path = tmp_path / "run" / row["prediction_path"]
        assert path.suffix == ".dcm" and pydicom.dcmread(path, stop_before_pixels=True).Modality == "SEG"
        case = read_case(root / row["case_id"] / "image")
        saved = read_label(path, case)
        target = next(t for t in saved.info["targets"] if t.name == row["label_name"])
        assert int(target.mask(saved.array).sum()) == row["pred_voxels"] > 0
