"""scipy.sparse input for DPLogisticRegression and UnlearnableSGDClassifier:
the same model as dense input with the same values and seed, sparse storage
of the deletion metadata, no dense copy of the training set."""

import io
import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_dpu import io as dpu_io
from sklearn_dpu.linear_model import DPLogisticRegression, UnlearnableSGDClassifier
from sklearn_dpu.linear_model._logistic_solvers import normalized_rows
from sklearn_dpu.linear_model._sparse_rows import (
    SparseSampleRegistry,
    sparse_clip_scales,
    sparse_row_norms,
)
from sklearn_dpu.privacy.clipping import clip_scales, row_norms

CONTAINERS = [sp.csr_matrix, sp.csc_matrix, sp.coo_matrix, sp.csr_array]


def _data(n=500, d=25, density=0.2, seed=0, n_classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    X[:5] *= 40.0  # long rows: clipped
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    if n_classes == 3:
        y[::7] = 2
    return X, y


def _stored_nnz(estimator) -> int:
    return estimator.unlearning_state_.registry.rows.design.nnz


def test_clipping_scales_match_dense():
    """Row norms and clipping factors from the non-zeros equal the dense ones
    (overflowing rows included), and the normalized rows are the dense ones."""
    X, _ = _data()
    X[7, 3] = 1e200  # a square that overflows
    X[8, :2] = [3e160, -4e160]
    Xs = sp.csr_matrix(X)
    np.testing.assert_allclose(sparse_row_norms(Xs), row_norms(X), rtol=1e-15)
    # The sparse target is lower by (k + 2) epsilons for k non-zeros (its
    # sums run one after another): the factors agree to that margin.
    np.testing.assert_allclose(sparse_clip_scales(Xs, 2.0), clip_scales(X, 2.0), rtol=1e-13)
    dense = normalized_rows(X, None, 2.0, True)[:, :-1]
    sparse = normalized_rows(Xs, None, 2.0, True)[:, :-1]
    assert sp.issparse(sparse)
    np.testing.assert_allclose(sparse.toarray(), dense, rtol=1e-13, atol=0)
    assert np.all(np.linalg.norm(sparse.toarray(), axis=1) <= np.sqrt(2))


@pytest.mark.parametrize(
    "params",
    [
        dict(solver="output"),
        dict(solver="objective"),
        dict(solver="noisy_gd"),
        dict(solver="output", feature_norm="auto"),
    ],
    ids=lambda p: "-".join(map(str, p.values())),
)
@pytest.mark.parametrize("n_classes", [2, 3])
def test_logistic_sparse_equals_dense(params, n_classes):
    """Same values and seed: the same ledger, coefficients equal to 1e-10
    (sparse products sum in another order than BLAS), through two deletions."""
    X, y = _data(n_classes=n_classes)
    params = dict(dict(feature_norm=3.0, random_state=0), **params)
    dense = DPLogisticRegression(**params).fit(X, y)
    for container in CONTAINERS:
        sparse = DPLogisticRegression(**params).fit(container(X), y)
        assert sparse.privacy_ledger_ == dense.privacy_ledger_
        np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=0, atol=1e-10)
        np.testing.assert_allclose(sparse.intercept_, dense.intercept_, rtol=0, atol=1e-10)
    assert isinstance(sparse.unlearning_state_.registry, SparseSampleRegistry)
    for request in ([0, 1, 2], list(range(10, 60))):
        dense.delete_samples(request)
        sparse.delete_samples(request)
        assert sparse.deletion_log_[-1].method == dense.deletion_log_[-1].method
        np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=0, atol=1e-10)
    # The deleted rows' entries are gone from the storage, not stored zeros
    # (each live row also stores its intercept feature).
    live = np.setdiff1d(np.arange(len(X)), [0, 1, 2, *range(10, 60)])
    assert _stored_nnz(sparse) == np.count_nonzero(X[live]) + len(live)
    np.testing.assert_allclose(
        sparse.predict_proba(sp.csr_matrix(X)), dense.predict_proba(X), rtol=0, atol=1e-10
    )


