"""A PrivacyBudget is charged by every fit that scikit-learn's tools make."""

import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline

from sklearn_dpu import BudgetExceededError, PrivacyBudget, PrivacyLeakWarning
from sklearn_dpu.linear_model import DPLinearRegression
from sklearn_dpu.preprocessing import PublicBoundsScaler
from sklearn_dpu.privacy.accounting import epsilon_spent
from sklearn_dpu.privacy.calibration import gaussian_noise_multiplier
from sklearn_dpu.privacy.mechanisms import GaussianMechanism

from ._doubles import Untouchable


def _data(n=90):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n, 3))
    return X, X @ [0.5, -0.2, 0.1]


def _one_fit_event(epsilon=1.0):
    return GaussianMechanism(3.0, gaussian_noise_multiplier(epsilon, 1e-5)).dp_event


def test_grid_search_with_two_workers_charges_every_fit(budget_path):
    X, y = _data()
    budget = PrivacyBudget(epsilon=50.0, delta=1e-5, path=budget_path)
    search = GridSearchCV(
        DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget, random_state=0),
        {"alpha": [0.0, 1.0]},
        cv=3,
        n_jobs=2,
    ).fit(X, y)
    assert search.best_estimator_.budget.path == budget.path
    history = budget.history()
    assert len(history) == 2 * 3 + 1  # every candidate and fold, and the refit
    expected = epsilon_spent([_one_fit_event()] * 7, 1e-5)
    assert budget.spent().epsilon == pytest.approx(expected)


def test_cross_val_score_in_a_pipeline_charges_every_fold(budget_path):
    X, y = _data()
    budget = PrivacyBudget(epsilon=50.0, delta=1e-5, path=budget_path)
    pipe = make_pipeline(
        PublicBoundsScaler(), DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget)
    )
    cross_val_score(pipe, X, y, cv=5, n_jobs=2)
    assert len(budget.history()) == 5


def test_clones_and_pickles_share_the_ledger(budget_path):
    X, y = _data()
    budget = PrivacyBudget(epsilon=50.0, delta=1e-5, path=budget_path)
    reg = DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget)
    clone(reg).fit(X, y)
    pickle.loads(pickle.dumps(reg)).fit(X, y)
    assert len(budget.history()) == 2


def test_exceeding_the_cap_raises_before_reading_data(budget_path):
    X, y = _data()
    # two releases at eps = 1 compose to eps = 1.47 (not 2): the cap must be below that
    budget = PrivacyBudget(epsilon=1.2, delta=1e-5, path=budget_path)
    reg = DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget, random_state=0).fit(
        X, y
    )
    with pytest.raises(BudgetExceededError, match="above its cap"):
        clone(reg).fit(Untouchable(), Untouchable())
    with pytest.raises(BudgetExceededError):
        reg.partial_fit(Untouchable(), Untouchable())
    assert len(budget.history()) == 1


def test_partial_fit_charges_only_when_the_worst_case_grows(budget_path):
    X, y = _data(80)
    budget = PrivacyBudget(epsilon=50.0, delta=1e-5, path=budget_path)
    reg = DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget, random_state=0)
    for t in range(8):
        reg.partial_fit(X[10 * t : 10 * (t + 1)], y[10 * t : 10 * (t + 1)])
    # tree aggregation: the most exposed chunk is in log2(8) + 1 = 4 nodes
    assert budget.spent().epsilon == pytest.approx(reg.privacy_spent_.epsilon)
    assert budget.spent().epsilon == pytest.approx(epsilon_spent([_one_fit_event()] * 4, 1e-5))


def test_a_deletion_is_never_refused_and_its_cost_is_recorded(budget_path):
    X, y = _data()
    budget = PrivacyBudget(epsilon=1.0, delta=1e-5, path=budget_path)
    reg = DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget, random_state=0).fit(
        X, y
    )
    with pytest.warns(PrivacyLeakWarning, match="deletions are never refused"):
        reg.delete_samples([0])
    assert budget.spent().epsilon > budget.epsilon
    assert "over cap" in budget.history()[-1]["description"]
    with pytest.raises(BudgetExceededError):
        clone(reg).fit(X, y)


def test_the_ledger_survives_a_process_restart(budget_path, tmp_path):
    script = textwrap.dedent(
        f"""
        import numpy as np
        from sklearn_dpu import DPLinearRegression, PrivacyBudget
        budget = PrivacyBudget(epsilon=1.6, delta=1e-5, path={str(budget_path)!r})
        X = np.random.default_rng(0).uniform(-1, 1, (50, 2))
        DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget).fit(X, X[:, 0])
        DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget).fit(X, X[:, 1])
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    budget = PrivacyBudget(epsilon=1.6, delta=1e-5, path=budget_path)
    assert len(budget.history()) == 2
    X, y = _data()
    with pytest.raises(BudgetExceededError):
        DPLinearRegression(feature_norm=1.0, target_bound=1.0, budget=budget).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert budget.spent().epsilon == pytest.approx(epsilon_spent([_one_fit_event()] * 2, 1e-5))
