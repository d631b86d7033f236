"""DPLinearRegression's SSP solve: the intercept is eliminated exactly, never
lifted with the slopes, and the defaults fit raw data."""

import warnings

import numpy as np
import pytest
import scipy.linalg
from sklearn.datasets import load_diabetes
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

from sklearn_dpu.linear_model import DPLinearRegression, _lifted_solve
from sklearn_dpu.linear_model import _conjugate_gradients as _cg
from sklearn_dpu.linear_model._sufficient_statistics import (
    noise_spectral_bound,
    solve_noisy_gram,
)


def _gram(n=300, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.uniform(-0.3, 0.3, size=(n, 3))
    t = 0.6 + Z @ [0.5, -0.2, 0.1] + 0.01 * rng.normal(size=n)
    U = np.column_stack([Z, np.ones(n), t])
    return U.T @ U, Z, t


def test_the_intercept_is_eliminated_exactly_and_not_lifted():
    gram, Z, t = _gram()
    sigma = 20.0  # a lift far above the slopes' eigenvalues
    w = solve_noisy_gram(gram, 4, np.zeros(4), sigma, fit_intercept=True)
    # the intercept is the exact least-squares one given the slopes
    assert w[3] == pytest.approx(t.mean() - Z.mean(axis=0) @ w[:3], rel=1e-12)
    assert w[3] == pytest.approx(0.6, abs=0.02)
    # Negative control: lifting the intercept with the slopes (as a plain
    # ridge on the augmented matrix does) shrinks it by n / (n + lift).
    lifted = solve_noisy_gram(gram, 4, np.zeros(4), sigma, fit_intercept=False)
    lift = noise_spectral_bound(sigma, 4)
    assert lifted[3] < 0.6 * len(t) / (len(t) + 0.5 * lift)


def _noise_dominated_system(q=300, seed=4):
    # Gram of a few hundred rows plus symmetric noise far above it: indefinite,
    # so the lift is active and read off the Lanczos path (q > _DENSE_SLOPES).
    rng = np.random.default_rng(seed)
    U = rng.uniform(-1, 1, size=(4 * q, q)) / np.sqrt(q)
    noise = rng.normal(size=(q, q))
    return U.T @ U + (noise + noise.T), rng.normal(size=q)


def test_the_lift_puts_the_smallest_eigenvalue_at_the_floor_not_below():
    A, b = _noise_dominated_system()
    floor = 30.0
    lowest = float(np.linalg.eigvalsh(A)[0])
    assert lowest < floor  # the lift is active
    w = _lifted_solve.lifted_solve(A.copy(), b, floor, lambda: A.copy())
    # the solve is (A + lift I)^{-1} b; recover lift from it exactly
    lift = float((b - A @ w) @ w / (w @ w))
    lifted_lowest = lowest + lift
    assert lifted_lowest >= floor
    assert lifted_lowest <= floor + 2 * _lifted_solve._LANCZOS_TOL * max(abs(lowest), floor)
    np.testing.assert_allclose((A + lift * np.eye(len(A))) @ w, b, rtol=1e-9, atol=1e-9)


def _counting_products(monkeypatch):
    # products in all, and by the matrix's dtype (the float32 and float64 runs)
    calls = {"products": 0, "factorizations": 0, "float32": 0, "float64": 0}
    make_product, factor = _cg.symmetric_product, scipy.linalg.cho_factor

    def counted_product(A):
        product = make_product(A)

        def count(x):
            calls["products"] += 1
            calls[A.dtype.name] += 1
            return product(x)

        return count

    def counted_factor(*args, **kwargs):
        calls["factorizations"] += 1
        return factor(*args, **kwargs)

    monkeypatch.setattr(_lifted_solve, "symmetric_product", counted_product)
    monkeypatch.setattr(_cg, "symmetric_product", counted_product)
    monkeypatch.setattr(_lifted_solve.scipy.linalg, "cho_factor", counted_factor)
    return calls


def test_a_well_conditioned_lifted_system_is_solved_by_conjugate_gradients(monkeypatch):
    A, b = _noise_dominated_system(q=400)
    floor = 60.0  # condition number about 2.5 once lifted
    lift = floor - _lifted_solve.smallest_eigenvalue_lower_bound(A)
    factor = scipy.linalg.cho_factor(A + lift * np.eye(400))
    expected = scipy.linalg.cho_solve(factor, b)
    calls = _counting_products(monkeypatch)
    w = _lifted_solve.lifted_solve(A.copy(), b, floor, lambda: A.copy())
    assert calls["factorizations"] == 0
    # the factorization's solution, to about the condition number times 1e-13
    assert np.linalg.norm(w - expected) <= 1e-12 * np.linalg.norm(expected)


def _cg_products(monkeypatch, A, b, floor):
    # the solution and the products of the conjugate gradients alone, by dtype
    bound = _lifted_solve._eigenvalue_bound(A, floor, None)
    lift = max(0.0, floor - bound.value)
    calls = _counting_products(monkeypatch)
    w = _cg.conjugate_gradients(A, lift, b, max(floor, bound.value), bound.single, bound.norm)
    expected = scipy.linalg.cho_solve(scipy.linalg.cho_factor(A + lift * np.eye(len(A))), b)
    return w, expected, calls


def test_a_well_conditioned_system_is_refined_with_float32_products(monkeypatch):
    # Rounds of float32 products, each checked by a float64 residual: about
    # the float64 iterations' count of cheaper products, and the same accuracy
    # (the test is on the computed residual, not the float32 iterations').
    A, b = _noise_dominated_system(q=400)
    w, expected, calls = _cg_products(monkeypatch, A, b, 60.0)
    assert calls["float64"] == 2  # the residual after each of two rounds
    assert 10 <= calls["float32"] <= 40
    assert np.linalg.norm(w - expected) <= 1e-12 * np.linalg.norm(expected)
    # control: without the float32 copy, float64 products only
    bound = _lifted_solve._eigenvalue_bound(A, 60.0, None)
    calls["float32"] = calls["float64"] = 0
    lift = 60.0 - bound.value
    plain = _cg.conjugate_gradients(A, lift, b, 60.0)
    assert calls["float32"] == 0 and calls["float64"] >= 15
    assert np.linalg.norm(plain - expected) <= 1e-12 * np.linalg.norm(expected)


def _rotated(eigenvalues, seed=1):
    q = len(eigenvalues)
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(q, q)))
    A = (Q * eigenvalues) @ Q.T
    return (A + A.T) / 2, Q


