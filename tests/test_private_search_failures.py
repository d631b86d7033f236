"""PrivateGridSearch on data its candidates refuse (every budget is left as it
was), and the random-run methods' charge, made before any noise is drawn (so
that no later error or refused charge shows what the noisy scores decided)."""

import joblib
import numpy as np
import pytest
import sklearn

from sklearn_dpu.exceptions import BudgetExceededError
from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)
from sklearn_dpu.model_selection import PrivateGridSearch, _selection_methods
from sklearn_dpu.model_selection._selection_methods import SelectionFailedError
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.privacy.mechanisms import pure_dp_event

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


def _grid(estimator):
    if isinstance(estimator, DPLinearRegression):
        return {"alpha": [0.0, 1.0]}
    if isinstance(estimator, UnlearnableSGDClassifier):
        return {"alpha": [1e-4, 1e-3]}
    return {"C": [0.1, 1.0]}


def _search(estimator, method, budget, **kwargs):
    return PrivateGridSearch(
        estimator,
        _grid(estimator),
        method=method,
        budget=budget,
        random_state=0,
        **{"threshold": 0.05, **kwargs},
    )


def _row_in(part, estimator, X, y, seed=0):
    """A row the search (random_state=seed) puts in ``part``, read from a
    search fitted on the clean data (the split depends on the public seed
    and the number of rows only)."""
    search = PrivateGridSearch(estimator, _grid(estimator), random_state=seed).fit(X, y)
    validation = sorted(int(i) for i in search._validation_ids)
    train = sorted(set(range(len(y))) - set(validation))
    return (train if part == "train" else validation)[3]


def _bad(kind, part="train"):
    if kind.startswith("classifier"):
        X, y = _classification()
        estimator = DPLogisticRegression(feature_norm=3.0, solver="output")
    elif kind.startswith("sgd"):
        X, y = _classification()
        estimator = UnlearnableSGDClassifier(
            feature_norm=3.0, schedule_size=200, max_iter=4, random_state=0
        )
    else:
        X, y = _regression()
        estimator = DPLinearRegression(feature_norm=1.5, target_bound=1.0)
    row = _row_in(part, estimator, X, y)
    X, y = X.copy(), y.astype(float)
    if kind.endswith("nan X"):
        X[row, 1] = np.nan
    elif kind.endswith("inf X"):
        X[row, 0] = np.inf
    else:
        y[row] = np.nan
    return estimator, X, y


BAD = ["classifier nan X", "classifier inf X", "regressor nan X", "regressor nan y", "sgd nan y"]


@pytest.mark.parametrize("assume_finite", [False, True])
@pytest.mark.parametrize("refit", [False, True])
@pytest.mark.parametrize("kind", BAD[:4])
@pytest.mark.parametrize("method", METHODS)
def test_a_bad_training_row_leaves_the_budget_as_it_was(
    tmp_path, method, kind, refit, assume_finite
):
    """Before: repeat_and_select and threshold charged their plan before the
    candidates read the data, so a NaN cost 2-4.5 epsilon. Under assume_finite
    the candidates' clip still refuses it."""
    estimator, X, y = _bad(kind, "train")
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    search = _search(estimator, method, budget, refit=refit)
    with sklearn.config_context(assume_finite=assume_finite), pytest.raises(ValueError):
        search.fit(X, y)
    assert budget.history() == []
    assert not hasattr(search, "best_estimator_")
    assert not hasattr(search, "privacy_ledger_")


