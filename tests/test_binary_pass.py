"""The fused binary log-loss pass equals the generic summed loss to rounding."""

import warnings

import numpy as np
import pytest

from sklearn_dpu.linear_model import _binary_pass
from sklearn_dpu.linear_model._binary_pass import BinaryLogLossPass, fused_pass
from sklearn_dpu.linear_model._losses import Hinge, LinearModelLoss


def assert_matches_generic(evaluation, loss, A, y, theta):
    """A one-pass evaluation's value, gradient and gradient-only call equal
    the generic summed loss's to rounding; returns its value."""
    value, grad = loss.value_and_grad(theta, A, y)
    pass_value, pass_grad = evaluation.value_and_grad(theta)
    atol = 1e-12 * max(1.0, np.abs(grad).max()) * len(A)
    assert pass_value == pytest.approx(value, rel=1e-12, abs=1e-9)
    np.testing.assert_allclose(pass_grad, grad, rtol=0, atol=atol)
    np.testing.assert_allclose(evaluation.gradient(theta), grad, rtol=0, atol=atol)
    return pass_value


def _problem(n, p, scale, seed=0):
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, p + 1)) / np.sqrt(p)
    rows[:, -1] = rng.integers(0, 2, n)
    theta = scale * rng.standard_normal(p)
    return rows[:, :-1], rows[:, -1].astype(np.intp), theta


@pytest.mark.parametrize("n, p", [(1, 3), (700, 5), (5000, 40)])
@pytest.mark.parametrize("scale", [0.0, 1.0, 60.0])
def test_fused_pass_matches_generic(n, p, scale, monkeypatch):
    # Several blocks and a partial last block (one row: a single block).
    monkeypatch.setattr(_binary_pass, "_BLOCK_BYTES", 1 << 14)
    A, y, theta = _problem(n, p, scale)
    loss = LinearModelLoss(2, p, 1.0)
    fused = fused_pass(loss, A, y)
    assert isinstance(fused, BinaryLogLossPass) and (n == 1 or fused._rows < n)
    fused_value = assert_matches_generic(fused, loss, A, y, theta)
    # A negative control: flipped labels are detected.
    flipped_value, _ = loss.value_and_grad(theta, A, 1 - y)
    if scale > 0:
        assert abs(flipped_value - fused_value) > 1e-6


def test_fused_pass_extreme_margins_are_finite():
    A = np.array([[1.0], [-1.0], [1.0]])
    y = np.array([1, 1, 0])
    value, grad = BinaryLogLossPass(A, y).value_and_grad(np.array([800.0]))
    # log(1 + e^-800) ~ 0, then 800 + log(1 + e^-800) twice.
    assert value == pytest.approx(1600.0)
    np.testing.assert_allclose(grad, [2.0])


def test_gradient_only_pass_keeps_each_rows_bound_at_saturated_margins():
    # The gradient-only pass (noisy GD's and Langevin's steps) computes
    # dl/dz from tanh(z / 2): each row's term must stay within |dl/dz| <= 1
    # (the loss's constant, behind every sensitivity) and agree with the
    # generic gradient to an ulp of 1 per row, also where tanh saturates.
    rng = np.random.default_rng(5)
    a = rng.standard_normal(4)
    a /= np.linalg.norm(a)
    loss = LinearModelLoss(2, 4, 1.0)
    for label in (0, 1):
        for scale in (-1e6, -800.0, -40.0, -1.0, 0.0, 1.0, 40.0, 800.0, 1e6):
            theta = scale * a
            A, y = a[None, :], np.array([label])
            grad = BinaryLogLossPass(A, y).gradient(theta)
            assert np.linalg.norm(grad) <= np.linalg.norm(a) * (1 + 1e-15)
            expected = loss.value_and_grad(theta, A, y)[1]
            np.testing.assert_allclose(grad, expected, rtol=0, atol=4e-16)
    # A negative control: the other label's gradient is far from it.
    theta = 3.0 * a
    other = BinaryLogLossPass(a[None, :], np.array([0])).gradient(theta)
    expected = loss.value_and_grad(theta, a[None, :], np.array([1]))[1]
    assert np.abs(other - expected).max() > 0.1


