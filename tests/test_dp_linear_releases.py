"""DPLinearRegression: each release's noise and its ledger record come from one
mechanism object, and deletion reports estimate a retrain without timing it."""

import ast
from pathlib import Path

import numpy as np
import pytest

from sklearn_dpu.linear_model import DPLinearRegression, _dp_linear, _linear_solvers
from sklearn_dpu.linear_model import _noisy_gd as noisy_gd_module
from sklearn_dpu.privacy.events import event_from_dict
from sklearn_dpu.privacy.ledger import Release
from sklearn_dpu.privacy.mechanisms import GaussianCount, GaussianSteps

MODULES = [
    "_dp_linear",
    "_linear_releases",
    "_linear_solvers",
    "_noisy_gd",
    "_correlated_rerelease",
    "_ambssgd",
]
ROOT = Path(_dp_linear.__file__).parent


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.5, 0.5, size=(n, 3))
    return X, np.clip(X @ [1.0, -0.5, 0.3], -1, 1)


@pytest.mark.parametrize("module", MODULES)
def test_no_privacy_noise_is_drawn_outside_a_mechanism(module):
    # Noise comes from sklearn_dpu.privacy.mechanisms objects (or, for the
    # correlated re-release, an object that also gives its event), which give
    # the ledger its events: no module of the estimator draws normals itself,
    # and only the correlated re-release's object builds a Gaussian event.
    tree = ast.parse((ROOT / f"{module}.py").read_text(encoding="utf-8"))
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert not names & {"normal", "standard_normal"}
    if module != "_correlated_rerelease":
        assert "GaussianDpEvent" not in names


def test_noisy_gd_ledger_is_read_from_the_mechanisms_the_solver_draws_from(monkeypatch):
    seen = []
    real = noisy_gd_module.noisy_projected_gd

    def spy(*args, **kwargs):
        seen.append((kwargs["steps"], kwargs["count"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(_linear_solvers, "noisy_projected_gd", spy)
    X, y = _data()
    reg = DPLinearRegression(
        feature_norm=1.0, target_bound=1.0, solver="noisy_gd", max_iter=40, random_state=0
    ).fit(X, y)
    reg.partial_fit(X[:30], y[:30])
    reg.delete_samples([3])
    assert len(seen) == 3 == len(reg.privacy_ledger_)
    for (steps, count), entry in zip(seen, reg.privacy_ledger_, strict=True):
        assert isinstance(steps, GaussianSteps) and isinstance(count, GaussianCount)
        assert steps.steps == 40
        assert event_from_dict(entry["event"]) == Release.of([steps, count], "", (1, 1), "").event


def test_noisy_gd_count_is_the_count_mechanisms_first_draw():
    # The released count is the recipe's GaussianCount applied to the
    # release's generator, before any gradient noise.
    X, y = _data()
    reg = DPLinearRegression(
        feature_norm=1.0, target_bound=1.0, solver="noisy_gd", max_iter=5, random_state=0
    ).fit(X, y)
    recipe = reg._recipe(reg.unlearning_state_.frozen_params)
    rng = _dp_linear.release_generator(0, 0)
    count = recipe.count.release(len(y), rng)
    assert reg.unlearning_state_.released_count == max(1.0, count)


def test_solver_refuses_noise_calibrated_below_the_gradient_bound():
    steps = GaussianSteps(0.5, 1.0, 3)
    with pytest.raises(ValueError, match="gradient bound"):
        noisy_gd_module.noisy_projected_gd(
            np.eye(3), 10, 2, 1.0, 1.0, steps, GaussianCount(1.0), np.zeros(2), None
        )


def test_correlated_rerelease_ledger_comes_from_the_tree_mechanism():
    X, y = _data()
    reg = DPLinearRegression(
        feature_norm=1.0, target_bound=1.0, rerelease_correlation=0.5, random_state=0
    ).fit(X, y)
    reg.delete_samples([1])
    mechanism = reg.unlearning_state_.statistics.mechanism
    fit, rerelease, fit_copy, growth = (event_from_dict(e["event"]) for e in reg.privacy_ledger_)
    assert fit == fit_copy == mechanism.dp_event
    assert rerelease.noise_multiplier == pytest.approx(
        mechanism.noise_multiplier * np.sqrt(1.5 / 0.5), rel=1e-12
    )
    assert growth.noise_multiplier == pytest.approx(
        mechanism.noise_multiplier * np.sqrt(0.75) / 0.5, rel=1e-12
    )


@pytest.mark.parametrize(
    "params", [{}, {"solver": "noisy_gd", "max_iter": 20}, {"fit_intercept": False}]
)
def test_retrain_cost_is_work_from_public_quantities_not_time(params):
    X, y = _data()
    reg = DPLinearRegression(random_state=0, **params).fit(X, y)
    reg.delete_samples([0, 1])
    report = reg.deletion_log_[-1]
    q = 3 + 1 + reg.fit_intercept
    assert not any("time" in key for key in report.retrain_cost)
    assert report.retrain_cost["flops_per_row"] == q * q
    if reg.fit_intercept:
        count = report.retrain_cost["released_count"]
        assert report.retrain_cost["flops"] == pytest.approx(count * q * q + q**3)
        assert count != len(y) - 2  # a released count, not the exact one
    else:
        assert set(report.retrain_cost) == {"flops_per_row"}
    assert report.cost["wall_time_s"] > 0  # the execution is timed, by the base class


def test_set_params_after_fit_does_not_change_what_a_deletion_releases():
    # A deletion re-releases with the parameters the state was made with
    # (partial_fit refuses other ones), whatever set_params did since.
    X, y = _data()
    a = DPLinearRegression(
        feature_norm=1.0, target_bound=1.0, solver="noisy_gd", max_iter=20, random_state=0
    ).fit(X, y)
    b = DPLinearRegression(
        feature_norm=1.0, target_bound=1.0, solver="noisy_gd", max_iter=20, random_state=0
    ).fit(X, y)
    b.set_params(max_iter=7, alpha=3.0, solver="ssp")
    a.delete_samples([4])
    b.delete_samples([4])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.privacy_ledger_ == b.privacy_ledger_


@pytest.mark.parametrize("rho", [0.0, 0.9])
def test_a_later_set_params_of_delta_restates_nothing(rho):
    # The report and privacy_spent_ are stated at the delta of the fit, which
    # the re-release's noise was calibrated for (at 1e-2 the report said
    # epsilon 0.63 where the fit's delta gives 1.47).
    X, y = _data(400)
    fits = [
        DPLinearRegression(
            feature_norm=1.0, target_bound=1.0, rerelease_correlation=rho, random_state=0
        ).fit(X, y)
        for _ in range(2)
    ]
    fits[1].set_params(delta=1e-2)
    assert fits[1].privacy_spent_ == fits[0].privacy_spent_
    for model in fits:
        model.delete_samples([0, 1, 2])
    assert fits[1].delta == 1e-2  # the parameter is the user's, put back
    a, b = (model.deletion_log_[-1] for model in fits)
    assert (b.rerelease_epsilon, b.remaining_epsilon) == (a.rerelease_epsilon, a.remaining_epsilon)
    assert (b.deletion_epsilon, b.deletion_delta) == (a.deletion_epsilon, a.deletion_delta)
    assert fits[1].privacy_spent_ == fits[0].privacy_spent_
    assert fits[1].privacy_spent_.delta == 1e-5