def _recorded_runs(monkeypatch):
    # (cost of a product, converged) of each run of conjugate-gradient steps
    runs, steps = [], _cg._cg_steps

    def recorded(*args, **kwargs):
        run = steps(*args, **kwargs)
        runs.append((args[6], run.converged))
        return run

    monkeypatch.setattr(_cg, "_cg_steps", recorded)
    return runs


def test_a_float32_round_that_does_not_gain_enough_hands_over_to_float64(monkeypatch):
    # A round's float64 residual must gain _CG_SINGLE_GAIN on the round's
    # start, else float64 products go on from there. Here rounds gain about
    # 1e-6: two float32 rounds; asked for 1e-30, one round and then float64.
    A, b = _noise_dominated_system(q=400)
    runs = _recorded_runs(monkeypatch)
    _cg_products(monkeypatch, A, b, 60.0)
    assert runs == [(_cg._CG_SINGLE_COST, True)] * 2
    runs.clear()
    monkeypatch.setattr(_cg, "_CG_SINGLE_GAIN", 1e-30)
    w, expected, calls = _cg_products(monkeypatch, A, b, 60.0)
    assert runs == [(_cg._CG_SINGLE_COST, True), (1.0, True)]
    assert calls["float64"] >= 3  # the round's residual, then the float64 iterations
    assert np.linalg.norm(w - expected) <= 1e-12 * np.linalg.norm(expected)


def test_a_system_float32_rounding_dominates_stays_in_float64(monkeypatch):
    # One eigenvalue 1e8 times the floor (raw features, no intercept): float32
    # rounding (1.5e-7 to 3.5e-7 ||A|| ||x|| a product) is as large as the
    # bottom of the spectrum. The condition test keeps such systems in
    # float64 (forced through float32, the round met non-positive curvature
    # on 2 BLAS threads and looked slow on one).
    q, spike = 1000, 1e10
    A, b = _noise_dominated_system(q=q)
    ones = np.ones(q) / np.sqrt(q)
    A = A + spike * np.outer(ones, ones)
    b = b + 1e9 * ones
    w, factored, calls = _cg_products(monkeypatch, A, b, 60.0)
    assert calls["float32"] == 0
    # as accurate as the factorization (exact: Sherman-Morrison on the spike)
    lift = 60.0 - _lifted_solve.smallest_eigenvalue_lower_bound(A, 60.0)
    base = A - spike * np.outer(ones, ones) + lift * np.eye(q)
    solve = lambda v: scipy.linalg.cho_solve(scipy.linalg.cho_factor(base), v)  # noqa: E731
    u, y = solve(ones), solve(b)
    exact = y - u * (spike * (ones @ y)) / (1.0 + spike * (ones @ u))
    assert np.linalg.norm(w - exact) <= 3 * np.linalg.norm(factored - exact)