def test_fused_pass_only_where_it_applies():
    A, y, _ = _problem(10, 3, 1.0)
    assert fused_pass(LinearModelLoss(3, 3, 1.0), A, y) is None  # multiclass
    assert fused_pass(LinearModelLoss(2, 3, 1.0, Hinge()), A, y) is None
    assert fused_pass(LinearModelLoss(2, 3, 1.0), A.astype(np.float32), y) is None


def test_fused_hessian_matches_generic(monkeypatch):
    monkeypatch.setattr(_binary_pass, "_BLOCK_BYTES", 1 << 14)
    A, y, theta = _problem(3000, 12, 2.0)
    loss = LinearModelLoss(2, 12, 1.0)
    fused = fused_pass(loss, A, y)
    expected = loss.hessian(theta, A, y)
    np.testing.assert_allclose(fused.hessian(theta), expected, rtol=1e-12, atol=1e-12)
    fused.value_and_grad(theta)  # the margins of this point are reused
    np.testing.assert_allclose(fused.hessian(theta), expected, rtol=1e-12, atol=1e-12)
    fused.value_and_grad(0 * theta)  # another point: recomputed
    np.testing.assert_allclose(fused.hessian(theta), expected, rtol=1e-12, atol=1e-12)


def test_certified_minimize_takes_newton_steps_on_small_binary_problems():
    # Work counts, not times: n dim^2 > 2e6 used L-BFGS-B (14-21 passes on
    # such problems); the fused Hessian makes damped Newton the cheaper path.
    from sklearn_dpu.linear_model._certified_minimize import certified_minimize

    A, y, _ = _problem(8000, 20, 1.0, seed=3)
    theta_true = np.random.default_rng(4).standard_normal(20) * 3
    y = (A @ theta_true > 0).astype(np.intp)
    loss = LinearModelLoss(2, 20, 1.0)
    solution = certified_minimize(loss, A, y, 5.0, 1e-3)
    assert solution.n_iter <= 8 and solution.n_grad <= 2 * solution.n_iter + 2
    grad = loss.value_and_grad(solution.theta, A, y)[1] + 5.0 * solution.theta
    assert np.linalg.norm(grad) <= 1e-3
    assert solution.distance_bound <= 1e-3 / 5.0


def test_constrained_fused_solve_takes_as_few_passes_as_the_generic_one(monkeypatch):
    # The constrained solve runs inner problems at 1e-3 of the tolerance: a
    # fused loss value rounded coarser than the generic one (a log of products)
    # stalled their Armijo line searches and took 25-100 times longer.
    from sklearn_dpu.linear_model import _certified_minimize as cm

    rng = np.random.default_rng(11)
    n, p = 20000, 10
    A = rng.standard_normal((n, p))
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    y = (3 * A @ rng.standard_normal(p) + rng.logistic(size=n) > 0).astype(float)
    loss = LinearModelLoss(2, p, 1.0)
    fused = cm.certified_minimize(loss, A, y, 5.0, 1e-4, radius=0.3, max_iter=20)
    monkeypatch.setattr(cm, "fused_pass", lambda *args: None)
    generic = cm.certified_minimize(loss, A, y, 5.0, 1e-4, radius=0.3, max_iter=20)
    assert fused.n_grad <= 1.5 * generic.n_grad


@pytest.mark.parametrize("fused", [True, False])
def test_certificate_leaves_room_for_the_gradients_rounding(fused, monkeypatch):
    # A start whose computed gradient norm is just under tol (1 - 1e-5) would
    # be released as certified; its exact norm may be above tol by rounding.
    # The certificate asks for tol (1 - 1e-4).
    from sklearn_dpu.linear_model import _certified_minimize as cm

    if not fused:
        monkeypatch.setattr(cm, "fused_pass", lambda *args: None)
    rng = np.random.default_rng(3)
    n, p, Lambda, tol = 3000, 6, 2.0, 1e-3
    A = rng.standard_normal((n, p)) / np.sqrt(p)
    y = (A @ rng.standard_normal(p) + rng.logistic(size=n) > 0).astype(float)
    loss = LinearModelLoss(2, p, 1.0)
    theta0 = rng.standard_normal(p)
    _, grad = loss.value_and_grad(theta0, A, y)
    grad = grad + Lambda * theta0
    direction = rng.standard_normal(p)
    linear = -grad + direction * (tol * (1 - 1e-5) / np.linalg.norm(direction))
    solution = cm.certified_minimize(loss, A, y, Lambda, tol, linear=linear, theta0=theta0)
    assert Lambda * solution.distance_bound <= tol * (1 - 1e-4)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("block_rows", [13, 1])
