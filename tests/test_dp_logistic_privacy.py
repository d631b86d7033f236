"""Privacy of DPLogisticRegression: sensitivities, calibration, audits.

Every privacy check keeps a negative control that shows it fails on a broken
variant (too little noise, the Jacobian term dropped, the dissertation's
printed sigma).
"""

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant
from dp_accounting.privacy_accountant import NeighboringRelation
from scipy import integrate, stats
from scipy.special import expit

from sklearn_dpu.linear_model import DPLogisticRegression, _dp_logistic, _logistic_releases
from sklearn_dpu.linear_model._certified_minimize import certified_minimize
from sklearn_dpu.linear_model._logistic_solvers import private_fit, private_sgd_pass
from sklearn_dpu.linear_model._objective_perturbation import (
    jacobian_epsilon,
    objective_perturbation_mu,
    objective_perturbation_noise_mu,
)

from ._stats import audit_epsilon_lower_bound, n_trials

DELTA = 1e-5


def _delta_gdp(mu, eps):
    """Privacy profile of mu-GDP (Dong, Roth & Su 2022, Cor. 2.13)."""
    return stats.norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


def _neighbours(seed=0, n=12, d=2, feature_norm=1.0, n_classes=2):
    """D and D' = D + {z}: z on the clip boundary, labelled against the trend."""
    rng = np.random.default_rng(seed)
    X = 0.4 * feature_norm * rng.normal(size=(n, d)) / math.sqrt(d)
    y = (X[:, 0] > 0).astype(int) if n_classes == 2 else rng.integers(n_classes, size=n)
    y[:n_classes] = np.arange(n_classes)
    z = np.zeros((1, d))
    z[0, 0] = 3.0 * feature_norm  # clipped to the boundary
    X_prime = np.vstack([X, z])
    y_prime = np.append(y, 0)
    return X, y, X_prime, y_prime


# ---------------------------------------------------------------- sensitivity


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("coef_bound", [None, 0.3])
def test_output_perturbation_sensitivity_on_neighbours(n_classes, coef_bound):
    """||theta(D) - theta(D')|| <= (G + 2 tol G) / Lambda, and nearly attained."""
    worst = 0.0
    for seed in range(25 if coef_bound is None else 8):
        X, y, Xp, yp = _neighbours(seed, n=8, d=3, n_classes=n_classes)
        est = DPLogisticRegression(
            feature_norm=1.0, C=0.5, solver="output", coef_bound=coef_bound
        ).fit(X, y)
        loss = est._loss()
        config = est.unlearning_state_.chunks[0].config
        Lambda, tau = config.Lambda, config.tau

        def solve(X, y, est=est, loss=loss, Lambda=Lambda, tau=tau):
            A = est._normalize(X)
            return certified_minimize(
                loss, A, loss.encode_labels(y), Lambda, tau, radius=coef_bound
            ).theta

        gap = np.linalg.norm(solve(X, y) - solve(Xp, yp))
        bound = (loss.lipschitz + 2 * tau) / Lambda
        assert gap <= bound * (1 + 1e-9)
        worst = max(worst, gap / bound)
    assert worst > (0.1 if coef_bound else 0.3)  # the bound is not vacuous


def test_noisy_gd_step_sensitivity():
    """A record changes the gradient sum by at most G at any parameter."""
    X, y, Xp, yp = _neighbours(1, n=10, d=3, n_classes=3)
    est = DPLogisticRegression(feature_norm=1.0, solver="noisy_gd").fit(X, y)
    loss = est._loss()
    A, Ap = est._normalize(X), est._normalize(Xp)
    rng = np.random.default_rng(0)
    for scale in (0.0, 1.0, 100.0):
        theta = scale * rng.normal(size=loss.n_params)
        g = loss.value_and_grad(theta, A, loss.encode_labels(y))[1]
        gp = loss.value_and_grad(theta, Ap, loss.encode_labels(yp))[1]
        assert np.linalg.norm(g - gp) <= loss.lipschitz * (1 + 1e-12)


