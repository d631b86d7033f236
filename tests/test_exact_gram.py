"""The blocked float64 Gram of fixed-point codes is the exact integer Gram.

``encode_with_gram`` clips, quantizes and multiplies block by block in
float64; ``gram_of_codes`` does the same on stored codes. Both must equal
``codes.T @ codes`` computed in int64, bit for bit, across block boundaries,
and the codes must be those of the reference ``encode_rows``.
"""

import tracemalloc

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from sklearn_dpu._validation import NonFiniteInputError
from sklearn_dpu.linear_model import _sufficient_statistics as ss
from sklearn_dpu.linear_model._sufficient_statistics import (
    encode_rows,
    encode_with_gram,
    gram_of_codes,
)
from sklearn_dpu.privacy.clipping import clip_rows_l2, clip_scales

_ONE = 1 << 14


def _reference_gram(codes, fit_intercept):
    c = codes.astype(np.int64)
    if fit_intercept:
        c = np.column_stack([c[:, :-1], np.full(len(c), _ONE), c[:, -1]])
    return c.T @ c


def _data(n, d, dtype, seed):
    rng = np.random.default_rng(seed)
    X = (rng.standard_t(2, size=(n, d)) * 3).astype(dtype)
    y = (rng.standard_t(2, size=n) * 5).astype(dtype)
    if dtype == np.float64 and n:
        X[::7] *= 1e200  # rows whose squared norm overflows
        X[1::11] = 0.0
    return X, y


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize(
    ("n", "d", "dtype"),
    [(1, 1, np.float64), (255, 3, np.float32), (257, 3, np.float64), (5000, 40, np.float64)],
)
def test_blocked_gram_is_the_integer_gram(monkeypatch, n, d, dtype, fit_intercept):
    # Small blocks, so that the data cross several block boundaries.
    monkeypatch.setattr(ss, "_ENCODE_MIN_ROWS", 1)
    monkeypatch.setattr(ss, "_ENCODE_MAX_ROWS", 256)
    monkeypatch.setattr(ss, "_BLOCK", 100)
    X, y = _data(n, d, dtype, seed=n)
    reference = encode_rows(X, y, 2.0, 0.3, 4.0)
    codes, gram = encode_with_gram(X, y, 2.0, 0.3, 4.0, fit_intercept)
    assert codes.dtype == np.int16 and np.array_equal(codes, reference)
    expected = _reference_gram(reference, fit_intercept)
    assert gram.dtype == np.int64 and np.array_equal(gram, expected)
    assert np.array_equal(gram_of_codes(reference, fit_intercept), expected)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("max_exact_rows", [1, 7, 1 << 25])
def test_parts_and_flushes_of_the_float64_total_are_exact(
    monkeypatch, fit_intercept, max_exact_rows
):
    # Blocks of at least min(d, _ENCODE_GRAM_ROWS) rows encoded in
    # cache-sized parts (here 3 rows), the float64 total moved into int64
    # every max_exact_rows rows (2**25 in use): still the integer Gram.
    monkeypatch.setattr(ss, "_ENCODE_BYTES", 3 * 8 * (40 + 2))
    monkeypatch.setattr(ss, "_ENCODE_MIN_ROWS", 1)
    monkeypatch.setattr(ss, "_ENCODE_GRAM_ROWS", 16)
    monkeypatch.setattr(ss, "_MAX_EXACT_ROWS", max_exact_rows)
    X, y = _data(301, 40, np.float64, seed=3)
    reference = encode_rows(X, y, 2.0, 0.3, 4.0)
    codes, gram = encode_with_gram(X, y, 2.0, 0.3, 4.0, fit_intercept)
    assert np.array_equal(codes, reference)
    assert np.array_equal(gram, _reference_gram(reference, fit_intercept))


def test_totals_above_2_53_stay_exact_through_a_real_flush():
    # More than 2**25 rows of the largest code in one row range: the float64
    # partial total flushes into int64 once, and the totals pass 2**53,
    # where an int64 + float64 addition in NumPy's float64 loop rounds (it
    # was off by one here, and so was gram_of_codes). No constant patched.
    n, code = 2**25 + 2**16 + 1, 2**14 - 1
    value = (code + 0.5) / 2**14  # codes to `code` under a unit bound
    X, y = np.full((n, 1), value), np.full(n, value)
    with threadpool_limits(1):
        codes, gram = encode_with_gram(X, y, 1.0, 0.0, 1.0, False)
    del X, y
    exact = n * code * code
    assert exact > 2**53
    assert gram.tolist() == [[exact, exact], [exact, exact]]
    assert gram_of_codes(codes, False).tolist() == [[exact, exact], [exact, exact]]


