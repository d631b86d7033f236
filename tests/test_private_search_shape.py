"""PrivateGridSearch in the shape of GridSearchCV: scoring, refit,
param_distributions, n_jobs, and a cv_results_ that publishes only what is safe."""

import pickle

import numpy as np
import pytest
from scipy.stats import loguniform
from sklearn.metrics import make_scorer, mean_squared_error
from sklearn.model_selection import cross_validate
from sklearn.pipeline import make_pipeline

from sklearn_dpu import BudgetExceededError, PrivacyBudget
from sklearn_dpu import io as dpu_io
from sklearn_dpu.base import PublicSizes
from sklearn_dpu.exceptions import PersistenceError
from sklearn_dpu.linear_model import DPLinearRegression, DPLogisticRegression
from sklearn_dpu.model_selection import PrivateGridSearch
from sklearn_dpu.model_selection._private_search import _candidates, _selection
from sklearn_dpu.model_selection._search_results import cv_results
from sklearn_dpu.preprocessing import PublicBoundsScaler
from sklearn_dpu.privacy.ledger import privacy_spent

from ._doubles import Untouchable


def _regression(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, np.clip(X @ [0.5, -0.5] + 0.05 * rng.normal(size=n), -1, 1)


def _classification(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, (X @ [1.0, -1.0] + 0.1 * rng.normal(size=n) > 0).astype(int)


def _linear(**kwargs):
    base = DPLinearRegression(feature_norm=1.5, target_bound=1.0, epsilon=2.0)
    return PrivateGridSearch(base, {"alpha": [0.0, 1e5, 1e6]}, **kwargs)


def _logistic(**kwargs):
    base = DPLogisticRegression(feature_norm=1.5, epsilon=2.0)
    return PrivateGridSearch(base, {"C": [1e-4, 1.0]}, **kwargs)


def _abs_error(y_true, y_pred):
    return -np.abs(np.clip(y_pred, -1, 1) - y_true)


# ---------------------------------------------------------------- scoring


@pytest.mark.parametrize(
    ("make", "data", "scoring"),
    [
        (_logistic, _classification, "accuracy"),
        (_linear, _regression, "neg_mean_squared_error"),
        (_linear, _regression, "r2"),
    ],
)
def test_named_scorings_are_the_default_selection(make, data, scoring):
    # accuracy sums 1 - zero-one loss, neg MSE and r2 rank like the squared
    # error: the same utilities up to a shift, the same draws for one seed.
    X, y = data()
    for seed in range(3):
        default = make(random_state=seed).fit(X, y)
        named = make(random_state=seed, scoring=scoring).fit(X, y)
        assert named.best_index_ == default.best_index_
        assert named.privacy_ledger_ == default.privacy_ledger_


def test_sensitivity_is_the_width_of_the_public_score_bounds():
    params = _linear(scoring=_abs_error, score_bounds=(-2.0, 0.5)).get_params(deep=False)
    assert _selection(params, [params["estimator"]]).sensitivity == 2.5
    params = _linear(scoring="neg_mean_absolute_error").get_params(deep=False)
    assert _selection(params, [params["estimator"]]).sensitivity == 2.0  # target range [-1, 1]
    params = _linear().get_params(deep=False)
    assert _selection(params, [params["estimator"]]).sensitivity == 4.0  # squared width


@pytest.mark.parametrize("scoring", ["neg_mean_absolute_error", _abs_error])
def test_bounded_scorings_select_the_good_candidate(scoring):
    X, y = _regression()
    bounds = None if isinstance(scoring, str) else (-2.0, 0.0)
    picks = [
        _linear(scoring=scoring, score_bounds=bounds, random_state=s).fit(X, y).best_index_
        for s in range(5)
    ]
    assert picks.count(0) >= 4


@pytest.mark.parametrize(
    ("scoring", "score_bounds", "match"),
    [
        ("neg_log_loss", None, "no public bound"),
        ("roc_auc", None, "no public bound"),
        (make_scorer(mean_squared_error), None, "scorer object"),
        (_abs_error, None, "needs score_bounds"),
        (_abs_error, (0.0, np.inf), "finite"),
        ("r2", (0.0, 1.0), "score_bounds bounds a callable"),
        ("accuracy", None, "does not apply"),
    ],
)
def test_unbounded_scorings_are_refused_before_reading_data(scoring, score_bounds, match):
    search = _linear(scoring=scoring, score_bounds=score_bounds)
    with pytest.raises(ValueError, match=match):
        search.fit(Untouchable(), Untouchable())
    assert not hasattr(search, "best_estimator_")


def test_a_callable_returning_a_mean_is_refused():
    X, y = _regression(200)
    search = _linear(scoring=lambda t, p: np.mean(p - t), score_bounds=(-2, 2), random_state=0)
    with pytest.raises(ValueError, match="one score per validation row"):
        search.fit(X, y)
    assert not hasattr(search, "best_estimator_")


# ---------------------------------------------------------------- refit


def test_refit_false_keeps_the_candidate_fitted_on_the_training_part():
    X, y = _regression()
    search = _linear(random_state=0).fit(X, y)
    n_train = len(search.best_estimator_.unlearning_state_.registry.live()[1])
    assert n_train == len(y) - len(search._validation_ids)
    assert all(entry["chunks"] in ([1, 1], [2, 2]) for entry in search.privacy_ledger_)


def test_refit_fits_the_choice_on_all_rows_and_charges_it(budget_path):
    X, y = _regression()
    budget = PrivacyBudget(epsilon=50.0, delta=1e-5, path=budget_path)
    plain = _linear(random_state=0).fit(X, y)
    search = _linear(random_state=0, refit=True, budget=budget)
    planned = budget.planned_epsilon(search)
    search.fit(X, y)
    assert search.best_index_ == plain.best_index_  # the same selection
    assert len(search.best_estimator_.unlearning_state_.registry.live()[1]) == len(y)
    assert search.privacy_ledger_[:-1] == plain.privacy_ledger_
    assert search.privacy_ledger_[-1]["chunks"] == [1, 2]  # both parts
    assert search.privacy_spent_.epsilon > plain.privacy_spent_.epsilon
    assert budget.spent().epsilon == pytest.approx(search.privacy_spent_.epsilon)
    assert planned == pytest.approx(search.privacy_spent_.epsilon)
    # every row now deletes through the refit model
    n_before = len(search.privacy_ledger_)
    search.delete_samples([0])
    assert search.best_estimator_.deletion_log_[-1].n_deleted == 1
    # its re-releases use rows of both parts: recorded on both
    rereleased = search.privacy_ledger_[n_before:]
    assert rereleased and all(entry["chunks"] == [1, 2] for entry in rereleased)


def test_refit_is_refused_before_reading_data_when_the_budget_cannot_afford_it(budget_path):
    X, y = _regression(300)
    cost = _linear(random_state=0).fit(X, y).privacy_spent_.epsilon
    budget = PrivacyBudget(epsilon=cost * 1.05, delta=1e-5, path=budget_path)
    assert budget.can_afford(_linear(budget=budget))
    search = _linear(budget=budget, refit=True)
    with pytest.raises(BudgetExceededError, match="refit"):
        search.fit(Untouchable(), Untouchable())
    assert budget.history() == []


def test_refit_plans_every_candidate_the_selection_may_pick(budget_path):
    # The choice is unknown before the data: the refit of the most expensive
    # candidate is planned, and a budget between the two is refused.
    base = DPLinearRegression(feature_norm=1.5, target_bound=1.0)
    search = PrivateGridSearch(base, {"epsilon": [0.5, 4.0]}, selection_epsilon=0.1, refit=True)
    params = search.get_params(deep=False)
    plans = search._search_plans(params, _candidates(params, [None, None]), PublicSizes())
    spent = sorted(privacy_spent([r.to_dict() for r in p.releases], 1e-5).epsilon for p in plans)
    assert len(plans) == 2 and spent[0] < spent[1]
    budget = PrivacyBudget(epsilon=100.0, delta=1e-5, path=budget_path)
    assert budget.planned_epsilon(search) == pytest.approx(spent[1])
    tight = PrivacyBudget((spent[0] + spent[1]) / 2, 1e-5, path=budget_path.with_name("tight"))
    with pytest.raises(BudgetExceededError, match="refit"):
        search.set_params(budget=tight).fit(Untouchable(), Untouchable())


# ---------------------------------------------------------------- param_distributions


def test_param_distributions_are_sampled_with_the_public_random_state():
    dists = {"alpha": loguniform(1e-3, 1e3), "fit_intercept": [True, False]}
    base = DPLinearRegression(feature_norm=1.5, target_bound=1.0)
    search = PrivateGridSearch(base, param_distributions=dists, n_iter=4, random_state=3)
    first = search.fit(*_regression(seed=0)).cv_results_["params"]
    second = search.fit(*_regression(n=700, seed=1)).cv_results_["params"]
    assert len(first) == 4 and search.n_candidates_ == 4
    assert first == second  # which candidates run depends on no data
    assert search.best_params_ in first
    assert search.cv_results_["param_alpha"].dtype == object


def test_param_grid_xor_param_distributions():
    base = DPLinearRegression(feature_norm=1.5, target_bound=1.0)
    X, y = _regression(100)
    with pytest.raises(ValueError, match="param_grid or param_distributions"):
        PrivateGridSearch(base).fit(X, y)
    with pytest.raises(ValueError, match="not both"):
        PrivateGridSearch(base, {"alpha": [1.0]}, param_distributions={"alpha": [2.0]}).fit(X, y)


# ---------------------------------------------------------------- cv_results_


def test_cv_results_publish_only_public_values():
    X, y = _regression()
    search = PrivateGridSearch(
        DPLinearRegression(feature_norm=1.5, target_bound=1.0),
        [{"alpha": [0.0, 1.0]}, {"fit_intercept": [False]}],
        random_state=0,
    ).fit(X, y)
    results = search.cv_results_
    assert set(results) == {"params", "param_alpha", "param_fit_intercept", "epsilon_spent"}
    assert not any("score" in key or "time" in key or "rank" in key for key in results)
    assert results["param_alpha"].mask.tolist() == [False, False, True]
    assert results["param_fit_intercept"].mask.tolist() == [True, True, False]
    assert results["params"][search.best_index_] == search.best_params_


def test_cv_results_rank_only_released_scores():
    # A method that releases (and charges) some candidates' scores publishes
    # them with their rank; the others stay masked.
    points = [{"a": 1}, {"a": 2}, {"a": 3}]
    fitted = [_linear(random_state=0).fit(*_regression(100)).best_estimator_] * 3
    results = cv_results(points, fitted, np.ma.MaskedArray([0.2, 0.9, 0.0], [0, 0, 1]))
    assert results["mean_test_score"].mask.tolist() == [False, False, True]
    assert results["rank_test_score"].tolist() == [2, 1, None]
    assert "rank_test_score" not in cv_results(points, fitted)


def test_cv_results_do_not_depend_on_neighbouring_data():
    # Fit on n and n + 1 rows with the same seeds: every published value of
    # cv_results_ must be the same (none is a function of the data).
    X, y = _regression(401)
    for seed in range(3):
        a = _linear(random_state=seed, refit=True).fit(X[:400], y[:400]).cv_results_
        b = _linear(random_state=seed, refit=True).fit(X, y).cv_results_
        assert a["params"] == b["params"]
        np.testing.assert_array_equal(a["epsilon_spent"], b["epsilon_spent"])
        np.testing.assert_array_equal(a["param_alpha"], b["param_alpha"])


# ---------------------------------------------------------------- n_jobs, persistence, composition


@pytest.mark.parametrize("backend", ["threading", "dask"])
def test_parallel_candidates_charge_once_in_the_parent(backend, budget_path):
    # Workers fit candidates without a budget; the parent checks and charges.
    # (loky behaves like dask here, at 15 s of process start-up in CI.)
    from joblib import parallel_backend

    if backend == "dask":
        distributed = pytest.importorskip("distributed")
        client = distributed.Client(
            processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None
        )
    X, y = _regression(400)
    budget = PrivacyBudget(epsilon=50.0, delta=1e-5, path=budget_path)
    serial = _linear(random_state=0).fit(X, y)
    with parallel_backend(backend, n_jobs=2):
        search = _linear(random_state=0, n_jobs=2, budget=budget).fit(X, y)
    assert search.best_index_ == serial.best_index_
    assert search.privacy_ledger_ == serial.privacy_ledger_
    assert [h["description"] for h in budget.history()] == ["PrivateGridSearch.fit"]
    if backend == "dask":
        client.close()


def test_pickle_and_skops_round_trip_keep_the_new_attributes(tmp_path):
    X, y = _classification(400)
    search = _logistic(random_state=0, refit=True, scoring="accuracy").fit(X, y)
    for loaded in (
        pickle.loads(pickle.dumps(search)),
        (dpu_io.save(search, tmp_path / "s.skops"), dpu_io.load(tmp_path / "s.skops"))[1],
    ):
        assert loaded.best_params_ == search.best_params_
        assert loaded.best_index_ == search.best_index_
        assert loaded.cv_results_["params"] == search.cv_results_["params"]
        np.testing.assert_array_equal(loaded.predict(X), search.predict(X))
        assert loaded.get_params(deep=False)["refit"] is True


def test_skops_asks_to_trust_the_scipy_distributions_a_search_holds(tmp_path):
    X, y = _regression(200)
    base = DPLinearRegression(feature_norm=1.5, target_bound=1.0)
    search = PrivateGridSearch(
        base, param_distributions={"alpha": loguniform(1e-2, 1e2)}, n_iter=2, random_state=0
    ).fit(X, y)
    dpu_io.save(search, tmp_path / "s.skops")
    with pytest.raises(PersistenceError, match="rv_continuous_frozen"):
        dpu_io.load(tmp_path / "s.skops")
    trusted = [
        "scipy.stats._distn_infrastructure.rv_continuous_frozen",
        "scipy.stats._continuous_distns.reciprocal_gen",
    ]
    loaded = dpu_io.load(tmp_path / "s.skops", trusted=trusted)
    assert loaded.cv_results_["params"] == search.cv_results_["params"]


def test_works_in_a_pipeline_and_with_cross_validate():
    X, y = _regression(600)
    pipe = make_pipeline(PublicBoundsScaler(), _linear(random_state=0, refit=True)).fit(X, y)
    assert pipe.score(X, y) > 0.5
    scores = cross_validate(_linear(random_state=0, scoring="r2"), X, y, cv=2)
    assert np.all(scores["test_score"] > 0.5)


def test_an_unknown_scoring_name_is_called_unknown():
    from sklearn_dpu.linear_model import DPLinearRegression
    from sklearn_dpu.model_selection import PrivateGridSearch

    search = PrivateGridSearch(
        DPLinearRegression(target_bound=1.0), {"alpha": [0.0]}, scoring="r22"
    )
    with pytest.raises(ValueError, match="not a known scoring"):
        search.fit(np.zeros((4, 2)), np.zeros(4))
    search.set_params(scoring="roc_auc")
    with pytest.raises(ValueError, match="no public bound"):
        search.fit(np.zeros((4, 2)), np.zeros(4))


@pytest.mark.parametrize("method", ["split_select", "repeat_and_select"])
@pytest.mark.parametrize("make", ["logistic", "sgd"])
def test_a_rare_class_missing_from_the_training_part_is_still_a_class(method, make):
    """The candidates are told the label set of all the rows (public, as any
    classifier's classes_): a split whose training part lacks a rare class
    still gives a model of every class (before: classes_ lost it and
    predict_proba had too few columns, or the fit failed with 'only one
    class')."""
    from sklearn_dpu.linear_model import DPLogisticRegression, UnlearnableSGDClassifier
    from sklearn_dpu.model_selection import PrivateGridSearch

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = np.array(["a"] * 597 + ["b", "b", "c"])
    if make == "logistic":
        estimator, grid = DPLogisticRegression(feature_norm=3.0), {"C": [0.1, 1.0]}
    else:
        estimator = UnlearnableSGDClassifier(schedule_size=1000, max_iter=5)  # exact plan
        grid = {"alpha": [1e-4, 1e-3]}
    extra = {"expected_runs": 2.0} if method == "repeat_and_select" else {}
    for seed in range(4):
        search = PrivateGridSearch(estimator, grid, method=method, random_state=seed, **extra).fit(
            X, y
        )
        assert list(search.classes_) == ["a", "b", "c"]
        assert search.predict_proba(X[:3]).shape == (3, 3)


def test_gridsearchcv_attributes_that_are_not_published_say_why():
    from sklearn_dpu.linear_model import DPLinearRegression
    from sklearn_dpu.model_selection import PrivateGridSearch

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (200, 2))
    search = PrivateGridSearch(
        DPLinearRegression(feature_norm=2.0, target_bound=2.0),
        {"alpha": [0.0, 1.0]},
        random_state=0,
    ).fit(X, X.sum(axis=1))
    with pytest.raises(AttributeError, match="releases only its winner"):
        _ = search.best_score_
    assert not hasattr(search, "refit_time_")
    with pytest.raises(AttributeError, match="no attribute 'nonsense_'"):
        _ = search.nonsense_


def test_a_later_set_params_of_delta_or_method_restates_nothing():
    # The search states its deletions at the delta and by the method it was
    # fitted with, not by the template's parameters set since.
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (600, 3))
    y = X[:, 0] * 0.5

    def fitted():
        return PrivateGridSearch(
            DPLinearRegression(feature_norm=2.0, target_bound=1.0),
            {"alpha": [0.1, 1.0]},
            refit=True,
            random_state=0,
        ).fit(X, y)

    a, b = fitted(), fitted()
    b.set_params(estimator__delta=1e-2, method="threshold")
    assert b.privacy_spent_ == a.privacy_spent_
    for search in (a, b):
        search.delete_samples([0, 1])
    ra, rb = a.deletion_log_[-1], b.deletion_log_[-1]
    assert (rb.deletion_epsilon, rb.deletion_delta) == (ra.deletion_epsilon, ra.deletion_delta)
    assert (rb.remaining_epsilon, rb.guarantee) == (ra.remaining_epsilon, ra.guarantee)
    assert b.method == "threshold"
    # a refit states at the new parameters
    refit = b.set_params(method="split_select").fit(X, y)
    assert refit.privacy_spent_.delta == 1e-2
