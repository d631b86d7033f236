"""DPLogisticRegression(feature_norm="auto"): a released row-norm bound.

The bound is a charged release drawn by its mechanism object, the model is
calibrated for what remains, published values move only through noise, and
deletions keep the bound and say so.
"""

import numpy as np
import pytest

from sklearn_dpu.base import planned_fit
from sklearn_dpu.exceptions import BudgetExceededError
from sklearn_dpu.linear_model import DPLogisticRegression
from sklearn_dpu.linear_model import _auto_bounds as auto_bounds
from sklearn_dpu.linear_model._logistic_releases import SHARES
from sklearn_dpu.linear_model._logistic_solvers import private_fit
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.privacy.events import event_to_dict
from sklearn_dpu.privacy.random import release_generator

from .test_deletion_published_values import _leads


def _data(n=400, d=3, seed=0, scale=50.0):
    rng = np.random.default_rng(seed)
    X = scale * rng.normal(size=(n, d)) + 3 * scale
    w = rng.normal(size=d)
    y = ((X - 3 * scale) @ w > 0).astype(int)
    return X, y


def test_ledger_events_are_the_mechanisms_that_drew_the_noise():
    X, y = _data()
    est = DPLogisticRegression(epsilon=1.0, feature_norm="auto", solver="output", random_state=3)
    est.fit(X, y)
    mech = auto_bounds.norm_bound_mechanism(1.0, SHARES.bounds)
    assert mech.epsilon == pytest.approx(0.1)
    # The bound: release 0, drawn by the mechanism whose event is ledger[0].
    assert est.feature_norm_ == auto_bounds.release_norm_bound(X, mech, release_generator(3, 0))
    assert est.privacy_ledger_[0]["event"] == event_to_dict(mech.dp_event)
    assert est.privacy_ledger_[0]["chunks"] == [1, 1]
    assert len(est.privacy_ledger_) == 2
    # The model: release 1, rows clipped to and divided by the released bound,
    # calibrated for 0.9 epsilon; its mechanisms give ledger[1].
    params = est._params()
    assert params.epsilon == pytest.approx(0.9) and params.feature_norm == est.feature_norm_
    model, mechanisms = private_fit(
        params, est._loss(), est._normalize(X), y, release_generator(3, 1)
    )
    theta = model.theta.reshape(1, -1)
    np.testing.assert_array_equal(est.coef_, theta[:, :-1] / est.feature_norm_)
    np.testing.assert_array_equal(est.intercept_, theta[:, -1])
    from sklearn_dpu.linear_model._logistic_releases import chunk_release

    expected = chunk_release(params, "fit", 1, "output", mechanisms).to_dict()
    assert est.privacy_ledger_[1]["event"] == expected["event"]


def test_coefficients_are_in_the_units_of_x():
    """Rescaling X by s rescales the released bound by about s and coef_ by 1/s."""
    X, y = _data(n=2000, scale=1.0)
    a = DPLogisticRegression(epsilon=10.0, feature_norm="auto", random_state=0).fit(X, y)
    b = DPLogisticRegression(epsilon=10.0, feature_norm="auto", random_state=0).fit(1000 * X, y)
    ratio = b.feature_norm_ / a.feature_norm_
    assert 1000 / 1.25**2 <= ratio <= 1000 * 1.25**2
    assert a.score(X, y) > 0.8 and b.score(1000 * X, y) > 0.8
    np.testing.assert_allclose(
        a.decision_function(X[:5]), b.decision_function(1000 * X[:5]), rtol=0.5, atol=0.5
    )


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-8])
@pytest.mark.parametrize("d", [2, 30])
@pytest.mark.parametrize("solver", ["output", "objective", "noisy_gd", "auto"])
def test_privacy_spent_stays_within_epsilon(epsilon, delta, d, solver):
    X, y = _data(n=300, d=d, seed=d)
    est = DPLogisticRegression(
        epsilon=epsilon, delta=delta, feature_norm="auto", solver=solver, random_state=0
    ).fit(X, y)
    spent = est.privacy_spent_
    assert spent.epsilon <= epsilon and spent.delta <= delta
    # the model alone was calibrated for the rest: it spends more than 0.85 epsilon
    explicit = DPLogisticRegression(
        epsilon=epsilon, delta=delta, feature_norm=1.0, solver=solver, random_state=0
    ).fit(X, y)
    assert spent.epsilon > 0.9 * explicit.privacy_spent_.epsilon