def test_encoder_memory_at_large_d_is_a_few_d_by_d_arrays():
    # A block of min(d, 1024) rows, its product's buffer and the float64
    # total: about 4 d x d arrays at d = 800 with half the rows near the
    # sphere (their copies bounded by the cache-sized parts). A fresh int64
    # total beside them and blocks encoded whole took 6.5.
    n, d = 4000, 800
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((n, d)), rng.standard_normal(n)
    with threadpool_limits(1):
        tracemalloc.start()
        try:
            codes, _ = encode_with_gram(X, y, float(np.sqrt(d)), 0.0, 3.0, True)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert (peak - codes.nbytes) / (d * d * 8) < 4.6


def test_extreme_codes_stay_exact():
    # Every code at +-2**14: the largest products, summed over a block.
    n, d = 3000, 5
    codes = np.full((n, d + 1), _ONE, dtype=np.int16)
    codes[::2] = -_ONE
    assert np.array_equal(gram_of_codes(codes, True), _reference_gram(codes, True))
    X = np.where(np.arange(n)[:, None] % 2, -1.0, 1.0) * np.ones((n, d)) * 10
    y = np.full(n, 1e6)
    codes, gram = encode_with_gram(X, y, 1.0, 0.0, 1.0, True)
    assert np.array_equal(gram, _reference_gram(codes, True))
    assert np.abs(codes[:, -1]).max() == _ONE


def test_tiny_feature_norm_uses_the_reference_order():
    X, y = _data(300, 4, np.float64, seed=3)
    X = X * 1e-306
    for norm in (2.0**-1010, 1e-300):
        reference = encode_rows(X, y, norm, 0.0, 4.0)
        codes, gram = encode_with_gram(X, y, norm, 0.0, 4.0, True)
        assert np.array_equal(codes, reference)
        assert np.array_equal(gram, _reference_gram(reference, True))


def test_empty_input():
    codes, gram = encode_with_gram(np.zeros((0, 3)), np.zeros(0), 1.0, 0.0, 1.0, True)
    assert codes.shape == (0, 4) and not gram.any() and gram.shape == (5, 5)


def test_clip_scales_are_the_factors_of_clip_rows_l2():
    X, _ = _data(2000, 6, np.float64, seed=5)
    X[3] = np.finfo(np.float64).max  # a norm above the largest float
    for norm in (1e-3, 1.0, 2.5, 1e300):
        assert np.array_equal(X * clip_scales(X, norm)[:, None], clip_rows_l2(X, norm))