def test_blockwise_normalized_rows_equal_clip_then_divide(
    order, dtype, fit_intercept, block_rows, monkeypatch
):
    # Several blocks and a partial last one; rows inside, on and over the
    # bound, a zero row, and rows whose squared norm overflows. Blocks of
    # one row are made of two (a lone row of a Fortran-ordered float32 X
    # would sum its squares in another order than the whole array does).
    from sklearn_dpu.linear_model import _logistic_solvers
    from sklearn_dpu.privacy import clipping
    from sklearn_dpu.privacy.clipping import clip_rows_l2

    monkeypatch.setattr(clipping, "CLIP_BLOCK_BYTES", 8 * 7 * block_rows)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((101, 7)) * rng.choice([0.1, 1.0, 10.0], size=(101, 1))
    X[5] = 0.0
    if dtype == np.float64:
        X[17] = 1e200
        X[40, 2] = -1e300
    X = np.asarray(X.astype(dtype), order=order)
    y_index = rng.integers(0, 3, 101)
    bound = 2.5
    if dtype == np.float64:
        X[60, 1] = 1.7e308  # overflows when divided by a bound below 1 unscaled
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning depends on the values
        rows = _logistic_solvers.normalized_rows(X, y_index, bound, fit_intercept)
        tight = _logistic_solvers.normalized_rows(X, y_index, 0.5, fit_intercept)
    np.testing.assert_array_equal(tight[:, : X.shape[1]], clip_rows_l2(X.astype(float), 0.5) / 0.5)
    expected = clip_rows_l2(np.asarray(X, dtype=np.float64), bound) / bound
    d = X.shape[1]
    assert rows.shape == (101, d + int(fit_intercept) + 1)
    np.testing.assert_array_equal(rows[:, :d], expected)  # bit for bit
    assert np.array_equal(np.signbit(rows[:, :d]), np.signbit(expected))
    np.testing.assert_array_equal(rows[:, -1], y_index)
    if fit_intercept:
        np.testing.assert_array_equal(rows[:, d], 1.0)
    # A negative control: one block divided twice is detected.
    wrong = rows[:, :d].copy()
    wrong[:13] /= bound
    assert not np.array_equal(wrong, expected)


def _masked_select_value_and_grad(fused, theta, inverted=False):
    """The fused pass as first written (a masked copy selects expit(-m)),
    block by block as the pass: the reference its select must equal."""
    grad, value = np.zeros(fused.A.shape[1]), 0.0
    curvature = np.empty(fused.A.shape[0])
    for block, _ in _binary_pass.row_blocks(fused.A.shape[0], fused._rows):
        A, s = fused.A[block], fused._signs[block]
        m = (A @ theta) * s
        e = np.exp(-np.abs(m))
        total = -float(np.minimum(m, 0.0).sum()) + float(np.log1p(e).sum())
        w = 1.0 / (e + 1.0)
        e = e * w
        curvature[block] = e * w
        np.copyto(w, e, where=(m < 0.0) if inverted else (m >= 0.0))
        value += total
        grad -= (w * s) @ A
    return value, grad, curvature


@pytest.mark.parametrize("scale", [0.0, 1.0, 60.0, 1e-17])
def test_fused_pass_select_is_bit_identical_to_a_masked_copy(scale, monkeypatch):
    monkeypatch.setattr(_binary_pass, "_BLOCK_BYTES", 1 << 14)
    A, y, theta = _problem(3000, 9, scale)
    A[:7] = 0.0  # margins exactly 0 (and -0.0 after the sign)
    fused = BinaryLogLossPass(A, y)
    value, grad = fused.value_and_grad(theta)
    ref_value, ref_grad, ref_curvature = _masked_select_value_and_grad(fused, theta)
    assert value == ref_value
    np.testing.assert_array_equal(grad, ref_grad)
    np.testing.assert_array_equal(fused._curvature, ref_curvature)
    # A negative control: the other branch selected (expit(m)) is detected.
    _, wrong_grad, _ = _masked_select_value_and_grad(fused, theta, inverted=True)
    if scale >= 1.0:
        assert not np.array_equal(grad, wrong_grad)