def test_dp_sgd_clips_per_example_gradients():
    """Whatever a per-example gradient is, a batch sum moves by at most G per row
    (the sensitivity of a DP-SGD step holds by construction)."""
    from sklearn_dpu.linear_model._losses import LinearModelLoss
    from sklearn_dpu.linear_model._noisy_gd_glm import dp_sgd_pass
    from sklearn_dpu.privacy.mechanisms import GaussianSteps

    loss = LinearModelLoss(2, 3, np.sqrt(2.0))
    A = np.array([[1.0, 0.0, 1.0]])
    y = np.array([-1.0])

    class Huge(LinearModelLoss):
        def per_example_grads(self, theta, A, y):
            return 1e6 * super().per_example_grads(theta, A, y)

    huge = Huge(2, 3, np.sqrt(2.0))
    steps = GaussianSteps(loss.lipschitz, noise_multiplier=0.0, steps=1)
    common = dict(n_public=1.0, batch_size=1, Lambda=1e-9, steps=steps, radius=None)
    zero = np.zeros(3)
    for current in (loss, huge):
        theta, _ = dp_sgd_pass(current, A, y, zero, rng=np.random.default_rng(0), **common)
        step = 1.0 / (loss.smoothness + 1e-9)
        assert np.linalg.norm(theta) <= step * loss.lipschitz * (1 + 1e-9)


# ----------------------------------------------------- objective perturbation


@pytest.mark.parametrize("mu, eps_j", [(0.3, 0.01), (1.0, 0.2), (2.5, 0.6)])
def test_objective_perturbation_certificate_dominates_the_loss_bound(mu, eps_j):
    """B(eps) = E[(1 - exp(eps - eps_J - max(0, L)))_+] <= delta_{mu'}(eps) for all
    eps, with equality at 0 (the closed form is the exact crossing)."""
    mu_prime = objective_perturbation_mu(mu, eps_j)

    def bound(eps):
        def f(loss):
            return max(0.0, 1 - np.exp(eps - eps_j - max(0.0, loss))) * stats.norm.pdf(
                loss, mu**2 / 2, mu
            )

        return integrate.quad(f, -12 * mu, 12 * mu + mu**2, points=[0.0], limit=200)[0]

    assert bound(0.0) == pytest.approx(_delta_gdp(mu_prime, 0.0), rel=1e-6)
    for eps in np.linspace(0.1, 8, 12):
        assert bound(eps) <= _delta_gdp(mu_prime, eps) + 1e-9
    assert objective_perturbation_noise_mu(mu_prime, eps_j) == pytest.approx(mu)


def test_objective_perturbation_exact_densities():
    """One coordinate, exact output densities p(theta) = N(b(theta)) |J(theta)|:
    the hockey-stick divergences of D vs D + {z} stay below mu'-GDP. Negative
    control: dropping the Jacobian term (claiming G/sigma-GDP) is violated."""
    Lambda, sigma = 0.1, 3.0
    a, s = np.array([0.3]), np.array([1.0])
    z_a, z_s = 1.0, -1.0
    theta = np.linspace(-200, 200, 400001)
    dt = theta[1] - theta[0]

    def density(a, s):
        m = s[None, :] * a[None, :] * theta[:, None]
        grad = np.sum(-s * a * expit(-m), axis=1) + Lambda * theta
        hess = np.sum(a**2 * expit(m) * expit(-m), axis=1) + Lambda
        return stats.norm.pdf(-grad, scale=sigma) * hess

    p, q = density(a, s), density(np.append(a, z_a), np.append(s, z_s))
    assert p.sum() * dt == pytest.approx(1.0, abs=1e-6)
    mu_b = 1.0 / sigma
    mu_prime = objective_perturbation_mu(mu_b, jacobian_epsilon(0.25, Lambda))
    excess_certified, excess_naive = -1.0, -1.0
    for eps in np.linspace(0, 6, 61):
        h = max(
            np.sum(np.maximum(p - np.exp(eps) * q, 0)) * dt,
            np.sum(np.maximum(q - np.exp(eps) * p, 0)) * dt,
        )
        excess_certified = max(excess_certified, h - _delta_gdp(mu_prime, eps))
        excess_naive = max(excess_naive, h - _delta_gdp(mu_b, eps))
    assert excess_certified <= 1e-6
    assert excess_naive > 0.01  # negative control


# ------------------------------------------------------------- calibration


def _pld_epsilon(events):
    accountant = PLDAccountant(
        NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-3
    )
    return accountant.compose(dp_event.ComposedDpEvent(events)).get_epsilon(DELTA)