def test_non_positive_curvature_in_float32_hands_over_to_float64(monkeypatch):
    # A float32 round that meets non-positive curvature (here made so: the
    # second float32 product is pushed negative) hands over to float64 products,
    # which solve the system.
    A, b = _noise_dominated_system(q=400)
    make, calls = _cg.symmetric_product, {"float32": 0}

    def flipped(matrix):
        product = make(matrix)
        if matrix.dtype != np.float32:
            return product

        # 10 times Gershgorin's bound on ||matrix||: x^T (A + lift I) x < 0
        bound = 10.0 * float(np.abs(matrix).sum(axis=1).max())

        def negated_second(x):
            calls["float32"] += 1
            image = product(x)
            return image - np.float32(bound) * x if calls["float32"] == 2 else image

        return negated_second

    bound = _lifted_solve._eigenvalue_bound(A, 60.0, None)  # before the patch
    monkeypatch.setattr(_cg, "symmetric_product", flipped)
    runs = _recorded_runs(monkeypatch)
    lift = 60.0 - bound.value
    w = _cg.conjugate_gradients(A, lift, b, max(60.0, bound.value), bound.single, bound.norm)
    assert runs == [(_cg._CG_SINGLE_COST, False), (1.0, True)]
    expected = scipy.linalg.cho_solve(scipy.linalg.cho_factor(A + lift * np.eye(len(A))), b)
    assert np.linalg.norm(w - expected) <= 1e-12 * np.linalg.norm(expected)


def test_a_later_round_that_looks_slow_hands_over_to_float64(monkeypatch):
    # A later round restarts on a residual spread over the whole spectrum
    # and can look slower than the iterations are: unlike the first round's,
    # its prediction hands over to float64 products rather than giving up.
    A, b = _noise_dominated_system(q=400)
    runs, steps = [], _cg._cg_steps

    def second_round_slow(*args, **kwargs):
        run = steps(*args, **kwargs)
        runs.append((args[6], run.converged))
        if len(runs) == 2:  # the second float32 round, made to give up
            runs[-1] = (args[6], False)
            return _cg._CGRun(run.products, False)
        return run

    monkeypatch.setattr(_cg, "_cg_steps", second_round_slow)
    w, expected, calls = _cg_products(monkeypatch, A, b, 60.0)
    assert runs == [
        (_cg._CG_SINGLE_COST, True),
        (_cg._CG_SINGLE_COST, False),
        (1.0, True),
    ]
    assert np.linalg.norm(w - expected) <= 1e-12 * np.linalg.norm(expected)


def test_a_budget_without_room_for_two_probes_stays_in_float64(monkeypatch):
    # Below 2 _CG_PROBE products of budget (q < 256) a float32 round would
    # leave too little for float64 products: the parent's float64 iterations,
    # though the eigenvalue bound made a float32 copy (q > _DENSE_SLOPES).
    A, b = _noise_dominated_system(q=240)
    bound = _lifted_solve._eigenvalue_bound(A, 40.0, None)
    assert bound.single is not None
    w, expected, calls = _cg_products(monkeypatch, A, b, 40.0)
    assert calls["float32"] == 0 and calls["float64"] >= 1


@pytest.mark.parametrize(
    "spacing, kappa, converges",
    [(np.linspace, 10.0, True), (np.linspace, 40.0, True), (np.geomspace, 60.0, False)],
)
def test_the_rounds_keep_to_the_budget_and_a_slow_system_stops_at_the_probe(
    monkeypatch, spacing, kappa, converges
):
    # The rounds' rate predicts the products to the final test, not to their
    # own aim: a slow system (kappa = 60, geometric) gives up at the first float32 probe
    # (float64 products would be as slow), a faster one stays in the budget
    # in float64 equivalents, and converges (kappa = 40, near the budget:
    # where float64 products alone would not).
    q = 1000
    A, _ = _rotated(spacing(1.0, kappa, q))
    b = np.random.default_rng(2).normal(size=q)
    w, expected, calls = _cg_products(monkeypatch, A, b, 0.999)
    spent = _cg._CG_SINGLE_COST * calls["float32"] + calls["float64"]
    assert spent <= q // _cg._CG_ROWS_PER_PRODUCT
    if converges:
        assert np.linalg.norm(w - expected) <= 1e-12 * np.linalg.norm(expected)
    else:
        assert w is None
        assert (calls["float32"], calls["float64"]) == (_cg._CG_PROBE, 0)


