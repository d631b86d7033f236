"""The blocked multinomial log-loss pass equals the generic summed loss to rounding."""

import numpy as np
import pytest
import scipy.sparse as sp

from sklearn_dpu.linear_model import (
    _certified_minimize,
    _langevin,
    _multinomial_pass,
    _noisy_gd_glm,
)
from sklearn_dpu.linear_model._binary_pass import BinaryLogLossPass
from sklearn_dpu.linear_model._certified_minimize import certified_minimize
from sklearn_dpu.linear_model._losses import Hinge, LinearModelLoss
from sklearn_dpu.linear_model._multinomial_pass import (
    MultinomialLogLossPass,
    evaluation_pass,
    multinomial_pass,
)
from sklearn_dpu.privacy.mechanisms import GaussianSteps

from .test_binary_pass import assert_matches_generic


def _problem(n, p, K, scale, seed=0):
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, p + 1)) / np.sqrt(p)  # a strided view, as the solvers'
    y = rng.integers(0, K, n)
    theta = scale * rng.standard_normal(K * p)
    return rows[:, :-1], y, theta


@pytest.mark.parametrize("n, p, K", [(1, 3, 3), (700, 5, 3), (700, 5, 7), (3000, 40, 4)])
@pytest.mark.parametrize("scale", [0.0, 1.0, 60.0])
def test_multinomial_pass_matches_generic(n, p, K, scale, monkeypatch):
    # Several blocks and a partial last block (one row: a single block).
    monkeypatch.setattr(_multinomial_pass, "_BLOCK_BYTES", 1 << 14)
    A, y, theta = _problem(n, p, K, scale)
    loss = LinearModelLoss(K, p, 1.0)
    evaluation = multinomial_pass(loss, A, y)
    assert isinstance(evaluation, MultinomialLogLossPass)
    assert n == 1 or evaluation._rows < n
    pass_value = assert_matches_generic(evaluation, loss, A, y, theta)
    grad = loss.value_and_grad(theta, A, y)[1]
    # Negative control: other labels give another value and gradient.
    other = (y + 1) % K
    other_value, other_grad = MultinomialLogLossPass(A, other, K).value_and_grad(theta)
    assert not np.allclose(other_grad, grad, rtol=0, atol=1e-6)
    if scale > 0:
        assert abs(other_value - pass_value) > 1e-6