@pytest.mark.parametrize("refit", [False, True])
@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("method", METHODS)
def test_a_bad_validation_row_is_refused_uncharged(tmp_path, method, kind, refit):
    """Found when a fitted candidate is scored (or, for a label, when the
    label set is read). Before: a NaN target there made the random runs'
    scores NaN, so the search went on to a charged SelectionFailedError or
    a model selected on NaN scores; a NaN label became a class of
    UnlearnableSGDClassifier."""
    estimator, X, y = _bad(kind, "validation")
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    search = _search(estimator, method, budget, refit=refit)
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
    row = int(np.flatnonzero(np.isnan(X).any(axis=1) | np.isnan(y))[0])
    fitted = DPLinearRegression(feature_norm=1.5, target_bound=1.0, random_state=0).fit(
        np.nan_to_num(X), np.nan_to_num(y)
    )
    scorer = check_scoring(None, None, estimator)
    with sklearn.config_context(assume_finite=True):
        cost = scorer.cost(fitted, X, y)
    clean = scorer.cost(fitted, np.delete(X, row, axis=0), np.delete(y, row))
    assert cost == pytest.approx(clean + 4.0)  # (h - l)^2 for targets in [-1, 1]


@pytest.mark.parametrize("method", METHODS)
def test_a_refused_refit_leaves_a_fitted_search_as_it_was(tmp_path, method):
    estimator, X_bad, y_bad = _bad("classifier nan X")
    X, y = _classification()
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    search = _search(estimator, method, budget).fit(X, y)
    before = (joblib.hash(search), budget.history())
    with pytest.raises(ValueError, match="NaN"):
        search.fit(X_bad, y_bad)
    assert (joblib.hash(search), budget.history()) == before


class _CountedNoise:
    """Counts the runs' noisy scores (``_noised``)."""

    def __init__(self, monkeypatch):
        self.calls = 0
        noised = _selection_methods._noised

        def counted(*args):
            self.calls += 1
            return noised(*args)

        monkeypatch.setattr(_selection_methods, "_noised", counted)


@pytest.mark.parametrize("refit", [False, True])
def test_once_a_noisy_score_is_drawn_every_outcome_is_charged(tmp_path, monkeypatch, refit):
    """A grid point whose fit always fails (objective perturbation cannot
    reach its privacy at C = 100) is run only when the noisy scores send
    the threshold rule on. Before: its error, raised after noisy scores,
    was charged nothing (whether it came told the scores, for free)."""
    X, y = _classification()
    noise = _CountedNoise(monkeypatch)
    outcomes = set()
    for seed in range(16):
        budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / f"{seed}.sqlite")
        search = PrivateGridSearch(
            DPLogisticRegression(feature_norm=3.0, solver="objective"),
            {"C": [1e-3, 100.0]},
            method="threshold",
            threshold=0.9,
            stop_probability=0.3,
            refit=refit,
            budget=budget,
            random_state=seed,
        )
        noise.calls = 0
        try:
            search.fit(X, y)
            outcome = "fitted"
        except SelectionFailedError:
            outcome = "stopped"
        except ValueError:
            outcome = "error"
        drawn = noise.calls > 0
        outcomes.add((outcome, drawn))
        assert len(budget.history()) == (1 if drawn else 0), (seed, outcome)
    assert ("error", True) in outcomes  # the case before this fix
    assert ("error", False) in outcomes  # the failing point ran first: nothing drawn


@pytest.mark.parametrize("threshold", [0.05, 0.999])
@pytest.mark.parametrize("estimator", ["linear", "logistic"])
def test_a_budget_spent_meanwhile_refuses_before_any_noise(
    tmp_path, monkeypatch, threshold, estimator
):
    """Another process spends the budget while the first run reads the data:
    the search is refused before any noisy score is drawn, whatever the
    selection would have done. Before: a success was refused after the runs
    while a stop was charged, so the error told the outcome."""
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    fit_candidate = _selection_methods.fit_candidate

    def meanwhile(*args):
        if not budget.history():
            PrivacyBudget(50.0, DELTA, path=budget.path).charge([pure_dp_event(49.9)], "elsewhere")
        return fit_candidate(*args)

    monkeypatch.setattr(_selection_methods, "fit_candidate", meanwhile)
    noise = _CountedNoise(monkeypatch)
    if estimator == "linear":
        X, y = _regression()
        model = DPLinearRegression(feature_norm=1.5, target_bound=1.0)
    else:  # refit planned as an upper bound: charged it, before the noise too
        X, y = _classification()
        model = DPLogisticRegression(feature_norm=3.0, solver="output")
    search = _search(model, "threshold", budget, threshold=threshold, refit=True)
    with pytest.raises(BudgetExceededError):
        search.fit(X, y)
    assert noise.calls == 0
    assert [h["description"] for h in budget.history()] == ["elsewhere"]
    assert not hasattr(search, "best_estimator_")