@pytest.mark.parametrize(
    "y",
    [
        np.array([3, 1, 3, 7, 1, 1]),
        np.array([100, -100, 0, 100], dtype=np.int8),
        np.array([250, 3, 250], dtype=np.uint8),
        np.array([2**64 - 1, 2**64 - 3, 2**64 - 1], dtype=np.uint64),
        np.array([-(2**63), -(2**63) + 2, -(2**63)], dtype=np.int64),
        np.array([0, 2**40, 0]),  # a wide span: sorted
        np.array([5]),
        np.array([], dtype=np.int64),
        np.array(["b", "a", "b"]),
        np.array([0.5, -1.0, 0.5]),
        np.array([True, False, True]),
    ],
)
def test_encode_labels_equals_unique(y):
    from sklearn_dpu.linear_model._logistic_updates import encode_labels

    classes, index = encode_labels(y)
    ref_classes, ref_index = np.unique(y, return_inverse=True)
    assert classes.dtype == ref_classes.dtype and index.dtype == ref_index.dtype
    assert classes.shape == ref_classes.shape and index.shape == ref_index.shape
    np.testing.assert_array_equal(classes, ref_classes)
    np.testing.assert_array_equal(index, ref_index)


def test_encode_labels_counts_random_integer_labels():
    from sklearn_dpu.linear_model._logistic_updates import encode_labels

    y = np.random.default_rng(0).choice([-7, 0, 3, 40], 5000)
    classes, index = encode_labels(y)
    ref_classes, ref_index = np.unique(y, return_inverse=True)
    np.testing.assert_array_equal(classes, ref_classes)
    np.testing.assert_array_equal(index, ref_index)
    assert not np.array_equal(index, y - y.min())  # a negative control: gaps renumbered


def test_one_vs_rest_solves_share_the_hessian_at_zero(monkeypatch):
    """At theta = 0 every curvature is 1/4 whatever the label: the
    one-vs-rest objective-perturbation solves form that Hessian once, and
    the released model is bit for bit the one each forming its own gives."""
    from sklearn.datasets import make_classification

    from sklearn_dpu import DPLogisticRegression
    from sklearn_dpu.linear_model import _certified_minimize

    X, y = make_classification(3000, 8, n_informative=5, n_classes=3, random_state=0)
    formed = []
    original = BinaryLogLossPass.hessian

    def counted(self, theta, stride=1):
        formed.append(not np.any(theta))
        return original(self, theta, stride)

    monkeypatch.setattr(BinaryLogLossPass, "hessian", counted)
    params = dict(solver="objective", feature_norm=3.0, random_state=0)
    shared = DPLogisticRegression(**params).fit(X, y)
    at_zero_shared = sum(formed)
    formed.clear()
    monkeypatch.setattr(
        _certified_minimize, "_FusedHessian", _no_zero_cache(_certified_minimize._FusedHessian)
    )
    alone = DPLogisticRegression(**params).fit(X, y)
    assert formed.count(True) == 3 and at_zero_shared == 1  # one per class without the cache
    np.testing.assert_array_equal(shared.coef_, alone.coef_)
    np.testing.assert_array_equal(shared.intercept_, alone.intercept_)


def _no_zero_cache(cls):
    class WithoutCache(cls):
        def __init__(self, loss, fused, zero_hessian=None):
            super().__init__(loss, fused, None)

    return WithoutCache


def test_zero_hessian_cache_gives_copies_and_only_at_zero():
    A, y, theta = _problem(500, 4, 1.0)
    cache = _binary_pass.ZeroHessianCache()
    fused = BinaryLogLossPass(A, y)
    first = cache.hessian(fused, np.zeros(4))
    first += 1.0  # the solver adds its ridge in place
    np.testing.assert_array_equal(cache.hessian(fused, np.zeros(4)), fused.hessian(np.zeros(4)))
    # Another label set, same rows: the same matrix at 0.
    np.testing.assert_array_equal(
        cache.hessian(BinaryLogLossPass(A, 1 - y), np.zeros(4)), fused.hessian(np.zeros(4))
    )
    # Away from 0 the cache is not read.
    np.testing.assert_array_equal(cache.hessian(fused, theta), fused.hessian(theta))
    assert not np.array_equal(fused.hessian(theta), cache.matrix)