@pytest.mark.parametrize("n_classes", [2, 3])
def test_logistic_scheduled_fine_tune_reads_sparse_rows(monkeypatch, prefer_fine_tune, n_classes):
    """The scheduled fine-tune (Descent-to-Delete) on a sparse registry:
    the dense model's deletion to rounding (before: a TypeError in the
    preconditioner, and the row could not be deleted)."""
    from sklearn_dpu.linear_model import _logistic_deletion

    monkeypatch.setattr(_logistic_deletion, "_resolve_work", lambda *a, **k: np.inf)
    X, y = _data(n=2000, d=10, density=0.5, n_classes=n_classes)
    params = dict(solver="output", feature_norm=3.0, deletion_epsilon=0.1, random_state=0)
    dense = DPLogisticRegression(**params).fit(X, y)
    sparse = DPLogisticRegression(**params).fit(sp.csr_matrix(X), y)
    for est in (dense, sparse):
        est.delete_samples([0, 7])
        assert est.deletion_log_[-1].cost["gradient_steps"] is not None  # the schedule ran
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=0, atol=1e-10)


def test_logistic_partial_fit_sparse_and_mixed_chunks():
    """A stream of sparse chunks, and dense chunks in a sparse stream (stored
    sparse), give the dense stream's model."""
    X, y = _data(n_classes=3)
    params = dict(feature_norm=3.0, random_state=0)
    dense, sparse = DPLogisticRegression(**params), DPLogisticRegression(**params)
    dense.partial_fit(X[:250], y[:250], classes=[0, 1, 2])
    sparse.partial_fit(sp.csr_matrix(X[:250]), y[:250], classes=[0, 1, 2])
    dense.partial_fit(X[250:], y[250:])
    sparse.partial_fit(X[250:], y[250:])  # a dense chunk: stored sparse
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=0, atol=1e-10)
    assert _stored_nnz(sparse) == np.count_nonzero(X) + len(X)
    dense.delete_samples(list(range(0, 500, 3)))
    sparse.delete_samples(list(range(0, 500, 3)))
    np.testing.assert_allclose(sparse.coef_, dense.coef_, rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    "params",
    [
        dict(),
        dict(loss="hinge", feature_norm="auto"),
        dict(batch_sampling="fixed", solver="sgd", loss="modified_huber", epsilon=np.inf),
    ],
    ids=["log_loss", "hinge-auto", "fixed"],
)
def test_sgd_sparse_equals_dense_bit_for_bit(params):
    """The stored rows are the same float32 values, so the coupled run, its
    insertions and deletions are bit-identical to the dense ones."""
    X, y = _data(n_classes=3)
    params = dict(dict(feature_norm=2.0, max_iter=2, random_state=0), **params)
    dense = UnlearnableSGDClassifier(**params).fit(X, y)
    sparse = UnlearnableSGDClassifier(**params).fit(sp.csc_matrix(X), y)
    assert isinstance(sparse.unlearning_state_.registry, SparseSampleRegistry)
    np.testing.assert_array_equal(sparse.coef_, dense.coef_)
    assert sparse.privacy_ledger_ == dense.privacy_ledger_
    ids = np.arange(1000, 1040)
    dense.partial_fit(X[:40], y[:40], sample_id=ids)
    sparse.partial_fit(sp.coo_matrix(X[:40]), y[:40], sample_id=ids)
    np.testing.assert_array_equal(sparse.coef_, dense.coef_)
    request = [0, 1, *range(5, 300), 1003]
    dense.delete_samples(request)
    sparse.delete_samples(request)
    np.testing.assert_array_equal(sparse.coef_, dense.coef_)
    assert sparse.privacy_ledger_ == dense.privacy_ledger_
    live = np.setdiff1d(np.arange(len(X)), [0, 1, *range(5, 300)])
    assert _stored_nnz(sparse) == np.count_nonzero(X[live]) + np.count_nonzero(X[:40]) - (
        np.count_nonzero(X[3])
    )
    np.testing.assert_allclose(
        sparse.decision_function(sp.csr_matrix(X)), dense.decision_function(X), atol=1e-12
    )