def test_an_overflowing_target_is_clipped_without_a_warning():
    import warnings

    X, y = np.zeros((3, 2)), np.array([1e308, -1e308, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        codes, gram = encode_with_gram(X, y, 1.0, -1e308, 1e-10, True)
    assert codes[:, -1].tolist() == [_ONE, 0, _ONE]
    assert np.array_equal(gram, _reference_gram(codes, True))


def test_clipped_and_huge_rows_code_as_the_reference_without_a_warning():
    # Rows inside the ball are divided straight from X, clipped ones are
    # rescaled first; a huge row overflows the direct division before it is
    # rewritten, which must neither warn nor change its code.
    import warnings

    X, y = _data(3000, 6, np.float64, seed=7)
    X[::3] *= 1e3  # clipped
    X[1] = np.finfo(np.float64).max  # a norm above the largest float
    X[2, 0] = 1e300
    for norm in (0.5, 1.0, 3.0, 1e300):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            codes, gram = encode_with_gram(X, y, norm, 0.0, 4.0, True)
        reference = encode_rows(X, y, norm, 0.0, 4.0)
        assert np.array_equal(codes, reference)
        assert np.array_equal(gram, _reference_gram(reference, True))


def test_rows_at_the_sphere_code_as_the_reference():
    # The fused encoder tests the norm on the quotients with a margin: rows a
    # few ulps either side of the clipping radius, and rows whose only entry
    # is the whole radius, must still code exactly as encode_rows.
    rng = np.random.default_rng(11)
    d, norm = 7, 2.5
    directions = rng.normal(size=(400, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    radii = norm * (1.0 - 1e-12) * (1.0 + np.arange(-200, 200) * np.finfo(float).eps)
    X = directions * radii[:, None]
    axis = np.zeros((2 * d, d))
    axis[np.arange(d), np.arange(d)] = norm
    axis[d + np.arange(d), np.arange(d)] = -norm * (1 + 1e-15)
    X = np.vstack([X, axis, np.nextafter(axis, 0)])
    y = rng.normal(size=len(X))
    reference = encode_rows(X, y, norm, 0.0, 4.0)
    codes, gram = encode_with_gram(X, y, norm, 0.0, 4.0, True)
    assert np.array_equal(codes, reference)
    assert np.array_equal(gram, _reference_gram(reference, True))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("norm", [2.0, 2.0**-1010])
def test_encoder_refuses_non_finite_features(bad, norm):
    X, y = _data(600, 4, np.float64, seed=2)
    X[517, 2] = bad
    with pytest.raises(NonFiniteInputError):
        encode_with_gram(X, y, norm, 0.0, 4.0, True)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_fit_with_non_finite_x_raises_scikit_learns_error_and_charges_nothing(bad):
    # The fit checks X's values in its encoding pass (public bounds), not in a
    # pass of its own: the error must be scikit-learn's, before any charge.
    from sklearn.utils import check_array

    from sklearn_dpu import PrivacyBudget
    from sklearn_dpu.linear_model import DPLinearRegression

    X, y = _data(300, 3, np.float64, seed=4)
    X = X / 1e200
    budget = PrivacyBudget(10.0, 1e-5)
    reg = DPLinearRegression(feature_norm=1.0, target_bound=5.0, budget=budget, random_state=0)
    reg.fit(X, y)
    before, spent = dict(reg.__dict__), budget.spent().epsilon
    X_bad = X.astype(np.float32)
    X_bad[123, 1] = bad
    with pytest.raises(ValueError) as expected:
        check_array(X_bad, input_name="X", estimator=DPLinearRegression())
    with pytest.raises(ValueError) as raised:
        reg.fit(X_bad, y)
    assert str(raised.value) == str(expected.value)
    assert budget.spent().epsilon == spent
    assert reg.__dict__.keys() == before.keys()
    assert all(reg.__dict__[k] is before[k] for k in before)


@pytest.mark.parametrize("bound", [1.0, 1e-6, 1e-8, 1e-10, 3.5527136788005e-15, 1e-150])
def test_a_row_of_huge_entries_is_clipped_inside_a_small_bound(bound):
    """Rows whose squares overflow are scaled by target / (largest * relative);
    at a small bound that quotient is subnormal, and rounded to nearest it
    left the row longer than the bound (by 3e-9 of it at 1e-8, 1.9 times it
    at 3.6e-15). Dense, logistic-normalized and sparse rows stay inside."""
    import math

    import scipy.sparse as sp

    from sklearn_dpu.linear_model._logistic_solvers import normalized_rows
    from sklearn_dpu.linear_model._sparse_rows import sparse_clip_scales

    top = np.finfo(np.float64).max
    worst = 0.0
    for d in (1, 2, 3, 7, 19, 58):
        for value in (top, 1.5e308, 1e308, 3e307, 1e306):
            X = np.full((1, d), value)
            dense = clip_rows_l2(X, bound)[0] / bound
            logistic = normalized_rows(X, None, bound, False)[0]
            sparse = X[0] * sparse_clip_scales(sp.csr_array(X), bound)[0] / bound
            for row in (dense, logistic, sparse):
                worst = max(worst, math.sqrt(math.fsum(v * v for v in row)))
    assert worst <= 1.0, worst


def test_a_sparse_row_of_many_non_zeros_is_clipped_inside_the_bound():
    """Sparse norms sum the squares one after another: a 1 followed by 1e5
    entries of ~sqrt(2**-53) read low by 4.5e-12 of the norm, and the clipped
    row stayed that much above its bound. The margin now grows with the
    row's non-zeros."""
    import math

    import scipy.sparse as sp

    from sklearn_dpu.linear_model._sparse_rows import sparse_clip_scales

    x = np.full(10**5, math.sqrt(2.0**-53) * 0.9999)
    x[0] = 1.0
    for bound in (1.0, 0.999999):
        s = sparse_clip_scales(sp.csr_array(x[None]), bound)[0]
        assert math.sqrt(math.fsum((v * s) ** 2 for v in x)) <= bound


def test_an_overflowing_row_inside_a_huge_bound_is_not_scaled_up():
    import scipy.sparse as sp

    from sklearn_dpu.linear_model._sparse_rows import sparse_clip_scales

    X = np.array([[1e200, 1.0], [1e300, 1e300]])
    for scales in (clip_scales(X, 1e300), sparse_clip_scales(sp.csr_array(X), 1e300)):
        assert scales[0] == 1.0 and 0.0 < scales[1] < 1.0


def test_rows_stored_in_float32_under_a_bound_above_its_range_stay_finite():
    """A float32 store cannot hold a row clipped to a bound above 3.4e38: it
    rounded to inf, with an overflow warning that depended on the data. The
    bound is lowered to what the store holds (clipping more is safe)."""
    import warnings

    import scipy.sparse as sp

    from sklearn_dpu.linear_model._sparse_rows import sparse_clipped_rows

    X = np.array([[1e300, 1.0], [1.0, 1.0], [3e38, 3e38]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dense = clip_rows_l2(X, 1e39, out=np.empty((3, 2), np.float32))
        sparse = sparse_clipped_rows(sp.csr_array(X), np.zeros(3), 1e39, np.float32)
    for rows in (dense, sparse.design.toarray()):
        assert np.isfinite(rows).all()
        assert np.all(np.linalg.norm(rows.astype(np.float64), axis=1) <= np.finfo(np.float32).max)
        assert rows[1].tolist() == [1.0, 1.0]