def _ran_events(est):
    """The per-step events of what ran, rebuilt from the public configuration."""
    config = est.unlearning_state_.chunks[-1].config
    mu = 1 / _logistic_releases.gaussian_noise_multiplier(est.epsilon, est.delta)
    events = [dp_event.GaussianDpEvent(1 / (math.sqrt(_logistic_releases.SHARES.count) * mu))]
    loss = est._loss()
    if config.solver == "output":
        sensitivity = (loss.lipschitz + 2 * config.tau) / config.Lambda
        events.append(dp_event.GaussianDpEvent(config.sigma / sensitivity))
    elif config.solver == "sgd":
        events.append(dp_event.GaussianDpEvent(config.batch_multiplier))
    elif config.solver == "noisy_gd":
        events.append(dp_event.GaussianDpEvent(config.gram_multiplier))
        events.append(
            dp_event.SelfComposedDpEvent(
                dp_event.GaussianDpEvent(config.step_multiplier), config.n_steps
            )
        )
    else:
        K = config.per_class
        amp_sensitivity = 2 * config.tau / config.Lambda
        events.append(
            dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(1 / config.certified_mu_class), K)
        )
        events.append(
            dp_event.SelfComposedDpEvent(
                dp_event.GaussianDpEvent(config.sigma_amp / amp_sensitivity), K
            )
        )
    return events


@pytest.mark.parametrize("solver", ["output", "objective", "noisy_gd", "sgd"])
@pytest.mark.parametrize("n_classes", [2, 4])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
def test_calibration_against_dp_accounting(solver, n_classes, epsilon):
    """The noise that ran, composed by dp-accounting's PLD accountant, is at
    most (epsilon, delta) and tight; privacy_spent_ reports it."""
    X, y, _, _ = _neighbours(0, n=40, d=3, n_classes=n_classes)
    if solver == "sgd":
        est = DPLogisticRegression(feature_norm=1.0, epsilon=epsilon, random_state=0)
        est.partial_fit(X, y, classes=np.unique(y))
    else:
        est = DPLogisticRegression(feature_norm=1.0, epsilon=epsilon, solver=solver, random_state=0)
        est.fit(X, y)
    eps = _pld_epsilon(_ran_events(est))
    assert eps <= epsilon * (1 + 1e-3)
    assert eps >= epsilon * 0.98
    assert est.privacy_spent_.epsilon == pytest.approx(epsilon, rel=1e-6)
    assert est.privacy_spent_.delta == DELTA


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_dissertation_printed_sigma_is_too_small(epsilon):
    """Negative control for the calibration: Thm 12's sigma = Delta sqrt(log(1/delta))
    / eps (as printed in Ullah 2024, Thm 12) exceeds the target epsilon under dp-accounting."""
    printed = math.sqrt(math.log(1 / DELTA)) / epsilon
    assert _pld_epsilon([dp_event.GaussianDpEvent(printed)]) > 1.02 * epsilon
    ours = _logistic_releases.gaussian_noise_multiplier(epsilon, DELTA)
    assert ours > printed
    assert _pld_epsilon([dp_event.GaussianDpEvent(ours)]) <= epsilon * (1 + 1e-6)


# ------------------------------------------------------------------- audits


def _audit(make, X, y, Xp, yp, n, partial=False):
    """Lower-bound epsilon from releases on D and D' (a projection statistic).

    Each trial runs the estimator's release path (noisy count, then model)
    with a fresh generator, on rows normalized by the estimator itself; the
    validation and ledger bookkeeping of ``fit`` are left out for speed.
    """

    def releases(X, y, offset):
        est = make(random_state=0)
        est = est.partial_fit(X, y, classes=np.unique(y)) if partial else est.fit(X, y)
        A, y_index = est._normalize(X), np.searchsorted(est.classes_, y)
        out = []
        for t in range(n):
            rng = np.random.default_rng([offset, t])
            params, loss = est._params(), est._loss()
            if partial:
                theta0 = np.zeros(loss.n_params)
                model = private_sgd_pass(params, loss, A, y_index, theta0, rng)[0]
            else:
                model = private_fit(params, loss, A, y_index, rng)[0]
            out.append(model.theta)
        return np.array(out)

    a, b = releases(X, y, 1), releases(Xp, yp, 2)
    # Direction from a separate pilot, so the test statistic is fixed in advance.
    direction = releases(X, y, 3).mean(0) - releases(Xp, yp, 4).mean(0)
    direction /= np.linalg.norm(direction)
    return audit_epsilon_lower_bound(a @ direction, b @ direction, DELTA)


