"""PrivateGridSearch: the whole search is planned, capped and charged once; deletions
through it keep its ledger, its budgets and its reports up to date."""

import warnings

import numpy as np
import pytest

from sklearn_dpu import BudgetExceededError, PrivacyBudget, UnlearningError
from sklearn_dpu.base import PrivateEstimatorMixin
from sklearn_dpu.exceptions import PrivacyLeakWarning
from sklearn_dpu.linear_model import DPLinearRegression, DPLogisticRegression
from sklearn_dpu.model_selection import PrivateGridSearch
from sklearn_dpu.privacy.accounting import epsilon_spent, group_events
from sklearn_dpu.privacy.ledger import ApproximateDPBound, ReleasePlan, event_from_dict

from ._doubles import Untouchable


def _classification(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 3))
    return X, (X[:, 0] + 0.2 * rng.normal(size=n) > 0).astype(int)


def _regression(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, np.clip(X @ [0.5, -0.5], -1, 1)


_TEN_C = {"C": list(np.logspace(-2, 2, 10))}


def test_search_budget_is_charged_the_whole_search_once(budget_path):
    # Before: only the selection (epsilon 1.0) was charged, while the ten
    # candidates made privacy_spent_ = 3.62.
    budget = PrivacyBudget(epsilon=5.0, delta=1e-5, path=budget_path)
    base = DPLogisticRegression(epsilon=1.0, random_state=0)
    X, y = _classification()
    search = PrivateGridSearch(base, _TEN_C, budget=budget, random_state=0).fit(X, y)
    assert search.privacy_spent_.epsilon > 3.0
    assert budget.spent().epsilon == pytest.approx(search.privacy_spent_.epsilon)
    assert len(budget.history()) == 1


@pytest.mark.parametrize("where", ["search", "estimator", "both"])
def test_a_cap_refuses_the_whole_search_before_reading_data(budget_path, where):
    # Before: with the budget on the estimator only, candidates read the data
    # and charged one by one until the fourth was refused mid-search.
    budget = PrivacyBudget(epsilon=2.0, delta=1e-5, path=budget_path)
    base = DPLogisticRegression(epsilon=1.0, budget=budget if where != "search" else None)
    search = PrivateGridSearch(base, _TEN_C, budget=budget if where != "estimator" else None)
    with pytest.raises(BudgetExceededError, match="10 candidates"):
        search.fit(Untouchable(), Untouchable())
    assert budget.history() == []
    assert not hasattr(search, "privacy_ledger_")


def test_an_estimator_budget_is_charged_the_selection(budget_path):
    # Before: the selection was charged only to the search's own budget.
    budget = PrivacyBudget(epsilon=10.0, delta=1e-5, path=budget_path)
    base = DPLogisticRegression(epsilon=0.5, budget=budget, random_state=0)
    X, y = _classification()
    search = PrivateGridSearch(base, {"C": [0.1, 10.0]}, selection_epsilon=6.0, random_state=0)
    search.fit(X, y)
    assert search.privacy_spent_.epsilon > 5.0  # the selection is the worst part
    assert budget.spent().epsilon == pytest.approx(search.privacy_spent_.epsilon)
    assert [h["description"] for h in budget.history()] == ["PrivateGridSearch.fit"]
    # the selected model charges the estimator's budget for what it does alone
    assert search.best_estimator_.budget is budget


def test_two_handles_on_one_ledger_are_one_budget(budget_path):
    base = DPLinearRegression(
        target_bound=1.0, epsilon=1.0, budget=PrivacyBudget(5.0, 1e-5, path=budget_path)
    )
    search = PrivateGridSearch(
        base, {"alpha": [0.0, 1.0]}, budget=PrivacyBudget(5.0, 1e-5, path=budget_path)
    )
    search.fit(*_regression())
    history = search.budget.history()
    assert len(history) == 1
    assert search.budget.spent().epsilon == pytest.approx(search.privacy_spent_.epsilon)


class _BoundedPlan(DPLogisticRegression):
    """A classifier whose plan is known only as (epsilon, delta)-DP (its own fit
    reads the plan only to charge a budget, and candidates have none)."""

    def _plan_releases(self, params, sizes):
        bound = ApproximateDPBound(params["epsilon"], params["delta"] / 100, "a calibrated run")
        return ReleasePlan((), (bound,), restart=True)


class _Unplanned(DPLogisticRegression):
    def _plan_releases(self, params, sizes):
        return PrivateEstimatorMixin._plan_releases(self, params, sizes)


def test_approximate_bounds_are_planned_by_basic_composition(budget_path):
    budget = PrivacyBudget(epsilon=2.5, delta=1e-5, path=budget_path)
    base = _BoundedPlan(epsilon=1.0)
    grid = {"C": [0.1, 1.0, 10.0]}  # the bounds sum to 3 > 2.5
    with pytest.raises(BudgetExceededError):
        PrivateGridSearch(base, grid, budget=budget).fit(Untouchable(), Untouchable())
    assert budget.history() == []
    budget = PrivacyBudget(epsilon=3.5, delta=1e-5, path=budget_path.with_suffix(".b"))
    search = PrivateGridSearch(base, grid, budget=budget, random_state=0).fit(*_classification())
    # the charge holds the exact events, tighter than the bounds
    assert budget.spent().epsilon == pytest.approx(search.privacy_spent_.epsilon)
    assert budget.spent().epsilon < 3.0


def test_an_unplannable_estimator_cannot_run_with_a_budget(budget_path):
    budget = PrivacyBudget(epsilon=5.0, delta=1e-5, path=budget_path)
    search = PrivateGridSearch(_Unplanned(), {"C": [1.0]}, budget=budget)
    with pytest.raises(TypeError, match="cannot plan"):
        search.fit(Untouchable(), Untouchable())
    assert budget.history() == []


def _group_epsilon(ledger, group, delta):
    """Group privacy (Dwork & Roth Thm 2.2) over every release of ``ledger``, composed."""
    return epsilon_spent([group_events(event_from_dict(e["event"]), group) for e in ledger], delta)


def test_deletions_accumulate_in_the_ledger_budget_and_reports(budget_path):
    budget = PrivacyBudget(epsilon=50.0, delta=1e-5, path=budget_path)
    base = DPLinearRegression(feature_norm=1.5, target_bound=1.0, epsilon=1.0)
    search = PrivateGridSearch(base, {"alpha": [0.0, 1.0]}, budget=budget, random_state=0)
    search.fit(*_regression())
    fit_ledger = list(search.privacy_ledger_)
    spent = [search.privacy_spent_.epsilon]
    reported = []
    for sample in range(20):
        search.delete_samples([sample])
        report = search.deletion_log_[-1]
        reported.append(report.deletion_epsilon)
        spent.append(search.privacy_spent_.epsilon)
        assert report.remaining_epsilon == search.privacy_spent_.epsilon
        assert budget.spent().epsilon >= search.privacy_spent_.epsilon - 1e-9
    assert search.n_deleted_ == 20
    # each deletion through the training part re-releases the model: the
    # search's ledger and privacy_spent_ grow with it
    rereleases = sum(r.rerelease_epsilon is not None for r in search.deletion_log_)
    assert rereleases > 0
    assert len(search.privacy_ledger_) == len(fit_ledger) + rereleases
    assert spent[-1] > spent[0]
    # the selection retains the cumulative group, not the last call's
    assert np.all(np.diff(reported) > 0)
    # an upper bound on the exact composition of the group's events, close to it
    for group in (1, 20):
        exact = _group_epsilon(fit_ledger, group, 1e-5)
        assert exact <= reported[group - 1] <= 1.02 * exact
    assert reported[-1] > 10 * reported[0]
    assert "20 samples deleted so far" in search.deletion_log_[-1].guarantee


def test_a_deletion_past_the_cap_is_charged_with_a_warning(budget_path):
    base = DPLinearRegression(feature_norm=1.5, target_bound=1.0, epsilon=1.0)
    probe = PrivateGridSearch(base, {"alpha": [0.0]}, random_state=0).fit(*_regression())
    cap = probe.privacy_spent_.epsilon + 1e-6
    budget = PrivacyBudget(epsilon=cap, delta=1e-5, path=budget_path)
    search = PrivateGridSearch(base, {"alpha": [0.0]}, budget=budget, random_state=0)
    search.fit(*_regression())
    train_id = search.best_estimator_.unlearning_state_.registry.live()[1][0]
    with pytest.warns(PrivacyLeakWarning, match="never refused"):
        search.delete_samples([train_id])
    assert "[over cap]" in budget.history()[-1]["description"]
    assert budget.spent().epsilon == pytest.approx(search.privacy_spent_.epsilon)


def test_a_bare_string_is_one_id():
    X, y = _regression(200)
    ids = [str(i) for i in range(200)]
    search = PrivateGridSearch(
        DPLinearRegression(target_bound=1.0), {"alpha": [0.0]}, random_state=0
    ).fit(X, y, sample_id=ids)
    train = set(search.best_estimator_.unlearning_state_.registry.live()[1].tolist())
    target = next(i for i in ids if len(i) == 2 and i[0] != i[1] and i in train)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        search.delete_samples(target)
    assert search.n_deleted_ == 1
    assert search.best_estimator_.deletion_log_[-1].n_deleted == 1
    with pytest.raises(UnlearningError):
        search.delete_samples([target])  # it was deleted, not its characters
    search.delete_samples([target[0], target[1]])  # these are still there
    assert search.n_deleted_ == 3