@pytest.mark.parametrize("n, p", [(1, 3), (700, 5), (5000, 40)])
def test_hessian_at_zero_is_the_quarter_gram_bit_for_bit(n, p, monkeypatch):
    # At theta = 0 the Hessian is formed as A^T A / 4, without scaling the
    # rows: the same bits as the curvature-weighted pass (every curvature is
    # exactly 1/4), over several blocks and a partial last one.
    monkeypatch.setattr(_binary_pass, "_BLOCK_BYTES", 1 << 14)
    A, y, theta = _problem(n, p, 1.0)
    fused = BinaryLogLossPass(A, y)
    fused.value_and_grad(np.zeros(p))
    weighted = fused._in_precision(fused._hessian_range)
    scaled = []
    monkeypatch.setattr(
        BinaryLogLossPass, "_hessian_range", lambda self, *r: scaled.append(r) or weighted
    )
    at_zero = fused.hessian(np.zeros(p))
    assert not scaled  # the rows were not scaled
    np.testing.assert_array_equal(at_zero, weighted)
    generic = LinearModelLoss(2, p, 1.0).hessian(np.zeros(p), A, y)
    # from _SINGLE_HESSIAN_COLUMNS columns the matrix is single precision
    rtol = 1e-12 if p < _binary_pass._SINGLE_HESSIAN_COLUMNS else 1e-6
    np.testing.assert_allclose(at_zero, generic, rtol=rtol, atol=rtol)
    # Away from 0 the weighted pass runs, also at a point with zero entries
    # (a negative control: the curvatures there are not 1/4, and its
    # Hessian differs).
    monkeypatch.undo()
    away = BinaryLogLossPass(A, y).hessian(theta)
    assert not np.allclose(away, at_zero)
    some_zeros = np.where(np.arange(p) % 2 == 0, 0.0, theta)
    np.testing.assert_allclose(
        BinaryLogLossPass(A, y).hessian(some_zeros),
        LinearModelLoss(2, p, 1.0).hessian(some_zeros, A, y),
        rtol=rtol,
        atol=rtol,
    )
    if p > 1:
        assert not np.allclose(BinaryLogLossPass(A, y).hessian(some_zeros), at_zero)
    # A zero of the wrong length is not taken for the origin: it fails as before.
    with pytest.raises(ValueError):
        BinaryLogLossPass(A, y).hessian(np.zeros(p + 1))


@pytest.mark.parametrize("p", [31, 32, 101])
def test_newton_matrix_single_precision_from_32_columns(p):
    """The Newton matrix is single precision from 32 columns (it only chooses
    the step; the certificate reads the double-precision gradient): within
    1e-6 of the generic float64 Hessian, and not equal to it bit for bit
    from 32 columns (a negative control that the cast happens)."""
    A, y, theta = _problem(4000, p, 1.0)
    generic = LinearModelLoss(2, p, 1.0).hessian(theta, A, y)
    fused = BinaryLogLossPass(A, y).hessian(theta)
    np.testing.assert_allclose(fused, generic, rtol=1e-6, atol=1e-6 * np.abs(generic).max())
    single = p >= _binary_pass._SINGLE_HESSIAN_COLUMNS
    assert single == (np.abs(fused - generic).max() > 1e-12 * np.abs(generic).max())


def test_newton_matrix_overflowing_single_precision_is_formed_in_double():
    A, y, theta = _problem(500, 40, 1.0)
    A = A * 1e25  # products near 1e50: past float32's 3.4e38
    H = BinaryLogLossPass(A, y).hessian(np.zeros(40))
    assert np.all(np.isfinite(H))
    np.testing.assert_allclose(H, 0.25 * A.T @ A, rtol=1e-12)


def test_single_precision_newton_certifies_the_same_solution():
    """The certified point is within the certificate of the float64 path's."""
    from sklearn_dpu.linear_model._certified_minimize import certified_minimize

    A, y, _ = _problem(20000, 60, 1.0)
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    loss = LinearModelLoss(2, 60, 1.0)
    tol = 1e-6 * len(A)
    single = certified_minimize(loss, A, y, 1.0, tol)
    assert single.distance_bound <= tol
    steps = single.n_iter
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_binary_pass, "_SINGLE_HESSIAN_COLUMNS", 10**9)
        double = certified_minimize(loss, A, y, 1.0, tol)
    assert steps == double.n_iter
    assert np.linalg.norm(single.theta - double.theta) <= 2 * tol