def test_the_plan_and_a_budget_cover_the_fit():
    X, y = _data()
    est = DPLogisticRegression(epsilon=1.0, feature_norm="auto", random_state=0)
    plan = planned_fit(est)
    assert [r.event for r in plan.releases][0] == auto_bounds.norm_bound_mechanism(
        1.0, SHARES.bounds
    ).dp_event
    budget = PrivacyBudget(epsilon=1.0, delta=1e-5)
    assert budget.planned_epsilon(est) <= 1.0 + 1e-9
    est.set_params(budget=budget).fit(X, y)
    assert budget.spent().epsilon <= 1.0
    too_small = PrivacyBudget(epsilon=0.95, delta=1e-5)
    refused = DPLogisticRegression(feature_norm="auto", budget=too_small)
    with pytest.raises(BudgetExceededError):
        refused.fit(X, y)
    assert not hasattr(refused, "feature_norm_") and too_small.spent().epsilon == 0


def test_published_bound_moves_only_through_noise():
    make = lambda s: DPLogisticRegression(feature_norm="auto", random_state=s)  # noqa: E731
    assert _leads(make, True, seeds=range(6)) == []


def test_the_check_finds_an_exact_quantile(monkeypatch):
    """Negative control: publishing the exact median row norm is caught."""

    def exact(X, mechanism, rng):
        return float(np.median(np.linalg.norm(X, axis=1)))

    monkeypatch.setattr(auto_bounds, "release_norm_bound", exact)
    make = lambda s: DPLogisticRegression(feature_norm="auto", random_state=s)  # noqa: E731
    leads = _leads(make, True, seeds=range(6))
    assert "feature_norm_" in leads


@pytest.mark.parametrize("params", [{"solver": "output"}, {"deletion_epsilon": 0.01}])
def test_deletion_keeps_the_bound_and_says_so(params):
    X, y = _data()
    est = DPLogisticRegression(epsilon=1.0, feature_norm="auto", random_state=0, **params)
    est.fit(X, y)
    bound, first = est.feature_norm_, est.privacy_ledger_[0]
    est.delete_samples([0, 1])
    est.delete_samples([2])
    assert est.feature_norm_ == bound
    assert est.privacy_ledger_[0] == first
    assert sum("quantile of the rows' L2 norms" in r["mechanism"] for r in est.privacy_ledger_) == 1
    for report, k in zip(est.deletion_log_, (2, 3), strict=True):
        note = [n for n in report.notes if "feature_norm_" in n]
        assert len(note) == 1
        assert "not recomputed" in note[0] and "(0.1, 0)-DP" in note[0]
        assert f"within ({k * 0.1:.4g}, 0)" in note[0]
        assert "feature_norm_" in report.guarantee and f"({k * 0.1:.4g}, 0)" in report.guarantee
        # the kept bound adds k eps_b to the model's own deletion guarantee
        assert report.method == "certified"
        assert report.deletion_epsilon >= k * 0.1
    # the re-released model is still in the units of the kept bound
    theta = est.unlearning_state_.chunks[-1].theta.reshape(1, -1)
    np.testing.assert_array_equal(est.coef_, theta[:, :-1] / bound)


def test_explicit_bounds_report_nothing_about_clipping():
    X, y = _data()
    est = DPLogisticRegression(feature_norm=100.0, solver="output", random_state=0).fit(X, y)
    est.delete_samples([0])
    assert not hasattr(est, "feature_norm_")
    assert not any("feature_norm" in n for n in est.deletion_log_[0].notes)
    assert len(est.privacy_ledger_) == 1
    # an explicit refit forgets the bound of an auto fit
    est.set_params(feature_norm="auto").fit(X, y)
    assert hasattr(est, "feature_norm_")
    est.set_params(feature_norm=100.0).fit(X, y)
    assert not hasattr(est, "feature_norm_")


