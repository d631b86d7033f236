"""Searches and Dask fits on a real ``LocalCluster`` of worker processes.

A :class:`~sklearn_dpu.privacy.PrivacyBudget` pickles as a handle on its
ledger file (path, cap, where the key is), so a copy sent to a worker
process charges the same SQLite ledger as the parent, under the same lock
and cap check; a worker that cannot open the file (another host, no shared
filesystem) gets ``LedgerUnavailableError`` and never starts a fresh ledger.
These tests check both with worker processes, against the sequential run.
"""

import joblib
import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, cross_validate

from sklearn_dpu.exceptions import BudgetExceededError, LedgerUnavailableError
from sklearn_dpu.linear_model import DPLogisticRegression
from sklearn_dpu.model_selection import PrivateGridSearch
from sklearn_dpu.privacy import PrivacyBudget

distributed = pytest.importorskip("dask.distributed")
da = pytest.importorskip("dask.array")


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 3))
    return X, (X @ [1.0, -1.0, 0.5] > 0).astype(int)


def _charges(budget):
    return sorted((c.description, repr(c.events)) for c in budget.charges())


def _searches(budget):
    X, y = _data()
    clf = DPLogisticRegression(feature_norm=3.0, solver="output", budget=budget, random_state=0)
    cv = cross_validate(clf, X, y, cv=2, n_jobs=2)
    grid = GridSearchCV(clf, {"epsilon": [0.5, 1.0]}, cv=2, n_jobs=2).fit(X, y)
    return cv["test_score"], grid.best_params_


def test_shared_budget_is_charged_from_worker_processes(client, tmp_path):
    local = PrivacyBudget(50.0, 1e-3, tmp_path / "local.sqlite")
    expected = _searches(local)
    shared = PrivacyBudget(50.0, 1e-3, tmp_path / "shared.sqlite")
    with joblib.parallel_backend("dask"):
        got = _searches(shared)
    # Every fit that ran in a worker process is in the parent's ledger, once.
    assert len(shared.charges()) == len(local.charges()) == 2 + 2 * 2 + 1
    assert _charges(shared) == _charges(local)
    assert shared.spent() == local.spent()
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]


def test_cap_holds_across_worker_processes(client, tmp_path):
    X, y = _data()
    budget = PrivacyBudget(1.05, 1e-3, tmp_path / "cap.sqlite")  # two of the four fits
    clf = DPLogisticRegression(feature_norm=3.0, solver="output", budget=budget)
    with joblib.parallel_backend("dask"), pytest.raises(BudgetExceededError):
        cross_validate(clf, X, y, cv=4, n_jobs=2, error_score="raise")
    assert budget.spent().epsilon <= 1.05 + 1e-9
    assert 1 <= len(budget.charges()) < 4


def test_a_worker_without_the_ledger_file_refuses_to_charge(client, tmp_path):
    budget = PrivacyBudget(5.0, 1e-3, tmp_path / "moved.sqlite")
    clf = DPLogisticRegression(feature_norm=3.0, budget=budget)
    (tmp_path / "moved.sqlite").rename(tmp_path / "elsewhere.sqlite")  # as on another host
    X, y = _data()
    future = client.submit(clf.fit, X, y)
    with pytest.raises(LedgerUnavailableError, match="does not exist"):
        future.result()
    assert not (tmp_path / "moved.sqlite").exists()


def test_private_grid_search_on_the_dask_backend(client, tmp_path):
    X, y = _data()
    budgets = [PrivacyBudget(50.0, 1e-3, tmp_path / f"{k}.sqlite") for k in "ab"]
    searches = [
        PrivateGridSearch(
            DPLogisticRegression(feature_norm=3.0, solver="output"),
            {"C": [0.1, 10.0]},
            n_jobs=2,
            random_state=0,
            budget=budget,
        )
        for budget in budgets
    ]
    searches[0].fit(X, y)
    with joblib.parallel_backend("dask"):
        searches[1].fit(X, y)
    assert searches[1].best_params_ == searches[0].best_params_
    assert searches[1].privacy_ledger_ == searches[0].privacy_ledger_
    assert _charges(budgets[1]) == _charges(budgets[0])
    np.testing.assert_array_equal(
        searches[1].best_estimator_.coef_, searches[0].best_estimator_.coef_
    )


def test_dask_fit_sums_on_worker_processes(client):
    X, y = _data()
    kw = dict(feature_norm=3.0, solver="noisy_gd", random_state=0)
    local = DPLogisticRegression(**kw).fit(X, y)
    dist = DPLogisticRegression(**kw).fit(da.from_array(X, chunks=400), da.from_array(y, 400))
    assert dist.privacy_ledger_ == local.privacy_ledger_
    np.testing.assert_allclose(dist.coef_, local.coef_, rtol=1e-9, atol=1e-12)
