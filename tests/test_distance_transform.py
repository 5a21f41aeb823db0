"""The compiled distance transform behind NSD/HD95 against scipy's exact one."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from napari_medsam_eval.evaluation import distance_transform as _edt


def test_numba_engine_is_in_use():
    # numba is a dependency: the fast path must not silently fall back to scipy
    assert _edt.ENGINE == "numba"


@pytest.mark.parametrize("seed", range(4))
def test_same_distances_as_scipy_on_random_masks(seed):
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(60):
        ndim = int(rng.choice([2, 3]))
        shape = tuple(int(v) for v in rng.integers(1, 30, size=ndim))
        features = rng.random(shape) < rng.choice([0.002, 0.05, 0.4])
        if not features.any():
            continue
        queries = rng.random(shape) < 0.5
        spacing = tuple(float(v) for v in rng.choice([0.31, 0.7, 1.0, 2.5, 5.0], size=ndim))
        ours = _edt._numba_distances(features, np.nonzero(queries), spacing)
        reference = ndimage.distance_transform_edt(~features, sampling=spacing)[queries]
        assert ours.shape == reference.shape
        worst = max(worst, float(np.abs(ours - reference).max(initial=0.0)))
    assert worst < 1e-9


def test_empty_features_give_inf_and_single_line_shapes_work():
    queries = np.ones((1, 1, 5), bool)
    assert np.isinf(_edt.distances_to_features(np.zeros((1, 1, 5), bool), queries, (1.0, 1.0, 1.0))).all()
    features = np.zeros((1, 1, 5), bool)
    features[0, 0, 4] = True
    got = _edt.distances_to_features(features, queries, (1.0, 1.0, 0.5))
    assert np.allclose(got, [2.0, 1.5, 1.0, 0.5, 0.0])


def test_both_directions_on_a_thread_equal_the_serial_result(monkeypatch):
    rng = np.random.default_rng(7)
    a = ndimage.binary_dilation(rng.random((40, 48, 50)) < 0.002, iterations=3)
    b = np.roll(a, 2, axis=1)
    assert a.size >= _edt.PARALLEL_MIN_VOXELS
    spacing = (2.0, 0.8, 0.8)
    monkeypatch.setenv("MEDSAM_EVAL_METRIC_THREADS", "2")
    parallel = _edt.distances_both_ways(a, b, spacing)
    monkeypatch.setenv("MEDSAM_EVAL_METRIC_THREADS", "1")
    serial = _edt.distances_both_ways(a, b, spacing)
    for got, want in zip(parallel, serial):
        assert np.array_equal(got, want)
    assert np.array_equal(serial[0], _edt.distances_to_features(b, a, spacing))


def test_thread_budget_follows_the_environment(monkeypatch):
    monkeypatch.delenv("MEDSAM_EVAL_METRIC_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what a benchmark worker on 2 cores sets
    assert _edt.threads_allowed() == 1
    monkeypatch.setenv("MEDSAM_EVAL_METRIC_THREADS", "4")
    assert _edt.threads_allowed() == 2