@pytest.mark.parametrize("p", [12, 40])
def test_a_strided_newton_matrix_reads_every_kth_row_scaled(p):
    """``hessian(theta, stride)``: the Hessian of rows 0, k, 2k, ... scaled
    by n / m (m rows read), at 0 and away from it."""
    A, y, theta = _problem(5003, p, 1.0)
    fused = BinaryLogLossPass(A, y)
    sub = A[::7]
    rtol = 1e-12 if p < _binary_pass._SINGLE_HESSIAN_COLUMNS else 1e-6
    for point in (np.zeros(p), theta):
        expected = LinearModelLoss(2, p, 1.0).hessian(point, sub, y[::7]) * (5003 / len(sub))
        got = fused.hessian(point, stride=7)
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * np.abs(expected).max())
        assert not np.allclose(got, fused.hessian(point), rtol=1e-3)  # not every row


def _solve(A, y, tol, **kwargs):
    from sklearn_dpu.linear_model._certified_minimize import certified_minimize

    return certified_minimize(LinearModelLoss(2, A.shape[1], 1.0), A, y, 1.0, tol, **kwargs)


def test_subsampled_newton_certifies_what_every_row_certifies(monkeypatch):
    from sklearn_dpu.linear_model import _certified_minimize

    A, y, _ = _problem(40000, 40, 1.0)
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    assert _certified_minimize.hessian_stride(*A.shape) == 10
    assert _certified_minimize.hessian_stride(40000, 31) == 1  # below 32 parameters
    strides = _recorded_strides(monkeypatch)
    tol = 1e-6 * len(A)
    sub = _solve(A, y, tol)
    assert strides == [10] * sub.n_iter  # these rows: the subsample's steps suffice
    monkeypatch.setattr(_certified_minimize, "_HESSIAN_ROWS_PER_PARAMETER", 10**9)
    exact = _solve(A, y, tol)
    assert sub.distance_bound <= tol and exact.distance_bound <= tol
    assert np.linalg.norm(sub.theta - exact.theta) <= 2 * tol
    assert sub.n_iter > exact.n_iter  # linear, not quadratic, near the end


def test_a_subsample_that_misses_a_direction_switches_to_every_row(monkeypatch):
    """A feature present only in rows the stride skips: the subsampled matrix
    has no curvature there, the steps stall, and the solve goes on with every
    row (the certificate is reached either way)."""

    A, y, _ = _problem(40000, 40, 1.0)
    A[:, -1] = 0.0
    rare = np.flatnonzero(np.arange(len(A)) % 10 == 7)[:300]  # never a multiple of 10
    A[rare, -1] = 3.0
    y[rare] = 1
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    strides = _recorded_strides(monkeypatch)
    tol = 1e-6 * len(A)
    sub = _solve(A, y, tol)
    assert sub.distance_bound <= tol
    assert strides[0] == 10 and strides[-1] == 1  # switched to every row
    assert sub.n_iter <= 8  # measured 7; 15 without the switch


def _recorded_strides(monkeypatch) -> list:
    from sklearn_dpu.linear_model import _certified_minimize

    strides = []
    original = _certified_minimize._FusedHessian.hessian
    monkeypatch.setattr(
        _certified_minimize._FusedHessian,
        "hessian",
        lambda self, *args: strides.append(self._stride) or original(self, *args),
    )
    return strides


def test_a_warm_start_reads_every_row(monkeypatch):
    """Near the minimizer exact Newton certifies in about 2 steps; the
    subsample's linear rate took 8 (a review's measurement)."""
    A, y, _ = _problem(40000, 40, 1.0)
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    tol = 1e-6 * len(A)
    cold = _solve(A, y, tol)
    strides = _recorded_strides(monkeypatch)
    warm = _solve(A[:-30], y[:-30], tol, theta0=cold.theta)
    assert strides and set(strides) == {1}
    assert warm.n_iter <= 3