def test_a_refit_planned_as_an_upper_bound_is_charged_it_and_records_the_exact(tmp_path):
    X, y = _classification()
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    model = DPLogisticRegression(feature_norm=3.0, solver="output")
    search = _search(model, "repeat_and_select", budget, refit=True).fit(X, y)
    plan = search._plan_releases(search.get_params(deep=False), _public(X))
    assert not plan.exact  # the case this test is about
    assert budget.spent().epsilon >= search.privacy_spent_.epsilon * (1 - 1e-9)
    assert [e["mechanism"] for e in search.privacy_ledger_] != []


def _public(X):
    from sklearn_dpu.model_selection._search_results import public_sizes

    return public_sizes(X)


def test_bad_data_on_the_random_runs_gives_the_candidates_error(tmp_path):
    """The first run's candidate refuses the data with its own message;
    nothing is charged."""
    estimator, X, y = _bad("regressor nan X")
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    search = _search(estimator, "repeat_and_select", budget, expected_runs=4.0)
    with pytest.raises(ValueError) as caught:
        search.fit(X, y)
    with pytest.raises(ValueError) as direct:
        DPLinearRegression(feature_norm=1.5, target_bound=1.0).fit(X, y)
    assert str(caught.value) == str(direct.value)
    assert budget.history() == []


class _StrictAtC1(DPLogisticRegression):
    """Refuses a NaN at fit when C = 1 (its rows are imputed otherwise), so
    whether the refit fails tells which candidate was selected."""

    def fit(self, X, y, sample_id=None, classes=None):
        X = np.asarray(X, dtype=float)
        if np.isnan(X).any():
            if self.C == 1.0:
                raise ValueError("strict candidate: NaN at fit")
            X = np.nan_to_num(X)
        return super().fit(X, y, sample_id=sample_id, classes=classes)

    def predict(self, X):
        return super().predict(np.nan_to_num(np.asarray(X, dtype=float)))


def test_a_split_select_refit_error_is_charged_for_the_selection(tmp_path):
    """Before: split_select charges after its computation, and a refit error
    (which follows the noisy selection) charged nothing."""
    X_clean, y = _classification()
    strict = _StrictAtC1(feature_norm=3.0, solver="output")
    failures = 0
    for seed in range(8):
        X = X_clean.copy()
        X[_row_in("validation", strict, X_clean, y, seed), 1] = np.nan
        budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / f"{seed}.sqlite")
        search = PrivateGridSearch(
            strict, {"C": [0.1, 1.0]}, refit=True, budget=budget, random_state=seed
        )
        try:
            with sklearn.config_context(assume_finite=True):
                search.fit(X, y)
        except ValueError as error:
            assert "strict candidate" in str(error)
            failures += 1
        assert len(budget.history()) == 1
    assert 0 < failures < 8


def test_a_stopped_selection_says_what_it_spent(tmp_path):
    """A new user could not import the exception nor see the cost: it is
    public, and its message and ``epsilon_spent`` give what the budget was
    charged."""
    from sklearn_dpu import SelectionFailedError as Public

    X, y = _classification()
    budget = PrivacyBudget(epsilon=50.0, delta=DELTA, path=tmp_path / "b.sqlite")
    search = _search(
        DPLogisticRegression(feature_norm=3.0, solver="output"),
        "threshold",
        budget,
        threshold=0.999,
        stop_probability=0.9,
    )
    with pytest.raises(Public, match=r"spent epsilon = [0-9.]+") as caught:
        search.fit(X, y)
    assert caught.value.epsilon_spent == pytest.approx(budget.spent().epsilon)
    assert "stop_probability lets more runs try" in str(caught.value)