@pytest.mark.parametrize("q, kappa", [(300, 5.0), (400, 10.0), (1000, 60.0)])
def test_a_round_leaves_room_for_its_float64_residual(monkeypatch, q, kappa):
    # Each float32 round is given the budget less one float64 product: the
    # residual it is checked by. Systems whose rounds run to the budget's
    # edge (without that reserve, 18.5, 26 and 63 products' worth against
    # budgets of 18, 25 and 62) stay within it, solved or handed to the
    # factorization.
    A, _ = _rotated(np.linspace(1.0, kappa, q))
    b = np.random.default_rng(2).normal(size=q)
    w, expected, calls = _cg_products(monkeypatch, A, b, 0.999)
    assert calls["float32"] > 2 * _cg._CG_PROBE  # the rounds ran, past the first probe
    assert (
        _cg._CG_SINGLE_COST * calls["float32"] + calls["float64"] <= q // _cg._CG_ROWS_PER_PRODUCT
    )
    if w is not None:
        assert np.linalg.norm(w - expected) <= 1e-12 * np.linalg.norm(expected)


def test_a_round_near_the_test_stops_at_half_its_residual(monkeypatch):
    # A round aims at _CG_ROUND_RTOL of its opening residual, or at half the
    # final test's residual when that is more: the third round here has
    # little left to gain and takes 3 products, not a full round's 22 (the
    # count without that half: each of the three rounds 22).
    q = 1000
    A, _ = _rotated(np.linspace(1.0, 10.0, q))
    b = np.random.default_rng(2).normal(size=q)
    products, steps = [], _cg._cg_steps

    def recorded(*args, **kwargs):
        run = steps(*args, **kwargs)
        products.append(run.products)
        return run

    monkeypatch.setattr(_cg, "_cg_steps", recorded)
    w, expected, calls = _cg_products(monkeypatch, A, b, 0.999)
    assert len(products) == 3 and calls["float64"] == 3
    assert products[2] <= products[0] // 3
    assert np.linalg.norm(w - expected) <= 1e-12 * np.linalg.norm(expected)


def test_a_right_hand_side_on_few_eigenvectors_is_solved_in_float64(monkeypatch):
    # Exact conjugate gradients end after 8 products (b on 8 eigenvectors);
    # float32 rounding would spread the residual over the whole spectrum:
    # the first round, done within the probe's 8 products, is redone in
    # float64.
    q = 1000
    A, Q = _rotated(np.linspace(1.0, 20.0, q))
    b = Q[:, np.linspace(0, q - 1, 8).astype(int)] @ np.random.default_rng(8).normal(size=8)
    runs = _recorded_runs(monkeypatch)
    w, expected, calls = _cg_products(monkeypatch, A, b, 0.999)
    assert runs == [(_cg._CG_SINGLE_COST, True), (1.0, True)]
    assert calls["float64"] <= 9
    assert np.linalg.norm(w - expected) <= 1e-12 * np.linalg.norm(expected)


@pytest.mark.parametrize(
    "a_scale, b_scale", [(2.0**-200, 1.0), (1.0, 2.0**-200), (2.0**-450, 2.0**110)]
)
def test_the_refined_solution_is_the_same_bits_times_the_scale(monkeypatch, a_scale, b_scale):
    # Each round's residual is scaled by a power of two before its float32
    # copies, and the test's norm neither under- nor overflows (a solution of
    # 2^560 once passed the test at once, the norm being infinite).
    A, b = _noise_dominated_system(q=400)
    w, _, _ = _cg_products(monkeypatch, A, b, 60.0)
    scaled, _, calls = _cg_products(monkeypatch, A * a_scale, b * b_scale, 60.0 * a_scale)
    assert calls["float32"] > 0
    np.testing.assert_array_equal(scaled, w * (b_scale / a_scale))


def test_an_ill_conditioned_system_goes_to_the_factorization_after_the_probe(monkeypatch):
    rng = np.random.default_rng(0)
    U = rng.normal(size=(2000, 400)) * np.logspace(0, 3, 400)  # condition number ~1e6
    A, b = U.T @ U, rng.normal(size=400)
    calls = _counting_products(monkeypatch)
    w = _lifted_solve.lifted_solve(A.copy(), b, 1.0, lambda: A.copy())
    lanczos = calls["products"] - _cg._CG_PROBE
    assert calls["factorizations"] == 1
    calls["products"] = 0
    _lifted_solve.smallest_eigenvalue_lower_bound(A)
    assert lanczos == calls["products"]  # conjugate gradients stopped at the probe
    np.testing.assert_allclose(A @ w, b, rtol=1e-6, atol=1e-8 * np.linalg.norm(b))


