"""PrivateGridSearch on data its candidates refuse (every budget is left as it
was), and a selection that stops by design (charged, never refused)."""

import numpy as np
import pytest
import sklearn

from sklearn_dpu.base import PublicSizes
from sklearn_dpu.exceptions import PrivacyLeakWarning
from sklearn_dpu.linear_model import DPLinearRegression, DPLogisticRegression
from sklearn_dpu.model_selection import PrivateGridSearch
from sklearn_dpu.model_selection._selection_methods import SelectionFailedError
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.privacy.accounting import epsilon_spent
from sklearn_dpu.privacy.events import event_from_dict

DELTA = 1e-5
METHODS = ["split_select", "repeat_and_select", "threshold"]


def _classification(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] > 0).astype(int)


def _regression(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, np.clip(X @ [1.0, -1.0], -1.0, 1.0)


def _search(estimator, method, budget, **kwargs):
    grid = {"C": [0.1, 1.0]} if isinstance(estimator, DPLogisticRegression) else {"alpha": [0, 1]}
    return PrivateGridSearch(
        estimator,
        grid,
        method=method,
        budget=budget,
        random_state=0,
        **{"threshold": 0.05, **kwargs},
    )


def _row_in(part, n, validation_fraction=0.2):
    """A row the search (random_state=0) puts in ``part``."""
    from sklearn_dpu.model_selection._search_results import split_rows
    from sklearn_dpu.privacy.random import release_generator
    from sklearn_dpu.unlearning.ids import requested_ids

    rows = np.arange(n)
    split = split_rows(
        rows[:, None], rows, requested_ids(rows, None), release_generator(0, 0), validation_fraction
    )
    return int((split.train_ids if part == "train" else split.validation_ids)[3])


def _bad(kind, part="train"):
    if kind.startswith("classifier"):
        X, y = _classification()
        estimator = DPLogisticRegression(feature_norm=3.0, solver="output")
    else:
        X, y = _regression()
        estimator = DPLinearRegression(feature_norm=1.5, target_bound=1.0)
    X, y, row = X.copy(), y.astype(float), _row_in(part, len(y))
    if kind.endswith("nan X"):
        X[row, 1] = np.nan
    elif kind.endswith("inf X"):
        X[row, 0] = np.inf
    else:
        y[row] = np.nan
    return estimator, X, y


BAD = ["classifier nan X", "classifier inf X", "regressor nan X", "regressor nan y"]


@pytest.mark.parametrize("assume_finite", [False, True])
@pytest.mark.parametrize("refit", [False, True])
@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("method", METHODS)
def test_data_the_candidates_refuse_leave_the_budget_as_it_was(
    tmp_path, method, kind, refit, assume_finite
):
    """A bad training row. Before: repeat_and_select and threshold charged
    their plan before the candidates read the data, so a NaN cost 2-4.5
    epsilon. Under assume_finite the candidates' clip still refuses it."""
    estimator, X, y = _bad(kind, "train")
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    search = _search(estimator, method, budget, refit=refit)
    with sklearn.config_context(assume_finite=assume_finite), pytest.raises(ValueError):
        search.fit(X, y)
    assert budget.history() == []
    assert not hasattr(search, "best_estimator_")
    assert not hasattr(search, "privacy_ledger_")


@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("method", METHODS)
def test_a_bad_validation_row_is_refused_uncharged(tmp_path, method, kind):
    """A bad row in the validation part is found when a fitted candidate is
    scored. Before: a NaN target there made every random run's score NaN, so
    the search went on to a charged SelectionFailedError (threshold) or
    published a model selected on NaN scores (repeat_and_select)."""
    estimator, X, y = _bad(kind, "validation")
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    search = _search(estimator, method, budget)
    with pytest.raises(ValueError, match="Input (X|y) contains (NaN|infinity)"):
        search.fit(X, y)
    assert budget.history() == []
    assert not hasattr(search, "best_estimator_")


@pytest.mark.parametrize("kind", ["regressor nan X", "regressor nan y"])
def test_under_assume_finite_a_bad_validation_row_costs_the_most(kind):
    """Promised finite (assume_finite), a NaN in the validation part is not
    looked for, as in scikit-learn; its row then costs the public maximum,
    so every candidate's summed cost stays within the selection's bound."""
    from sklearn_dpu.model_selection._scoring import check_scoring

    estimator, X, y = _bad(kind, "validation")
    fitted = DPLinearRegression(feature_norm=1.5, target_bound=1.0, random_state=0).fit(
        np.nan_to_num(X), np.nan_to_num(y)
    )
    scorer = check_scoring(None, None, estimator)
    with sklearn.config_context(assume_finite=True):
        cost = scorer.cost(fitted, X, y)
    row = _row_in("validation", len(y))
    clean = scorer.cost(fitted, np.delete(X, row, axis=0), np.delete(y, row))
    assert cost == pytest.approx(clean + 4.0)  # (h - l)^2 for targets in [-1, 1]


@pytest.mark.parametrize("method", METHODS)
def test_a_refused_refit_leaves_a_fitted_search_as_it_was(tmp_path, method):
    estimator, X_bad, y_bad = _bad("classifier nan X")
    X, y = _classification()
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    search = _search(estimator, method, budget).fit(X, y)
    before = (dict(search.__dict__), budget.history())
    with pytest.raises(ValueError, match="NaN"):
        search.fit(X_bad, y_bad)
    assert search.__dict__ == before[0]
    assert budget.history() == before[1]


def test_a_stopped_selection_is_charged_past_the_cap(tmp_path, monkeypatch):
    """Another process spends the budget while the runs read the data, and
    the threshold rule then stops without a winner: the outcome is charged
    anyway, past the cap, with a warning (before: the charge could be
    refused, and the stopped search then cost nothing)."""
    from sklearn_dpu.model_selection import _selection_methods
    from sklearn_dpu.privacy.mechanisms import pure_dp_event

    X, y = _classification()
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    fit_candidate = _selection_methods.fit_candidate

    def meanwhile(*args):
        if not budget.history():
            PrivacyBudget(50.0, DELTA, path=budget.path).charge([pure_dp_event(49.9)], "elsewhere")
        return fit_candidate(*args)

    monkeypatch.setattr(_selection_methods, "fit_candidate", meanwhile)
    search = _search(
        DPLogisticRegression(feature_norm=3.0, solver="output"),
        "threshold",
        budget,
        threshold=0.99,
        stop_probability=0.9,
    )
    with pytest.warns(PrivacyLeakWarning, match="past its cap"):
        with pytest.raises(SelectionFailedError):
            search.fit(X, y)
    descriptions = [h["description"] for h in budget.history()]
    assert descriptions == ["elsewhere", "PrivateGridSearch.fit (failed) [over cap]"]
    (charge,) = budget.history()[1:]
    selection = search._plan_releases(search.get_params(deep=False), PublicSizes()).releases
    events = [event_from_dict(e) for e in charge["events"]]
    assert epsilon_spent(events, DELTA) == pytest.approx(epsilon_spent([selection[0].event], DELTA))


def test_bad_data_on_the_random_runs_reads_no_more_than_a_fit(tmp_path):
    """Every run refuses the data: the first error is raised, from a
    candidate's own validation, and nothing is charged."""
    estimator, X, y = _bad("regressor nan X")
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    search = _search(estimator, "repeat_and_select", budget, expected_runs=4.0)
    with pytest.raises(ValueError) as caught:
        search.fit(X, y)
    with pytest.raises(ValueError) as direct:
        DPLinearRegression(feature_norm=1.5, target_bound=1.0).fit(X, y)
    assert str(caught.value) == str(direct.value)
    assert budget.history() == []
