"""DPLinearRegression's deletion path: no Gram-sized temporaries, same numbers.

A deletion re-releases in place (the node's noisy matrix, the noise drawn in a
scratch the tree keeps), forms the deleted rows' Gram product in bands, and
builds the solve in a scratch matrix the state keeps (scratches never
pickled). These tests check that no ``q x q`` array is allocated by a one-row
deletion and that every variant gives the values of the plain computation,
after pickling, after ``partial_fit`` and whatever the scratches hold.
"""

import pickle
import tracemalloc

import numpy as np
import pytest

from sklearn_dpu.linear_model import DPLinearRegression, _lifted_solve
from sklearn_dpu.linear_model import _sufficient_statistics as ss
from sklearn_dpu.privacy import mechanisms
from sklearn_dpu.privacy.mechanisms import GaussianMechanism

D = 150  # q = 152: a Gram matrix is 185 KB, several bands of each kind


def _data(n=600, d=D, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.clip(X @ rng.normal(size=d) / np.sqrt(d), -2, 2)
    return X, y


def _fit(X, y):
    return DPLinearRegression(
        epsilon=2.0, feature_norm=float(np.sqrt(X.shape[1])), target_bound=2.0, random_state=0
    ).fit(X, y)


def _model(reg):
    return np.r_[reg.coef_, reg.intercept_]


def test_one_row_deletion_allocates_no_gram_sized_array():
    d = 400  # a Gram matrix (1.3 MB) well above the bands' temporaries (< 0.4 MB)
    X, y = _data(n=1000, d=d)
    reg = _fit(X, y)
    reg.delete_samples([0])  # lazy one-time set-ups out of the way
    gram_bytes = (d + 2) ** 2 * 8
    tracemalloc.start()
    try:
        reg.delete_samples([1])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Before: the deleted row's q x q product, a fresh noisy matrix and a copy
    # of the slopes' block, each one Gram matrix.
    assert peak < gram_bytes / 2, (peak, gram_bytes)


def _deletions(reg, batches, between=lambda reg: reg):
    models = []
    for batch in batches:
        reg = between(reg)
        models.append(_model(reg.delete_samples(batch)))
    return models


@pytest.mark.parametrize("chunks", [1, 3])
def test_deletions_same_after_pickling_and_whatever_the_scratch_holds(chunks):
    X, y = _data()
    bounds = np.linspace(0, len(X), chunks + 1).astype(int)

    def fitted():
        reg = _fit(X[: bounds[1]], y[: bounds[1]])
        for lo, hi in zip(bounds[1:-1], bounds[2:], strict=True):
            reg.partial_fit(X[lo:hi], y[lo:hi])
        return reg

    batches = [[0], [599, 5], list(range(10, 40))]  # rows of the first and last chunks
    expected = _deletions(fitted(), batches)

    def reload(reg):
        assert "_solve_buffer" not in reg.unlearning_state_.__getstate__()
        assert "_eigen_buffer" not in reg.unlearning_state_.__getstate__()
        assert "_scratch" not in reg.unlearning_state_.statistics.__getstate__()
        return pickle.loads(pickle.dumps(reg))

    def dirty(reg):
        reg.unlearning_state_.solve_buffer(D).fill(np.nan)
        reg.unlearning_state_.eigen_buffer(D).fill(np.nan)
        reg.unlearning_state_.statistics._scratch.fill(np.nan)
        return reg

    for between in (reload, dirty):
        got = _deletions(fitted(), batches, between)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n_rows", [1, 3, 65])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_banded_gram_subtraction_is_exact(n_rows, fit_intercept):
    rng = np.random.default_rng(1)
    codes = rng.integers(-(2**14), 2**14, size=(200, D + 1)).astype(np.int16)
    gram = ss.gram_of_codes(codes, fit_intercept)
    expected = gram - ss.gram_of_codes(codes[:n_rows], fit_intercept)
    ss.subtract_gram_of_codes(gram, codes[:n_rows], fit_intercept)
    np.testing.assert_array_equal(gram, expected)


@pytest.mark.parametrize("extreme", [2**14, 2**20])
def test_one_row_subtraction_is_exact_at_the_extremes(extreme):
    # Codes at +-2**14 (and the intercept's 2**14): products of 2**28 in
    # int32; larger values (not codes) take int64 products, still exact.
    row = np.array([extreme, -extreme, 3.0, -1.0] * 300)
    gram = np.full((len(row), len(row)), 2**40, dtype=np.int64)
    expected = gram - np.outer(row.astype(np.int64), row.astype(np.int64))
    ss._subtract_outer(gram, row)
    np.testing.assert_array_equal(gram, expected)


@pytest.mark.parametrize("entries", [10**9, 1 << 12, 1])  # 128 rows, 26 rows, one row
def test_symmetric_noise_independent_of_band_size_and_scratch(monkeypatch, entries):
    mechanism = GaussianMechanism(1.0, 2.0)
    M = np.arange(float(D * D)).reshape(D, D)
    M = M + M.T
    expected = mechanism.release_symmetric(M, np.random.default_rng(3))
    monkeypatch.setattr(mechanisms, "_MIRROR_ENTRIES", entries)
    plain = mechanism.release_symmetric(M, np.random.default_rng(3))
    work = np.full(len(mechanisms.symmetric_scratch(D)), np.nan)
    scratch = mechanism.release_symmetric(M, np.random.default_rng(3), work=work)
    in_place = mechanism.release_symmetric(M.copy(), np.random.default_rng(3), True, work)
    for got in (plain, scratch, in_place):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(expected, expected.T)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("lanczos", [True, False])
def test_solve_in_scratch_equals_solve_in_fresh_array(fit_intercept, lanczos):
    rng = np.random.default_rng(2)
    # slopes above _DENSE_SLOPES: the Lanczos path, which makes the float32
    # copy in the scratch; at or below, LAPACK, which leaves it alone
    slopes = _lifted_solve._DENSE_SLOPES + (9 if lanczos else 0)
    q = slopes + 1 + fit_intercept
    A = rng.normal(size=(q, q))
    gram = A @ A.T + 0.1 * np.eye(q)
    n_coef = q - 1
    n_slopes = n_coef - fit_intercept
    ridge = np.full(n_coef, 0.5)
    fresh = ss.solve_noisy_gram(gram, n_coef, ridge, 1.0, fit_intercept)
    work = np.full((n_slopes, n_slopes), np.nan)
    scratch = ss.solve_noisy_gram(gram, n_coef, ridge, 1.0, fit_intercept, work=work)
    np.testing.assert_array_equal(scratch, fresh)
    single = np.full((n_slopes, n_slopes), np.nan, dtype=np.float32)
    both = ss.solve_noisy_gram(gram, n_coef, ridge, 1.0, fit_intercept, work, single)
    np.testing.assert_array_equal(both, fresh)
    # the float32 copy was made in it, or it was not touched
    assert not np.isnan(single).any() if lanczos else np.isnan(single).all()
    # A scratch of the wrong shape is not used.
    odd = ss.solve_noisy_gram(gram, n_coef, ridge, 1.0, fit_intercept, work=np.empty((2, 2)))
    np.testing.assert_array_equal(odd, fresh)