def _spectrum(eigenvalues, seed=0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(len(eigenvalues), len(eigenvalues))))
    A = (Q * eigenvalues) @ Q.T
    return (A + A.T) / 2, Q


def test_slow_lanczos_iterations_stop_at_the_cap_for_the_dense_solver(monkeypatch):
    # Eigenvalues log-spread over 1..1e4: the float32 iterations cannot reach
    # a residual of 1e-4 (their rounding is 6e-8 ||A|| = 6e-4), nor do they
    # look converged within the cap (ARPACK, uncapped, took 30,000 products
    # at q = 1000, 20 times a dense solver).
    A, _ = _spectrum(np.logspace(0, 4, _lifted_solve._DENSE_SLOPES + 8))
    calls = _counting_products(monkeypatch)
    bound = _lifted_solve.smallest_eigenvalue_lower_bound(A)
    # the cap, and the product that sizes the float32 copy
    assert calls["products"] == _lifted_solve._LANCZOS_MIN_STEPS + 1
    # dense, the same margin, and the rounding allowance (6e-9 here)
    assert 1.0 - _lifted_solve._LANCZOS_TOL - 1e-8 <= bound <= 1.0 - _lifted_solve._LANCZOS_TOL


def test_float64_iterations_refine_what_float32_cannot(monkeypatch):
    # lambda_min = 1 far below the rest (1e5..1e6): the float32 iterations
    # converge in a few steps to a Ritz vector whose float64 residual is
    # ~1e-2 (their rounding times ||A||), above the tolerance 1e-4: float64
    # iterations go on from it, and the bound is as tight as asked.
    A, _ = _spectrum(np.r_[1.0, np.linspace(1e5, 1e6, 299)])
    counts = _counting_products(monkeypatch)
    bound = _lifted_solve.smallest_eigenvalue_lower_bound(A)
    assert 1.0 - 2 * _lifted_solve._LANCZOS_TOL <= bound <= 1.0
    assert counts["float32"] < 150  # no cap, no dense solver
    assert counts["float64"] > 3  # sizing, the float32 check, the float64 steps, their check
    # control: the float32 iterations alone end at a Ritz value they cannot certify
    start = np.random.default_rng(_lifted_solve._START_SEED).standard_normal(300)
    units = 2.0**-20  # entries of A v0 up to ~1e6
    rejected = _lifted_solve._lanczos(
        _cg.symmetric_product((A * units).astype(np.float32)),
        start.astype(np.float32),
        0.0,
        lambda y, tolerance, norm: None,
        300,
    )
    assert rejected.ritz_vector is not None and rejected.steps < 150


@pytest.mark.parametrize("q", [3, 100, 160])
def test_up_to_the_dense_size_the_smallest_eigenvalue_is_exact(monkeypatch, q):
    # Up to _DENSE_SLOPES rows LAPACK gives the smallest eigenvalue itself,
    # faster there than the Lanczos iterations: no product, no float32 copy.
    assert q <= _lifted_solve._DENSE_SLOPES
    A, _ = _spectrum(np.linspace(-2.0, 5.0, q), seed=q)
    counts = _counting_products(monkeypatch)
    bound = _lifted_solve._eigenvalue_bound(A, 1.0, None)
    assert counts["products"] == 0 and bound.single is None
    # LAPACK's value less the rounding allowance: below lambda_min, by little
    lowest = float(np.linalg.eigvalsh(A)[0])
    assert lowest - 1e-9 <= bound.value <= lowest
    assert bound.value == pytest.approx(-2.0, abs=1e-9)


def _eigenvalue_rule(A, b, floor):
    # The solve as it was before the factorization test: the lift from
    # LAPACK's bound, then the factorization of the lifted system.
    A = A.copy()
    lift = max(0.0, floor - _lifted_solve.smallest_eigenvalue_lower_bound(A, floor))
    A.flat[:: len(A) + 1] += lift
    factor = scipy.linalg.cho_factor(A.T, check_finite=False, overwrite_a=True)
    return scipy.linalg.cho_solve(factor, b, check_finite=False)


def _counting_eigenvalues(monkeypatch):
    calls, smallest = [], _lifted_solve._lapack_smallest

    def counted(A):
        calls.append(len(A))
        return smallest(A)

    monkeypatch.setattr(_lifted_solve, "_lapack_smallest", counted)
    return calls