def test_partial_fit_keeps_the_first_bound():
    X, y = _data(n=600)
    est = DPLogisticRegression(feature_norm="auto", random_state=0).fit(X[:300], y[:300])
    bound = est.feature_norm_
    est.partial_fit(100 * X[300:], y[300:])  # a different scale: the bound stays
    assert est.feature_norm_ == bound
    assert len(est.privacy_ledger_) == 3
    assert est.privacy_spent_.epsilon <= 1.0  # parallel composition over chunks
    stream = DPLogisticRegression(feature_norm="auto", random_state=0)
    stream.partial_fit(X[:300], y[:300], classes=[0, 1])
    first = stream.feature_norm_
    assert "quantile of the rows' L2 norms" in stream.privacy_ledger_[0]["mechanism"]
    assert stream.privacy_spent_.epsilon <= 1.0
    stream.partial_fit(X[300:], y[300:])
    assert stream.feature_norm_ == first and len(stream.privacy_ledger_) == 3
    with pytest.raises(ValueError, match="feature_norm"):
        stream.set_params(feature_norm=1.0).partial_fit(X[:10], y[:10])


def _snapshot(est):
    return {
        k: (v.copy() if isinstance(v, np.ndarray) else v)
        for k, v in vars(est).items()
        if k != "unlearning_state_"
    }


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k])
        else:
            assert a[k] == b[k], k


@pytest.mark.parametrize("how", ["fit", "partial_fit"])
@pytest.mark.parametrize("bad", ["nan", "shape", "one_class"])
def test_bad_input_leaves_the_estimator_unchanged(how, bad):
    X, y = _data()
    est = DPLogisticRegression(feature_norm="auto", random_state=0).fit(X, y)
    before, n_rows = _snapshot(est), est.unlearning_state_.registry.n_samples
    Xb, yb = X[:50].copy(), y[:50].copy()
    if bad == "nan":
        Xb[3, 1] = np.nan
    elif bad == "shape" and how == "fit":
        yb = yb[:-1]  # a refit may change n_features, not mismatch X and y
    elif bad == "shape":
        Xb = Xb[:, :2]
    else:
        yb[:] = 0 if how == "fit" else 7
    with pytest.raises(ValueError):
        getattr(est, how)(Xb, yb)
    _same(before, _snapshot(est))
    assert est.unlearning_state_.registry.n_samples == n_rows
    fresh = DPLogisticRegression(feature_norm="auto", random_state=0)
    if how == "fit":
        with pytest.raises(ValueError):
            fresh.fit(Xb, yb)
        assert not hasattr(fresh, "feature_norm_") and not hasattr(fresh, "privacy_ledger_")


def test_objective_with_fixed_c_needs_an_explicit_bound():
    X, y = _data()
    est = DPLogisticRegression(feature_norm="auto", solver="objective", C=1.0)
    with pytest.raises(ValueError, match="explicit feature_norm"):
        est.fit(X, y)
    assert not hasattr(est, "privacy_ledger_")
    DPLogisticRegression(feature_norm="auto", solver="objective", random_state=0).fit(X, y)


def test_a_deletion_target_below_the_kept_bound_is_said_to_be_out_of_reach():
    """deletion_epsilon asks for a certified epsilon per deletion; a kept
    bound alone is k eps_b: the model gets what remains of the target (here
    nothing: a retrain) and the report says the target is out of reach
    (before: silently reported 2x and 6x the target)."""
    X, y = _data()
    est = DPLogisticRegression(
        epsilon=1.0, feature_norm="auto", deletion_epsilon=0.05, random_state=0
    ).fit(X, y)
    est.delete_samples([0])
    report = est.deletion_log_[-1]
    assert report.cost["action"] == "retrain"
    assert report.deletion_epsilon == pytest.approx(0.1)  # the kept bound alone
    assert any("out of reach" in note for note in report.notes)
    roomy = DPLogisticRegression(
        epsilon=1.0, feature_norm="auto", deletion_epsilon=5.0, random_state=0
    ).fit(X, y)
    roomy.delete_samples([0])
    assert roomy.deletion_log_[-1].deletion_epsilon <= 5.0
    assert not any("out of reach" in note for note in roomy.deletion_log_[-1].notes)