@pytest.mark.parametrize("make", [UnlearnableSGDClassifier, DPLogisticRegression])
def test_sparse_fit_saves_and_reloads(make):
    X, y = _data()
    estimator = make(random_state=0).fit(sp.csr_matrix(X), y)
    buffer = io.BytesIO()
    dpu_io.save(estimator, buffer)
    buffer.seek(0)
    loaded = dpu_io.load(buffer)
    estimator.delete_samples([3, 4])
    loaded.delete_samples([3, 4])
    np.testing.assert_array_equal(loaded.coef_, estimator.coef_)


@pytest.mark.parametrize(
    "make",
    [
        lambda: DPLogisticRegression(solver="output", feature_norm=1.0, random_state=0),
        # epsilon=inf: the accounting (not under test) is instant
        lambda: UnlearnableSGDClassifier(
            feature_norm=1.0, max_iter=2, epsilon=np.inf, random_state=0
        ),
    ],
    ids=["logistic", "sgd"],
)
def test_sparse_fit_never_densifies_the_training_set(make):
    """n x d = 3000 x 8000 at density 5e-4: a dense float64 copy is 192 MB;
    the fit and a deletion stay far below it (traced allocations; measured
    about 5 MB)."""
    X = sp.random(3000, 8000, density=5e-4, format="csr", random_state=0)
    y = np.arange(3000) % 2
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator = make().fit(X, y)
            estimator.delete_samples([0])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40e6, peak / 1e6


def test_linear_regression_refuses_sparse_and_stays_as_it_was():
    """DPLinearRegression's fixed-point code is dense: a clear error, no change."""
    from sklearn_dpu.linear_model import DPLinearRegression

    X, _ = _data()
    t = X[:, 0].copy()
    estimator = DPLinearRegression(feature_norm=3.0, target_bound=3.0, random_state=0).fit(X, t)
    before = estimator.coef_.copy(), list(estimator.privacy_ledger_)
    with pytest.raises(TypeError, match="dense data is required"):
        estimator.fit(sp.csr_matrix(X), t)
    np.testing.assert_array_equal(estimator.coef_, before[0])
    assert estimator.privacy_ledger_ == before[1]


@pytest.mark.parametrize(
    "make",
    [
        lambda: DPLogisticRegression(feature_norm=1.0, solver="output", random_state=0),
        lambda: DPLogisticRegression(feature_norm=1.0, solver="noisy_gd", random_state=0),
        lambda: DPLogisticRegression(feature_norm="auto", random_state=0),
        lambda: UnlearnableSGDClassifier(feature_norm=1.0, random_state=0),
    ],
)
def test_duplicate_entries_are_summed_in_a_copy_and_checked_finite(make):
    """A CSR row may store one entry twice. The rows are canonicalized in
    validation, on a copy: the model equals the dense one, the caller's
    matrix is untouched, and duplicates that overflow when summed are refused
    before any charge (before: such a row escaped clipping and the released
    model was NaN, the caller's matrix was rewritten, and the 'auto' norm
    bound was taken over the stored entries)."""
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(300, 3))
    dense[0] = [2.0, 0.0, 0.0]
    y = rng.integers(0, 2, 300)
    base = sp.csr_matrix(dense[1:])
    data = np.r_[1.0, 1.0, base.data]
    indices = np.r_[0, 0, base.indices]
    indptr = np.r_[0, base.indptr + 2]
    X = sp.csr_matrix((data, indices, indptr), shape=(300, 3))  # row 0: (0, 0) twice
    stored = (X.data.copy(), X.indices.copy(), X.indptr.copy())
    np.testing.assert_allclose(make().fit(X, y).coef_, make().fit(dense, y).coef_, atol=1e-12)
    for before, after in zip(stored, (X.data, X.indices, X.indptr), strict=True):
        np.testing.assert_array_equal(before, after)
    overflowing = sp.csr_matrix((np.r_[1e308, 1e308, base.data], indices, indptr), shape=(300, 3))
    estimator = make()
    with pytest.raises(ValueError, match="infinity"):
        estimator.fit(overflowing, y)
    assert not hasattr(estimator, "coef_")