@pytest.mark.parametrize("scale", [1.0, 1e-300, 1e-30, 1e30, 1e150, 1e300])
def test_a_gram_above_the_floor_is_solved_without_its_eigenvalue(monkeypatch, scale):
    # Where the data's Gram matrix dominates the noise, a Cholesky
    # factorization of A - floor I (less margins) shows the eigenvalue rule's
    # lift is 0, and LAPACK's eigenvalue is not computed: the same bits, at
    # any scale, without a warning.
    q = 100
    rng = np.random.default_rng(3)
    U = rng.uniform(-1, 1, size=(20 * q, q))
    noise = rng.normal(size=(q, q))
    A = (U.T @ U + noise + noise.T) * scale
    b = rng.normal(size=q)
    lowest = float(np.linalg.eigvalsh(A)[0])
    expected = {f: _eigenvalue_rule(A, b, f * lowest) for f in (0.5, 1.5)}
    calls = _counting_eigenvalues(monkeypatch)
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        w = _lifted_solve.lifted_solve(A.copy(), b, 0.5 * lowest, lambda: A.copy())
        assert calls == []
        np.testing.assert_array_equal(w, expected[0.5])
        # control: with the floor above lambda_min the eigenvalue is computed
        w = _lifted_solve.lifted_solve(A.copy(), b, 1.5 * lowest, lambda: A.copy())
    assert calls == [q]
    np.testing.assert_array_equal(w, expected[1.5])


@pytest.mark.parametrize("q", [2, 40, 127])
def test_near_the_floor_the_factorization_test_gives_the_eigenvalue_rules_bits(monkeypatch, q):
    # lambda_min from 3 rounding allowances below floor + allowance (where
    # the eigenvalue rule's lift turns 0) to 60 above: the test's margins
    # keep it from a lift of 0 where the rule lifts, so every solution is
    # the rule's; it skips the eigenvalue once the margin is passed.
    A, _ = _rotated(np.linspace(1.0, 10.0, q), seed=q)
    b = np.random.default_rng(q).normal(size=q)
    lowest = float(np.linalg.eigvalsh(A)[0])
    allowance = q**1.5 * np.finfo(float).eps * np.linalg.norm(A)
    floors = [lowest - k * allowance for k in np.linspace(-3.0, 60.0, 43)]
    expected = [_eigenvalue_rule(A, b, floor) for floor in floors]
    calls = _counting_eigenvalues(monkeypatch)
    for floor, solution in zip(floors, expected, strict=True):
        w = _lifted_solve.lifted_solve(A.copy(), b, floor, lambda: A.copy())
        np.testing.assert_array_equal(w, solution)
    assert 0 < len(calls) < len(floors)


def test_the_factorization_test_leaves_other_systems_to_the_eigenvalue():
    # Its margins are float64's: a float32 system (not one a release makes)
    # is lifted by the eigenvalue rule (a reviewer's: the test gave lift 0,
    # the rule 1.1e-7). On a non-finite system it does not run: LAPACK's
    # eigenvalue raises, as before, and no warning comes first.
    A = np.array(
        [[3.5335137844085693, -0.21616002917289734], [-0.21616002917289734, 0.344742089509964]],
        np.float32,
    )
    floor, b = 0.33015575302447925, np.ones(2)
    w = _lifted_solve.lifted_solve(A.copy(), b, floor, lambda: A.copy())
    np.testing.assert_array_equal(w, _eigenvalue_rule(A, b, floor))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="infs or NaNs"):
            _lifted_solve.lifted_solve(np.diag([np.inf, 1.0]), b, 1.0, lambda: None)
        nan_off_diagonal = np.array([[1.0, np.nan], [np.nan, 1.0]])
        with pytest.raises(ValueError, match="infs or NaNs"):
            _lifted_solve.lifted_solve(nan_off_diagonal, b, 0.5, lambda: None)
    # A float16 floor times a small power of two rounds to 0 in float16 (a
    # second reviewer's: lift 0 where the rule lifts 968): the shift is
    # computed in float64.
    A, floor = np.diag([2.0**30, 32.0]), np.float16(1000)
    w = _lifted_solve.lifted_solve(A.copy(), b, floor, lambda: A.copy())
    np.testing.assert_array_equal(w, _eigenvalue_rule(A, b, floor))


