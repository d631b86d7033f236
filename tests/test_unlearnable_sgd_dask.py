"""UnlearnableSGDClassifier on Dask input: rows stored on the workers,
batches of a block of steps fetched per round trip, the same run as in memory."""

import pickle

import numpy as np
import pytest

from sklearn_dpu.linear_model import UnlearnableSGDClassifier
from sklearn_dpu.linear_model._sgd_dask import WorkerRows

distributed = pytest.importorskip("dask.distributed")
da = pytest.importorskip("dask.array")

CONFIGS = {
    "nesterov-poisson": {},
    "sgd-poisson": {"solver": "sgd"},
    "fixed-nonprivate": {"batch_sampling": "fixed", "epsilon": np.inf},
}


def _data(n=3000, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.3 * X[:, 1] > 0, "b", "a")
    return X, y


def _fit(X, y, **params):
    base = {"feature_norm": 3.0, "random_state": 0, "max_iter": 40}
    return UnlearnableSGDClassifier(**{**base, **params}).fit(X, y)


def _same(a, b):
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
    assert a.privacy_ledger_ == b.privacy_ledger_
    assert np.array_equal(a.classes_, b.classes_)


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_dask_fit_and_deletions_are_bit_identical_to_numpy(config):
    X, y = _data()
    params = CONFIGS[config]
    Xd, yd = da.from_array(X, chunks=700), da.from_array(y, chunks=700)
    a, b = _fit(X, y, **params), _fit(Xd, yd, **params)
    rows = b.unlearning_state_.registry.rows
    assert isinstance(rows, WorkerRows)  # stored as Dask blocks, not an ndarray
    _same(a, b)
    doomed = list(range(0, 400, 7))
    a.delete_samples(doomed), b.delete_samples(doomed)
    _same(a, b)
    assert a.deletion_log_[-1].method == b.deletion_log_[-1].method
    rows = b.unlearning_state_.registry.rows
    assert isinstance(rows, WorkerRows)
    assert not np.asarray(rows)[doomed].any()  # zeroed where they are stored
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))
    reloaded = pickle.loads(pickle.dumps(b))  # saved: the rows come along, in memory
    assert isinstance(reloaded.unlearning_state_.registry.rows, np.ndarray)
    a.delete_samples([500]), reloaded.delete_samples([500])
    _same(a, reloaded)


def test_one_dask_computation_per_block_of_steps(monkeypatch):
    """The batches of many steps are gathered per round trip, not one per step."""
    X, y = _data()
    calls = []
    take = WorkerRows.take
    monkeypatch.setattr(WorkerRows, "take", lambda self, s: calls.append(len(s)) or take(self, s))
    monkeypatch.setattr(WorkerRows, "chunk_values", 6 * 32 * 10)  # about 10 steps a block
    est = _fit(
        da.from_array(X, chunks=700), da.from_array(y, chunks=700), max_iter=200, batch_size=32
    )
    steps = est.n_iter_
    assert 1 < len(calls) < steps / 3
    assert sum(calls) == est.unlearning_state_.batch_ptr[steps]  # every batch row once


def test_bad_dask_input_is_refused_before_anything_changes():
    X, y = _data()
    X[5, 1] = np.nan
    est = UnlearnableSGDClassifier(feature_norm=3.0, random_state=0)
    with pytest.raises(ValueError, match="NaN"):
        est.fit(da.from_array(X, chunks=700), da.from_array(y, chunks=700))
    assert not hasattr(est, "coef_") and not hasattr(est, "privacy_ledger_")
    X, y = _data()
    with pytest.raises(ValueError, match="classes"):
        est.fit(da.from_array(X, chunks=700), da.from_array(y, chunks=700), classes=["a", "c"])
    assert not hasattr(est, "coef_")


def test_auto_feature_norm_reads_dask_input_into_memory():
    """The private row-norm bound is computed in memory: documented fallback."""
    X, y = _data()
    a = _fit(X, y, feature_norm="auto")
    b = _fit(da.from_array(X, chunks=700), da.from_array(y, chunks=700), feature_norm="auto")
    assert isinstance(b.unlearning_state_.registry.rows, np.ndarray)
    _same(a, b)


def test_local_cluster_rows_live_on_the_workers(client):
    X, y = _data()
    a = _fit(X, y)
    b = _fit(da.from_array(X, chunks=700), da.from_array(y, chunks=700))
    rows = b.unlearning_state_.registry.rows
    futures = distributed.futures_of(rows.array)
    assert futures and all(f.status == "finished" for f in futures)
    assert sum(len(keys) for keys in client.has_what().values()) >= len(futures)
    _same(a, b)
    a.delete_samples([3, 30, 300]), b.delete_samples([3, 30, 300])
    _same(a, b)
    assert distributed.futures_of(b.unlearning_state_.registry.rows.array)