def test_ties_and_extreme_scores():
    A = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y = np.array([0, 2, 1])
    evaluation = MultinomialLogLossPass(A, y, 3)
    # theta = 0: every score ties, each row's loss is log K exactly, p = 1/K.
    value, grad = evaluation.value_and_grad(np.zeros(6))
    assert value == pytest.approx(3 * np.log(3.0), rel=1e-15)
    expected = (np.full((3, 3), 1.0 / 3.0) - np.eye(3)[y]).T @ A
    np.testing.assert_allclose(grad, expected.ravel(), atol=1e-15)
    # Scores of +-800 (exp overflows without the shift): finite, the right values.
    theta = np.array([800.0, 0.0, -800.0, 0.0, 0.0, 800.0])
    value, grad = evaluation.value_and_grad(theta)
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    loss = LinearModelLoss(3, 2, 1.0)
    generic_value, generic_grad = loss.value_and_grad(theta, A, y)
    assert value == pytest.approx(generic_value, rel=1e-12)
    np.testing.assert_allclose(grad, generic_grad, atol=1e-12)
    # A loss far below the rounding of log(1 + s): kept by log1p.
    small, _ = MultinomialLogLossPass(A[:1], y[:1], 3).value_and_grad(
        np.array([40.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    )
    assert small == pytest.approx(2 * np.exp(-40.0), rel=1e-12)


def test_multinomial_pass_only_where_it_applies():
    A, y, _ = _problem(10, 3, 3, 1.0)
    assert multinomial_pass(LinearModelLoss(2, 3, 1.0), A, y % 2) is None  # binary
    assert multinomial_pass(LinearModelLoss(3, 3, 1.0, Hinge()), A, y) is None
    assert multinomial_pass(LinearModelLoss(3, 3, 1.0), A.astype(np.float32), y) is None
    assert multinomial_pass(LinearModelLoss(3, 3, 1.0), sp.csr_matrix(A), y) is None
    assert multinomial_pass(LinearModelLoss(3, 3, 1.0), A[:0], y[:0]) is None

    class Custom(LinearModelLoss):
        def value_and_grad(self, theta, A, y):
            return super().value_and_grad(theta, A, y)

    assert multinomial_pass(Custom(3, 3, 1.0), A, y) is None

    class OwnGradient(LinearModelLoss):
        def gradient(self, theta, A, y):
            return np.zeros_like(theta)

    # A loss with its own gradient keeps it, binary or not (Langevin, noisy GD).
    assert evaluation_pass(OwnGradient(2, 3, 1.0), A, y % 2) is None
    assert evaluation_pass(OwnGradient(3, 3, 1.0), A, y) is None
    assert evaluation_pass(object(), A, y) is None  # duck-typed losses keep their gradient
    assert isinstance(evaluation_pass(LinearModelLoss(2, 3, 1.0), A, y % 2), BinaryLogLossPass)
    assert isinstance(evaluation_pass(LinearModelLoss(3, 3, 1.0), A, y), MultinomialLogLossPass)


def _generic_only(monkeypatch, module):
    monkeypatch.setattr(module, "multinomial_pass", lambda loss, A, y: None, raising=False)
    # The noisy GD and Langevin steps get theirs through gradient_function.
    monkeypatch.setattr(_multinomial_pass, "evaluation_pass", lambda loss, A, y: None)


def test_certified_minimize_uses_the_pass_and_certifies_the_same_minimizer(monkeypatch):
    A, y, _ = _problem(4000, 8, 4, 0.0, seed=3)
    loss = LinearModelLoss(4, 8, 1.0)
    calls = []
    original = MultinomialLogLossPass.value_and_grad

    def counted(self, theta):
        calls.append(1)
        return original(self, theta)

    monkeypatch.setattr(MultinomialLogLossPass, "value_and_grad", counted)
    tol, Lambda = 1e-6, 2.0
    fast = certified_minimize(loss, A, y, Lambda=Lambda, tol=tol)
    assert calls, "the multiclass solve did not use the multinomial pass"
    _generic_only(monkeypatch, _certified_minimize)
    calls.clear()
    generic = certified_minimize(loss, A, y, Lambda=Lambda, tol=tol)
    assert not calls
    # Both certify Lambda ||theta - theta*|| <= tol: within 2 tol / Lambda.
    assert np.linalg.norm(fast.theta - generic.theta) <= 2 * tol / Lambda
    assert abs(fast.n_grad - generic.n_grad) <= 2


def test_noisy_gd_multiclass_steps_equal_the_generic_ones(monkeypatch):
    A, y, _ = _problem(3000, 6, 3, 0.0, seed=4)
    loss = LinearModelLoss(3, 6, 1.0)
    steps = GaussianSteps(loss.lipschitz, 5.0, 10)
    kwargs = dict(Lambda=1.0, steps=steps, preconditioner=np.eye(6) / 800.0, radius=None)
    fast = _noisy_gd_glm.noisy_projected_gd_glm(loss, A, y, rng=np.random.default_rng(0), **kwargs)
    _generic_only(monkeypatch, _noisy_gd_glm)
    generic = _noisy_gd_glm.noisy_projected_gd_glm(
        loss, A, y, rng=np.random.default_rng(0), **kwargs
    )
    np.testing.assert_allclose(fast, generic, rtol=1e-10, atol=1e-12)
    # Negative control: other labels move the run.
    other = _noisy_gd_glm.noisy_projected_gd_glm(
        loss, A, (y + 1) % 3, rng=np.random.default_rng(0), **kwargs
    )
    assert not np.allclose(other, generic, rtol=0, atol=1e-6)


def test_weighted_gradient_is_the_fine_tunes(monkeypatch):
    """With per-row weights (the deletion fine-tune's: 0 for a deleted row)
    the pass's gradient equals the generic blocked one, and zero weights
    equal removing the rows."""
    monkeypatch.setattr(_multinomial_pass, "_BLOCK_BYTES", 1 << 14)
    A, y, theta = _problem(3000, 7, 4, 1.0, seed=5)
    loss = LinearModelLoss(4, 7, 1.0)
    weights = np.ones(len(y))
    weights[[0, 5, 2999]] = 0.0
    evaluation = multinomial_pass(loss, A, y)
    generic = _certified_minimize._weighted_gradient(loss, theta, A, y, weights)
    fast = _certified_minimize._weighted_gradient(loss, theta, A, y, weights, evaluation)
    np.testing.assert_allclose(fast, generic, rtol=0, atol=1e-10)
    kept = weights == 1.0
    removed = loss.value_and_grad(theta, A[kept], y[kept])[1]
    np.testing.assert_allclose(fast, removed, rtol=0, atol=1e-10)
    # Negative control: unweighted, the deleted rows count.
    assert not np.allclose(evaluation.gradient(theta), removed, rtol=0, atol=1e-6)


@pytest.mark.parametrize("classes", [2, 3])
def test_langevin_steps_use_the_fused_pass(monkeypatch, classes):
    """Langevin's gradient steps run on the one-pass evaluation (binary or
    multinomial), equal to the generic gradient's run to rounding."""
    A, y, _ = _problem(2000, 5, classes, 0.0, seed=6)
    if classes == 2:
        y = y % 2
    loss = LinearModelLoss(classes, 5, 1.0)
    run = _langevin.LangevinRun(loss.lipschitz, 1.0, 1e-4, 1e-3, 15)
    calls = []
    cls = BinaryLogLossPass if classes == 2 else MultinomialLogLossPass
    original = cls.gradient

    def counted(self, *args):
        calls.append(1)
        return original(self, *args)

    monkeypatch.setattr(cls, "gradient", counted)
    start = np.zeros(loss.n_params)
    fast = _langevin.langevin_descent(loss, A, y, start, run, np.random.default_rng(0))
    assert len(calls) == 15
    _generic_only(monkeypatch, _langevin)
    generic = _langevin.langevin_descent(loss, A, y, start, run, np.random.default_rng(0))
    assert len(calls) == 15
    np.testing.assert_allclose(fast, generic, rtol=1e-9, atol=1e-12)