def test_a_breakdown_gives_the_exact_smallest_eigenvalue(monkeypatch):
    # 3 I plus a rank-2 term: three distinct eigenvalues, so the Krylov space
    # of a generic start vector is invariant after 3 steps.
    rng = np.random.default_rng(2)
    q = _lifted_solve._DENSE_SLOPES + 8
    U = rng.normal(size=(q, 2))
    A = 3.0 * np.eye(q) + U @ U.T
    counts = _counting_products(monkeypatch)
    bound = _lifted_solve.smallest_eigenvalue_lower_bound(A)
    assert 3.0 - 1e-3 <= bound <= 3.0
    assert counts["float32"] <= 3 + 1 and counts["float64"] == 2  # sizing, check


@pytest.mark.parametrize("size", [1, 2, 5, 40, 97])
def test_the_smallest_ritz_pair_is_scipys(size):
    # The direct LAPACK calls give eigh_tridiagonal's bits, repeated and
    # clustered eigenvalues included.
    rng = np.random.default_rng(size)
    for diagonal, off in [
        (rng.normal(size=size), np.abs(rng.normal(size=size - 1))),
        (np.full(size, 2.0), np.full(size - 1, 1e-9)),
    ]:
        theta, s = _lifted_solve._smallest_pair(diagonal, off)
        values, vectors = scipy.linalg.eigh_tridiagonal(
            diagonal, off, select="i", select_range=(0, 0)
        )
        assert theta == values[0]
        np.testing.assert_array_equal(s, vectors[:, 0])


def test_the_bound_is_the_same_bits_every_call():
    A, _ = _noise_dominated_system(q=300)
    bounds = {_lifted_solve.smallest_eigenvalue_lower_bound(A, 10.0) for _ in range(5)}
    assert len(bounds) == 1


@pytest.mark.parametrize(
    "scale, q",
    [
        *((s, q) for q in (100, 300) for s in (1.0, 1e-12, 1e-14, 1e-30, 1e-200, 1e-300)),
        *((s, q) for q in (100, 300) for s in (1e19, 1e39, 1e150)),
        # LAPACK's value (q = 100) where the norm of A overflows; the
        # allowance is taken from A times a power of two
        (2.0**1018, 100),
    ],
)
def test_the_bound_is_below_lambda_min_at_any_scale(scale, q):
    # Every run works on A times a power of two (without it 1e19 overflows a
    # float32 norm, 1e39 the float32 entries, and 1e-200 squares to 0 in a
    # float64 norm: the bound was the start vector's Rayleigh quotient), and
    # the tolerance's floor is relative to ||A|| (an absolute one let
    # unconverged Ritz values through below 1e-13): the same bound at every
    # scale, and no warning.
    A, _ = _noise_dominated_system(q=q)
    unscaled = _lifted_solve.smallest_eigenvalue_lower_bound(A, 30.0)
    A = A * scale
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        bound = _lifted_solve.smallest_eigenvalue_lower_bound(A, 30.0 * scale)
    lowest = np.linalg.eigvalsh(A)[0]
    assert bound <= lowest
    assert bound == pytest.approx(unscaled * scale, rel=1e-6)


def test_conjugate_gradients_are_as_accurate_as_the_factorization_when_ill_conditioned():
    # Noise plus one large eigenvalue along the ones (raw features, no
    # intercept, large n), b mostly along it: a residual small relative to
    # ||b|| says little about the small eigenvalues' part of the solution.
    q, spike = 800, 1e10
    A, b = _noise_dominated_system(q=q)
    ones = np.ones(q) / np.sqrt(q)
    A = A + spike * np.outer(ones, ones)
    b = b + 1e9 * ones
    floor = 60.0
    lift = floor - _lifted_solve.smallest_eigenvalue_lower_bound(A)
    base = A - spike * np.outer(ones, ones) + lift * np.eye(q)  # Sherman-Morrison
    solve = lambda v: scipy.linalg.cho_solve(scipy.linalg.cho_factor(base), v)  # noqa: E731
    u, y = solve(ones), solve(b)
    exact = y - u * (spike * (ones @ y)) / (1.0 + spike * (ones @ u))
    factored = scipy.linalg.cho_solve(scipy.linalg.cho_factor(A + lift * np.eye(q)), b)
    w = _lifted_solve.lifted_solve(A.copy(), b, floor, lambda: A.copy())
    assert np.linalg.norm(w - exact) <= 3 * np.linalg.norm(factored - exact)


