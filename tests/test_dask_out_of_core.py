"""Streams over chunks of Dask and memory-mapped arrays, and the SGD on Dask input."""

import tracemalloc

import numpy as np
import pytest

from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)

from .conftest import memmap_stream

da = pytest.importorskip("dask.array")


def _data(n=4000, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, (X[:, 0] - X[:, 1] > 0).astype(int)


def test_partial_fit_over_dask_blocks_is_the_stream_of_numpy_chunks():
    X, y = _data()
    kw = dict(feature_norm=3.0, random_state=0)
    local, dist = DPLogisticRegression(**kw), DPLogisticRegression(**kw)
    Xd, yd = da.from_array(X, chunks=(1000, 4)), da.from_array(y, chunks=1000)
    for k, (xb, yb) in enumerate(zip(Xd.blocks, yd.blocks, strict=True)):
        dist.partial_fit(xb, yb, classes=[0, 1])  # one block gathered at a time
        local.partial_fit(X[1000 * k : 1000 * (k + 1)], y[1000 * k : 1000 * (k + 1)], [0, 1])
    np.testing.assert_array_equal(dist.coef_, local.coef_)
    assert dist.privacy_ledger_ == local.privacy_ledger_
    dist.delete_samples([5, 2500])
    local.delete_samples([5, 2500])
    np.testing.assert_array_equal(dist.coef_, local.coef_)


def test_unlearnable_sgd_gathers_dask_input_into_the_in_memory_fit():
    # Per-step batches stay in memory: a batch gradient is ~50 us, a Dask task
    # round trip ~4 ms (benchmarks/bench_dask.py), and the rows are kept for
    # certified deletion anyway. A Dask array is gathered, with the same result.
    X, y = _data(2000)
    local = UnlearnableSGDClassifier(random_state=0).fit(X, y)
    dist = UnlearnableSGDClassifier(random_state=0).fit(
        da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    )
    np.testing.assert_array_equal(dist.coef_, local.coef_)
    assert dist.privacy_ledger_ == local.privacy_ledger_


def test_partial_fit_over_a_memmap_keeps_one_chunk_beyond_the_registry(tmp_path):
    n, d, chunk = 100_000, 20, 5_000
    data = memmap_stream(tmp_path / "X.npy", n, d)
    reg = DPLinearRegression(feature_norm=4.0, target_bound=1.0, random_state=0)
    tracemalloc.start()
    try:
        for start in range(0, n, chunk):
            block = data[start : start + chunk]
            reg.partial_fit(block[:, :d], block[:, d])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    registry = reg.unlearning_state_.registry.nbytes()
    assert reg.unlearning_state_.registry.n_samples == n
    # What stays is the deletion registry (int16 codes, about 2 (d + 1) bytes a
    # row, with its growth margin); the stream itself adds at most a few chunks.
    assert peak <= 1.5 * registry + 8 * chunk * (d + 1) * 8
    assert peak < 0.75 * n * d * 8  # never the data set in memory