def test_release_path_is_what_fit_runs():
    """The audited release path reproduces fit and partial_fit exactly."""
    X, y, _, _ = _neighbours(4, n=10, d=2)
    for solver in ("output", "objective", "noisy_gd"):
        est = DPLogisticRegression(feature_norm=1.0, solver=solver, C=0.05, random_state=7).fit(
            X, y
        )
        rng = _dp_logistic.release_generator(7, 0)
        model = private_fit(est._params(), est._loss(), est._normalize(X), y, rng)[0]
        np.testing.assert_array_equal(model.theta, est.unlearning_state_.chunks[0].theta)
    est = DPLogisticRegression(feature_norm=1.0, C=0.05, random_state=7).partial_fit(
        X, y, classes=[0, 1]
    )
    theta0 = np.zeros(est._loss().n_params)
    rng = _dp_logistic.release_generator(7, 0)
    model = private_sgd_pass(est._params(), est._loss(), est._normalize(X), y, theta0, rng)[0]
    np.testing.assert_array_equal(model.theta, est.unlearning_state_.chunks[0].theta)


SOLVERS = {
    "output": dict(solver="output", C=0.05),
    "objective": dict(solver="objective", C=0.05),
    "noisy_gd": dict(solver="noisy_gd", C=0.05, max_iter=5),
    "dp_sgd": dict(C=0.05, batch_size=64),
}


@pytest.mark.statistical
@pytest.mark.parametrize("name", list(SOLVERS))
def test_statistical_audit_and_negative_control(name, monkeypatch):
    """Audit on a worst-case pair: the empirical lower bound stays below the
    claimed epsilon; with 30x less noise (the claim unchanged) it exceeds it."""
    epsilon = 1.0
    X, y, Xp, yp = _neighbours(3, n=10, d=2)
    params = SOLVERS[name]

    def make(**kw):
        return DPLogisticRegression(epsilon=epsilon, **params, **kw)

    partial = name == "dp_sgd"
    n = n_trials(ci=1000, full=20000)
    assert _audit(make, X, y, Xp, yp, n, partial) <= epsilon

    true_mu = _logistic_releases._gdp_mu
    monkeypatch.setattr(_logistic_releases, "_gdp_mu", lambda e, d: 30 * true_mu(e, d))
    assert _audit(make, X, y, Xp, yp, n_trials(ci=300, full=4000), partial) > epsilon


@pytest.mark.parametrize("solver", ["output", "objective", "noisy_gd", "sgd"])
def test_ledger_events_are_read_from_the_mechanisms_that_drew_the_noise(solver):
    """The fit's ledger entry is the composition of the count's and the model's
    mechanism objects, and those objects carry the configuration's noise."""
    from sklearn_dpu.privacy.events import event_to_dict

    X, y, _, _ = _neighbours(0, n=40, d=3, n_classes=3)
    est = DPLogisticRegression(
        feature_norm=1.0, solver="auto" if solver == "sgd" else solver, random_state=0
    )
    if solver == "sgd":
        est.partial_fit(X, y, classes=np.unique(y))
    else:
        est.fit(X, y)
    params, loss = est._params(), est._loss()
    config = est.unlearning_state_.chunks[0].config
    mechanisms = _logistic_releases.model_mechanisms(params, config, loss)
    count = _logistic_releases.count_mechanism(params)
    events = [count.dp_event, *(m.dp_event for m in mechanisms)]
    assert est.privacy_ledger_[0]["event"] == event_to_dict(dp_event.ComposedDpEvent(events))
    if solver == "output":
        assert mechanisms[0].sigma == config.sigma
    elif solver == "objective":
        assert (mechanisms[0].sigma, mechanisms[1].sigma) == (config.sigma_b, config.sigma_amp)
    elif solver == "noisy_gd":
        run = mechanisms[0]
        assert run.steps.noise_multiplier == config.step_multiplier
        assert run.gram.noise_multiplier == config.gram_multiplier
    else:
        assert mechanisms[0].steps.noise_multiplier == config.batch_multiplier


def test_a_run_whose_noise_does_not_match_its_event_is_refused():
    """Negative control of the check tying a noisy-GD run's event to its noise:
    a run of 4 steps at multiplier 1 is 2.24-GDP, not 1-GDP."""
    from sklearn_dpu.linear_model._noisy_gd_glm import DisjointBatchSums, NoisyGDRun
    from sklearn_dpu.privacy.mechanisms import GaussianMechanism, GaussianSteps

    with pytest.raises(ValueError, match="GDP"):
        NoisyGDRun(1.0, GaussianMechanism(1.0, 1.0), GaussianSteps(1.0, 1.0, 4))
    with pytest.raises(ValueError, match="GDP"):
        DisjointBatchSums(1.0, GaussianSteps(1.0, 0.5, 4))
    ok = NoisyGDRun(math.sqrt(5.0), GaussianMechanism(1.0, 1.0), GaussianSteps(1.0, 1.0, 4))
    assert ok.dp_event == dp_event.GaussianDpEvent(1 / math.sqrt(5.0))