def test_repeated_solves_of_one_system_agree():
    # The bound, and the model, must not depend on the calls made before
    # (ARPACK, used until 2026-11, drew its restart vectors from a
    # process-wide random state: at a tolerance of 1e-3 two solves of this
    # system were 2e-7 relative apart).
    rng = np.random.default_rng(1)
    q = _lifted_solve._DENSE_SLOPES + 8  # the Lanczos path
    m = 4 * q
    F = rng.normal(size=(m, 5)) @ (rng.normal(size=(5, q)) * np.linspace(3, 0.1, 5)[:, None])
    X = F + 0.05 * rng.normal(size=(m, q)) + 0.5
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    noise = rng.normal(size=(q, q)) / np.sqrt(2)
    A = (X.T @ X) * (1e5 / m) + noise + noise.T
    b = X.T @ np.clip(X @ rng.normal(size=q) / np.sqrt(q), -1, 1) * (1e5 / m)
    floor = noise_spectral_bound(1.0, q)
    solutions = [
        _lifted_solve.lifted_solve(A.copy(), b, floor, lambda: A.copy()) for _ in range(10)
    ]
    for w in solutions[1:]:
        assert np.linalg.norm(w - solutions[0]) <= 1e-10 * np.linalg.norm(solutions[0])


def test_without_noise_a_singular_gram_gives_the_minimum_norm_solution():
    rng = np.random.default_rng(0)
    for d, n in [(100, 40), (300, 100)]:
        Z = rng.uniform(-1, 1, size=(n, d)) / np.sqrt(d)
        t = 0.5 * Z[:, 0]
        M = np.c_[Z, t]
        w = solve_noisy_gram(M.T @ M, d, np.zeros(d), 0.0, fit_intercept=False)
        expected = np.linalg.lstsq(Z, t, rcond=None)[0]
        assert np.linalg.norm(w - expected) <= 1e-10 * np.linalg.norm(expected)


def test_without_noise_the_solve_is_least_squares():
    gram, Z, t = _gram()
    w = solve_noisy_gram(gram, 4, np.zeros(4), 0.0, fit_intercept=True)
    exact = np.linalg.lstsq(np.column_stack([Z, np.ones(len(t))]), t, rcond=None)[0]
    np.testing.assert_allclose(w, exact, rtol=1e-9, atol=1e-12)


def test_defaults_fit_raw_diabetes():
    """Issue acceptance: load_diabetes with all defaults at epsilon = 1 (the
    target in its raw units, 25..346) has a median test R^2 >= 0.05; with the
    old defaults (feature_norm=1, target_bound=1) it was -4.1."""
    X, y = load_diabetes(return_X_y=True)
    scores = []
    for seed in range(7):
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=seed)
        model = DPLinearRegression(random_state=seed).fit(X_tr, y_tr)
        scores.append(r2_score(y_te, model.predict(X_te)))
    assert np.median(scores) >= 0.05


def test_the_solve_runs_on_one_blas_thread_up_to_1024_slopes(monkeypatch):
    # solve_blas: the products of a lifted solve of up to 1024 slopes run with
    # BLAS on one thread (no worker left spinning on the core a deletion's
    # noise needs), so the model is the same bits at any thread count.
    from threadpoolctl import threadpool_info, threadpool_limits

    from sklearn_dpu import _row_threads
    from sklearn_dpu.linear_model import _sufficient_statistics

    seen = []
    original = _lifted_solve._eigenvalue_bound

    def recorded(*args, **kwargs):
        seen.append(_row_threads.blas_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(_lifted_solve, "_eigenvalue_bound", recorded)
    A, b = _noise_dominated_system()
    with threadpool_limits(2):
        if _row_threads.blas_threads() < 2:
            pytest.skip("BLAS here runs one thread")
        solve_noisy_gram(np.block([[A, b[:, None]], [b, 1.0]]), len(b), np.zeros(len(b)), 5.0)
        with _lifted_solve.solve_blas(2000):  # above 1024 slopes: the caller's threads
            assert _row_threads.blas_threads() == 2
    assert seen == [1]
    assert _sufficient_statistics.solve_blas is _lifted_solve.solve_blas
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(2_000, 300))
    y = X @ rng.normal(size=300) / 17

    def coef(threads):
        with threadpool_limits(threads):
            reg = DPLinearRegression(feature_norm=17.5, target_bound=3.0, random_state=0)
            return reg.fit(X, y).coef_

    assert np.array_equal(coef(1), coef(2))
    # Negative control: with the caller's two threads the products round
    # differently (OpenBLAS splits symv from 200 rows), and so does the model.
    if not any(lib["internal_api"] == "openblas" for lib in threadpool_info()):
        pytest.skip("the negative control assumes OpenBLAS's threaded symv")
    monkeypatch.setattr(_lifted_solve, "_SERIAL_SLOPES", 0)
    assert not np.array_equal(coef(1), coef(2))
