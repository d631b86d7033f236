"""Losses, their constants and the certified minimizer of DPLogisticRegression."""

import numpy as np
import pytest
from scipy.optimize import approx_fprime, minimize
from sklearn.linear_model import LogisticRegression

from sklearn_dpu.linear_model._certified_minimize import certified_minimize
from sklearn_dpu.linear_model._losses import LinearModelLoss


def _rows(rng, n, p, row_norm):
    """Rows of norm exactly ``row_norm`` (the clip boundary) and some inside."""
    A = rng.normal(size=(n, p))
    A *= row_norm / np.linalg.norm(A, axis=1, keepdims=True)
    A[: n // 2] *= rng.uniform(0, 1, size=(n // 2, 1))
    return A


@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_gradient_and_hessian_match_finite_differences(n_classes):
    rng = np.random.default_rng(0)
    loss = LinearModelLoss(n_classes, 4, np.sqrt(2.0))
    A = _rows(rng, 30, 4, np.sqrt(2.0))
    y = loss.encode_labels(rng.integers(n_classes, size=30))
    theta = rng.normal(size=loss.n_params)
    value, grad = loss.value_and_grad(theta, A, y)
    numeric = approx_fprime(theta, lambda t: loss.value_and_grad(t, A, y)[0], 1e-7)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-5)
    H = loss.hessian(theta, A, y)
    numeric_h = np.array(
        [
            approx_fprime(theta, lambda t, i=i: loss.value_and_grad(t, A, y)[1][i], 1e-7)
            for i in range(loss.n_params)
        ]
    )
    np.testing.assert_allclose(H, numeric_h, rtol=1e-4, atol=1e-4)
    v = rng.normal(size=loss.n_params)
    np.testing.assert_allclose(loss.hessian_operator(theta, A, y)(v), H @ v, atol=1e-10)
    np.testing.assert_allclose(loss.per_example_grads(theta, A, y).sum(0), grad, atol=1e-10)
    np.testing.assert_allclose(loss.gradient(theta, A, y), grad, atol=1e-12)


@pytest.mark.parametrize("n_classes", [2, 3, 6])
def test_constants_bound_every_record(n_classes):
    """G and beta hold for rows at the clip boundary and any parameter, and are
    nearly attained (a too-large constant would waste noise)."""
    rng = np.random.default_rng(1)
    p, r = 3, np.sqrt(2.0)
    loss = LinearModelLoss(n_classes, p, r)
    A = _rows(rng, 400, p, r)
    y = loss.encode_labels(rng.integers(n_classes, size=400))
    worst_g, worst_h = 0.0, 0.0
    for scale in (0.0, 1.0, 10.0, 1000.0):
        theta = scale * rng.normal(size=loss.n_params)
        norms = np.linalg.norm(loss.per_example_grads(theta, A, y), axis=1)
        worst_g = max(worst_g, norms.max())
        for i in range(0, 400, 40):
            H = loss.hessian(theta, A[i : i + 1], y[i : i + 1])
            worst_h = max(worst_h, np.linalg.eigvalsh(H).max())
    assert worst_g <= loss.lipschitz * (1 + 1e-12)
    assert worst_h <= loss.smoothness * (1 + 1e-12)
    assert worst_g >= 0.9 * loss.lipschitz


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("radius", [None, "half"])
def test_certified_distance_holds(n_classes, radius):
    rng = np.random.default_rng(2)
    loss = LinearModelLoss(n_classes, 4, np.sqrt(2.0))
    A = _rows(rng, 300, 4, np.sqrt(2.0))
    labels = rng.integers(n_classes, size=300)
    A[:, :3] += 0.3 * (labels[:, None] == np.arange(3)) if n_classes > 2 else 0.3 * labels[:, None]
    A[:, 3] = 1.0
    y = loss.encode_labels(labels)
    Lambda, tol = 2.0, 1e-2 * loss.lipschitz
    # Reference: scikit-learn at a far tighter tolerance (C = 1/Lambda, every
    # coordinate penalized because the intercept is a column).
    ref = LogisticRegression(C=1 / Lambda, fit_intercept=False, tol=1e-12, max_iter=10000)
    ref = ref.fit(A, labels).coef_.ravel()
    if radius is None:
        solution = certified_minimize(loss, A, y, Lambda, tol)
        distance = np.linalg.norm(solution.theta - ref)
    else:
        R = 0.5 * np.linalg.norm(ref)
        solution = certified_minimize(loss, A, y, Lambda, tol, radius=R)
        assert np.linalg.norm(solution.theta) <= R * (1 + 1e-12)
        # Reference for the ball: an independent constrained solver (SLSQP).
        reference = minimize(
            lambda t: loss.value_and_grad(t, A, y)[0] + 0.5 * Lambda * t @ t,
            solution.theta,
            jac=lambda t: loss.value_and_grad(t, A, y)[1] + Lambda * t,
            constraints=[{"type": "ineq", "fun": lambda t: R**2 - t @ t}],
            method="SLSQP",
            options={"ftol": 1e-15, "maxiter": 1000},
        )
        theta = reference.x
        distance = np.linalg.norm(solution.theta - theta)
    assert Lambda * solution.distance_bound <= tol
    assert distance <= solution.distance_bound + 1e-9


def test_certificate_refuses_an_unreachable_tolerance():
    rng = np.random.default_rng(3)
    loss = LinearModelLoss(2, 3, 1.0)
    A = _rows(rng, 50, 3, 1.0)
    y = loss.encode_labels(rng.integers(2, size=50))
    with pytest.raises(RuntimeError, match="increase tol"):
        certified_minimize(loss, A, y, 1.0, 1e-300, max_iter=5)
