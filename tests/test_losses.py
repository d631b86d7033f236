"""Every constant of every loss in :mod:`sklearn_dpu.linear_model._losses`, measured.

The privacy of every linear estimator rests on these constants: ``G`` (a
record's gradient norm) is the sensitivity of a gradient sum, ``beta`` (its
smoothness) caps step sizes and enters the Jacobian term of objective
perturbation. Each is checked by random search and finite differences over
margins ``z``, labels, rows of norm ``r`` and parameters: the measured
supremum must not exceed the constant, and must exceed half of it, so that a
halved constant (the negative control, run in the same test) is detected.
"""

import math

import numpy as np
import pytest

from sklearn_dpu.linear_model._losses import LOSSES, LinearModelLoss, LossConstants

N_OUTPUTS = (1, 3, 5)
ROW_NORM = 1.7
QUANTITIES = (
    "z_lipschitz",
    "z_lipschitz_fd",
    "z_smoothness",
    "record_lipschitz",
    "record_smoothness",
)


def _margins(rng, K, n=6000):
    """Scores at many scales, plus rows built to approach each supremum."""
    scales = np.exp(rng.uniform(np.log(1e-3), np.log(60.0), size=(n, 1)))
    Z = rng.normal(size=(n, K)) * scales
    y = rng.integers(max(K, 2), size=n)
    if K > 1:
        # Two tied top scores, the rest far below: softmax p = (1/2, 1/2, 0..).
        tied = np.full((n // 4, K), -40.0)
        tied[:, :2] = rng.normal(scale=1e-3, size=(n // 4, 1))
        Z = np.vstack([Z, tied])
        y = np.concatenate([y, rng.integers(K, size=n // 4)])
    return Z, y


def _measure(loss, K, quantity, rng):
    """The supremum of ``quantity`` found by search (finite where it exists)."""
    Z, y = _margins(rng, K)
    if quantity == "z_lipschitz":
        return np.linalg.norm(loss.dz(Z, y), axis=1).max()
    if quantity == "z_lipschitz_fd":
        H = rng.normal(size=Z.shape) * np.exp(rng.uniform(-8, 1, size=(len(Z), 1)))
        change = np.abs(loss.value(Z + H, y) - loss.value(Z, y))
        return (change / np.linalg.norm(H, axis=1)).max()
    if quantity == "z_smoothness":
        H = rng.normal(size=Z.shape) * 1e-5
        change = np.linalg.norm(loss.dz(Z + H, y) - loss.dz(Z, y), axis=1)
        return (change / np.linalg.norm(H, axis=1)).max()
    # Rows of norm exactly ROW_NORM, parameters at many scales.
    model = LinearModelLoss(2 if K == 1 else K, 3, ROW_NORM, base_loss=loss)
    A = rng.normal(size=(400, 3))
    A *= ROW_NORM / np.linalg.norm(A, axis=1, keepdims=True)
    labels = model.encode_labels(rng.integers(max(K, 2), size=400))
    worst = 0.0
    for scale in (0.0, 0.1, 1.0, 5.0, 100.0):
        theta = scale * rng.normal(size=model.n_params)
        if quantity == "record_lipschitz":
            grads = model.per_example_grads(theta, A, labels)
            worst = max(worst, np.linalg.norm(grads, axis=1).max())
            continue
        # A record's gradient moves by at most beta ||h|| (steps along the row).
        for i in range(0, 400, 8):
            a, label = A[i : i + 1], labels[i : i + 1]
            h = 1e-6 * (np.tile(a[0], model.n_outputs) + 0.1 * rng.normal(size=model.n_params))
            g0 = model.per_example_grads(theta, a, label)[0]
            g1 = model.per_example_grads(theta + h, a, label)[0]
            worst = max(worst, np.linalg.norm(g1 - g0) / np.linalg.norm(h))
            if loss.name == "log_loss":  # the analytic Hessian too
                worst = max(worst, np.linalg.eigvalsh(model.hessian(theta, a, label)).max())
    return worst


def _claimed(loss, K, quantity):
    constants = loss.constants(K)
    model = LinearModelLoss(2 if K == 1 else K, 3, ROW_NORM, base_loss=loss)
    return {
        "z_lipschitz": constants.z_lipschitz,
        "z_lipschitz_fd": constants.z_lipschitz,
        "z_smoothness": constants.z_smoothness,
        "record_lipschitz": model.lipschitz,
        "record_smoothness": model.smoothness,
    }[quantity]


def _holds(constant, measured):
    """The constant bounds the measured supremum (up to rounding)."""
    return measured <= constant * (1 + 1e-6)


@pytest.mark.parametrize("quantity", QUANTITIES)
@pytest.mark.parametrize("K", N_OUTPUTS)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_every_constant_bounds_what_it_claims(name, K, quantity):
    loss = LOSSES[name]
    rng = np.random.default_rng([K, QUANTITIES.index(quantity), len(name)])
    constant = _claimed(loss, K, quantity)
    measured = _measure(loss, K, quantity, rng)
    print(f"{name} K={K} {quantity}: measured {measured:.6g}, constant {constant:.6g}")
    if math.isinf(constant):
        # The hinge is not smooth: its gradient jumps at the margin s z = 1,
        # so no finite smoothness constant holds; straddle the margin.
        assert name == "hinge"
        y = np.arange(max(K, 2))[:K]
        signs = (
            np.where(np.arange(K) == y[:, None], 1.0, -1.0) if K > 1 else np.array([[-1.0], [1.0]])
        )
        y = y if K > 1 else np.array([0, 1])
        below, above = signs * (1 - 1e-9), signs * (1 + 1e-9)
        jump = np.linalg.norm(loss.dz(above, y) - loss.dz(below, y), axis=1)
        assert (jump / np.linalg.norm(above - below, axis=1)).min() > 1e6
        return
    assert _holds(constant, measured)
    # Negative control: a halved constant is caught by the same search.
    assert not _holds(constant / 2, measured)


@pytest.mark.parametrize("K", N_OUTPUTS)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_value_at_zero_and_gradient_consistency(name, K):
    """``value_at_zero`` is ``l(0, y)`` for every label, and ``dz`` is the
    derivative of ``value`` (so the constants, stated for ``dz``, bound the loss)."""
    loss = LOSSES[name]
    assert isinstance(loss.constants(K), LossConstants)
    labels = np.arange(max(K, 2))
    values = loss.value(np.zeros((len(labels), K)), labels)
    np.testing.assert_allclose(values, loss.constants(K).value_at_zero, rtol=1e-15)
    rng = np.random.default_rng(K)
    Z = rng.normal(size=(50, K)) * 3
    y = rng.integers(max(K, 2), size=50)
    eps = 1e-6
    numeric = np.stack(
        [(loss.value(Z + eps * e, y) - loss.value(Z - eps * e, y)) / (2 * eps) for e in np.eye(K)],
        axis=1,
    )
    np.testing.assert_allclose(loss.dz(Z, y), numeric, atol=1e-6)


def test_log_loss_hessian_in_z_matches_its_operator_and_finite_differences():
    loss = LOSSES["log_loss"]
    rng = np.random.default_rng(0)
    for K in N_OUTPUTS:
        Z = rng.normal(size=(40, K)) * 3
        y = rng.integers(max(K, 2), size=40)
        V = rng.normal(size=Z.shape)
        H = loss.hessian_z(Z, y)
        np.testing.assert_allclose(
            np.einsum("nkj,nj->nk", H, V), loss.hessian_z_operator(Z, y)(V), atol=1e-14
        )
        eps = 1e-6
        numeric = (loss.dz(Z + eps * V, y) - loss.dz(Z - eps * V, y)) / (2 * eps)
        np.testing.assert_allclose(np.einsum("nkj,nj->nk", H, V), numeric, atol=1e-7)
