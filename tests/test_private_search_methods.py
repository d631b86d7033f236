"""PrivateGridSearch(method='repeat_and_select' | 'threshold'): accounting against
the papers' bounds, planning before data, selection quality, negative controls,
deletion statements."""

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant
from scipy import stats
from scipy.stats import norm
from sklearn.base import clone

from sklearn_dpu.exceptions import BudgetExceededError
from sklearn_dpu.linear_model import (
    DPLinearRegression,
    DPLogisticRegression,
    UnlearnableSGDClassifier,
)
from sklearn_dpu.model_selection import PrivateGridSearch
from sklearn_dpu.model_selection._selection_methods import SelectionFailedError
from sklearn_dpu.privacy import PrivacyBudget
from sklearn_dpu.privacy.accounting import NEIGHBORING_RELATION, epsilon_spent
from sklearn_dpu.privacy.calibration import gaussian_noise_multiplier
from sklearn_dpu.privacy.mechanisms import LaplaceMechanism
from sklearn_dpu.privacy.selection import (
    RepeatAndSelect,
    ThresholdSelection,
    liu_talwar_epsilon,
    rdp_accountable,
    rdp_poisson,
    rdp_truncated_negative_binomial,
    truncated_negative_binomial_gamma,
    truncated_negative_binomial_mean,
)

from ._stats import audit_epsilon_lower_bound, n_trials

DELTA = 1e-5


def _regression(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    return X, np.clip(X @ [1.0, -1.0], -1.0, 1.0)


def _estimator_rdp(event, orders):
    accountant = RdpAccountant(orders=list(orders), neighboring_relation=NEIGHBORING_RELATION)
    accountant.compose(event)
    return np.asarray(accountant._rdp)


# ---------------------------------------------------------------- accounting


def _ten_fits_against_repeat_and_select(fit):
    selected = epsilon_spent([RepeatAndSelect(fit, 10.0, "logarithmic").dp_event], DELTA)
    pld = PLDAccountant(NEIGHBORING_RELATION)
    composed = pld.compose(dp_event.SelfComposedDpEvent(fit, 10)).get_epsilon(DELTA)
    return selected, composed


def test_repeat_and_select_is_at_most_half_the_composition_of_ten_fits():
    # E[K] = 10 candidates, each a pure 1-DP Laplace release, logarithmic K:
    # measured 2.01 against 9.99 (PLD) at delta 1e-5.
    selected, composed = _ten_fits_against_repeat_and_select(dp_event.LaplaceDpEvent(1.0))
    assert selected <= 0.5 * composed, (selected, composed)
    # Gaussian fits, each (1, 1e-5)-DP, already compose sublinearly: measured
    # 1.92 against 3.62; repeat-and-select still saves close to half.
    sigma = gaussian_noise_multiplier(1.0, DELTA)
    selected, composed = _ten_fits_against_repeat_and_select(dp_event.GaussianDpEvent(sigma))
    assert selected <= 0.55 * composed, (selected, composed)


@pytest.mark.parametrize(
    "distribution, eta",
    [
        ("logarithmic", 1.0),
        ("truncated_negative_binomial", 1.0),
        ("truncated_negative_binomial", 0.5),
        ("truncated_negative_binomial", 3.0),
    ],
)
def test_tnb_bound_matches_our_computation_of_theorem_2(distribution, eta):
    orders = np.array([1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0])
    sigma = 3.0
    selection = RepeatAndSelect(dp_event.GaussianDpEvent(sigma), 8.0, distribution, eta)
    library = _estimator_rdp(selection.dp_event, orders)
    shape = 0.0 if distribution == "logarithmic" else eta
    ours = rdp_truncated_negative_binomial(orders, orders / (2 * sigma**2), 8.0, shape)
    np.testing.assert_allclose(library, ours, rtol=1e-6)


def test_poisson_bound_matches_theorem_6_with_the_exact_gaussian_profile():
    orders = np.array([2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0])
    sigma, mean = 4.0, 5.0
    mu = 1.0 / sigma

    def delta_hat(eps):  # the Gaussian mechanism's exact profile (Balle & Wang 2018)
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)

    ours = rdp_poisson(orders, orders / (2 * sigma**2), mean, delta_hat)
    library = _estimator_rdp(
        RepeatAndSelect(dp_event.GaussianDpEvent(sigma), mean, "poisson").dp_event, orders
    )
    rdp = orders / (2 * sigma**2)

    def delta_from_rdp(eps):  # Mironov 2017, Prop. 3, inverted, over the same orders
        return float(np.min(np.exp((orders - 1) * (rdp - eps))))

    looser = rdp_poisson(orders, rdp, mean, delta_from_rdp)
    # dp_accounting bounds delta_hat from the RDP curve (a conversion tighter
    # than Mironov's): between the theorem with the exact profile and with
    # Mironov's conversion.
    assert np.all(ours - 1e-9 <= library) and np.all(library <= looser + 1e-9)
    assert np.any(library < looser - 1e-3)  # the sandwich is not trivial


def test_truncated_negative_binomial_mean_and_gamma_invert():
    for eta in (0.0, 0.5, 1.0, 2.0):
        gamma = truncated_negative_binomial_gamma(eta, 10.0)
        assert truncated_negative_binomial_mean(gamma, eta) == pytest.approx(10.0, rel=1e-8)
    assert truncated_negative_binomial_gamma(1.0, 4.0) == pytest.approx(0.25, rel=1e-8)


def test_draws_have_the_promised_mean():
    rng = np.random.default_rng(0)
    for distribution, eta in (
        ("logarithmic", 1.0),
        ("poisson", 1.0),
        ("truncated_negative_binomial", 0.5),
    ):
        selection = RepeatAndSelect(dp_event.GaussianDpEvent(3.0), 6.0, distribution, eta)
        draws = [selection.draw_runs(rng) for _ in range(20000)]
        assert np.mean(draws) == pytest.approx(6.0, rel=0.05), distribution
        assert min(draws) >= (0 if distribution == "poisson" else 1)


def test_pure_parts_are_taken_to_zcdp_and_non_private_runs_refused():
    converted = rdp_accountable(dp_event.DiscreteLaplaceDpEvent(0.5, 1))
    assert converted == dp_event.ZCDpEvent(rho=0.125)
    with pytest.raises(ValueError, match="not private"):
        rdp_accountable(dp_event.NonPrivateDpEvent())
    assert liu_talwar_epsilon(0.5) == 1.5


def _fitted_search(method, n=2000):
    """A linear search by ``method`` over two alphas, fitted on ``_regression(n)``."""
    X, y = _regression(n=n)
    return PrivateGridSearch(
        DPLinearRegression(feature_norm=1.5, target_bound=1.0),
        {"alpha": [0.0, 10.0]},
        method=method,
        threshold=0.05,
        random_state=0,
    ).fit(X, y)


def test_threshold_event_is_repeat_and_select_with_geometric_runs():
    run = dp_event.GaussianDpEvent(3.0)
    assert ThresholdSelection(run, 0.1).dp_event == dp_event.RepeatAndSelectDpEvent(run, 10.0, 1.0)


@pytest.mark.parametrize("method", ["repeat_and_select", "threshold"])
def test_search_ledger_is_the_planned_selection_event(method):
    search = _fitted_search(method)
    assert len(search.privacy_ledger_) == 1
    event = dp_event.RepeatAndSelectDpEvent
    entry = search._plan_releases(search.get_params(deep=False), None).releases[0]
    assert isinstance(entry.event, event)
    assert search.privacy_spent_.epsilon == pytest.approx(epsilon_spent([entry.event], DELTA))


# ---------------------------------------------------------------- planning


class _Unreadable:
    """An X whose shape is public and whose values must not be read."""

    shape = (100, 2)

    def __getattr__(self, name):
        raise AssertionError(f"data read before the budget check ({name})")

    def __len__(self):
        raise AssertionError("data read before the budget check (len)")

    def __array__(self, *args, **kwargs):
        raise AssertionError("data read before the budget check (array)")


@pytest.mark.parametrize("method", ["repeat_and_select", "threshold"])
def test_refused_before_data_when_the_budget_cannot_pay(method):
    budget = PrivacyBudget(epsilon=1.0, delta=DELTA)
    search = PrivateGridSearch(
        DPLinearRegression(feature_norm=1.0, target_bound=1.0),
        {"alpha": [0.0, 1.0]},
        method=method,
        budget=budget,
    )
    with pytest.raises(BudgetExceededError):
        search.fit(_Unreadable(), np.zeros(100))
    assert budget.spent().epsilon == 0.0
    assert not hasattr(search, "best_estimator_")


def test_unaccountable_and_unequal_candidates_refused_before_data():
    X = _Unreadable()
    with pytest.raises(ValueError, match="schedule_size"):
        PrivateGridSearch(
            UnlearnableSGDClassifier(), {"alpha": [1e-4]}, method="repeat_and_select"
        ).fit(X, np.zeros(100))
    with pytest.raises(ValueError, match="same privacy"):
        PrivateGridSearch(
            DPLogisticRegression(), {"epsilon": [0.5, 1.0]}, method="repeat_and_select"
        ).fit(X, np.zeros(100))


# ---------------------------------------------------------------- selection quality


@pytest.mark.statistical
def test_repeat_and_select_picks_the_clear_best_as_often_as_promised():
    # Two candidates, one clearly best: it is chosen iff it is drawn at least
    # once among K logarithmic runs, P = 1 - E[(1/2)^K] = 1 - log(1 - (1 - g)/2) / log(g).
    X, y = _regression()
    gamma = truncated_negative_binomial_gamma(0.0, 3.0)
    promised = 1 - math.log(1 - (1 - gamma) / 2) / math.log(gamma)
    trials = n_trials(40, 300)
    chosen = sum(
        PrivateGridSearch(
            DPLinearRegression(feature_norm=1.5, target_bound=1.0),
            {"alpha": [0.0, 1e6]},
            method="repeat_and_select",
            expected_runs=3.0,
            random_state=seed,
        )
        .fit(X, y)
        .best_params_["alpha"]
        == 0.0
        for seed in range(trials)
    )
    assert stats.binomtest(chosen, trials, promised).pvalue > 1e-3, (chosen, trials, promised)


@pytest.mark.statistical
def test_threshold_picks_the_clear_best_as_often_as_promised():
    # The best passes threshold 0.95 surely, the other never: the walk stops at
    # the best with P = (1/2) / (1 - (1 - gamma) / 2).
    X, y = _regression()
    gamma = 0.5
    promised = 0.5 / (1 - (1 - gamma) / 2)
    trials = n_trials(40, 300)
    outcomes = []
    for seed in range(trials):
        search = PrivateGridSearch(
            DPLinearRegression(feature_norm=1.5, target_bound=1.0),
            {"alpha": [0.0, 1e6]},
            method="threshold",
            threshold=0.95,
            stop_probability=gamma,
            random_state=seed,
        )
        try:
            outcomes.append(search.fit(X, y).best_params_["alpha"] == 0.0)
        except SelectionFailedError:
            outcomes.append(False)
    assert stats.binomtest(sum(outcomes), trials, promised).pvalue > 1e-3


# ---------------------------------------------------------------- negative controls


def _selected(selection, scores, score_epsilon, rng, threshold):
    """One run of the selection on two candidates with exact scores ``scores``,
    each run's score released with Laplace noise of ``score_epsilon``."""
    laplace = LaplaceMechanism(1.0, score_epsilon)
    if threshold:
        while True:
            pick = int(rng.integers(2))
            if laplace.release(scores[pick], rng) >= 0.5:
                return pick
            if selection.stops(rng):
                return -1
    runs = rng.integers(2, size=max(selection.draw_runs(rng), 1))
    noisy = [float(laplace.release(scores[i], rng)) for i in runs]
    return int(runs[int(np.argmax(noisy))])


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["repeat_and_select", "threshold"])
def test_selection_audit_passes_with_noise_and_fails_without(method):
    # Neighbours move each score by at most 1: on D candidate 0 is better, on D'
    # candidate 1. The audit's lower bound on epsilon stays below the ledger's
    # epsilon with the noise, and exceeds it when the noise is (nearly) removed.
    trials = n_trials(3000, 20000)
    score_epsilon = 0.5
    if method == "threshold":
        make = lambda eps: ThresholdSelection(LaplaceMechanism(1.0, eps).dp_event, 0.05)  # noqa: E731
    else:
        make = lambda eps: RepeatAndSelect(  # noqa: E731
            LaplaceMechanism(1.0, eps).dp_event, 30.0, "truncated_negative_binomial", 5.0
        )
    planned = epsilon_spent([make(score_epsilon).dp_event], DELTA)
    threshold = method == "threshold"

    def audit(eps, seed):
        rng = np.random.default_rng(seed)
        d = [_selected(make(eps), (1.0, 0.0), eps, rng, threshold) for _ in range(trials)]
        d2 = [_selected(make(eps), (0.0, 1.0), eps, rng, threshold) for _ in range(trials)]
        return audit_epsilon_lower_bound(d, d2, DELTA)

    assert audit(score_epsilon, 0) < planned
    assert audit(1e6, 1) > planned  # noise removed: the choice follows the data


# ---------------------------------------------------------------- deletion, leaks


@pytest.mark.parametrize("method", ["repeat_and_select", "threshold"])
def test_deletion_states_group_privacy_of_the_selection_for_all_deleted(method):
    search = _fitted_search(method, n=1000)
    epsilon = search.privacy_spent_.epsilon
    search.delete_samples([0])
    search.delete_samples([1, 2])
    report = search.deletion_log_[-1]
    assert search.n_deleted_ == 3
    # (k eps, k exp((k - 1) eps) delta) for the k = 3 samples deleted so far
    group_delta = 3 * math.exp(2 * epsilon) * DELTA
    assert f"({3 * epsilon:.3g}, {group_delta:.3g})-indistinguishable" in report.guarantee
    assert "the 3 samples deleted so far" in report.guarantee
    assert report.deletion_epsilon >= 3 * epsilon


@pytest.mark.parametrize("method", ["repeat_and_select", "threshold"])
def test_published_values_do_not_single_out_neighbouring_data_sets(method):
    # Fit on n and n + 1 rows with several seeds: a published number constant
    # per data set but different between them would depend on private data.
    X, y = _regression(n=801, seed=3)

    def published(rows, seed):
        search = PrivateGridSearch(
            DPLinearRegression(),
            {"alpha": [0.0, 10.0]},
            method=method,
            threshold=0.05,
            random_state=seed,
        ).fit(X[:rows], y[:rows])
        search.delete_samples([0])
        report = search.deletion_log_[-1]
        values = {
            "epsilon": search.privacy_spent_.epsilon,
            "deletion_epsilon": report.deletion_epsilon,
            "remaining": report.remaining_epsilon,
            "ledger": str(search.privacy_ledger_),
            "n_candidates": search.n_candidates_,
        }
        if "n_runs" in search.cv_results_:
            values["n_runs"] = tuple(search.cv_results_["n_runs"])
        return values

    per_set = [[published(rows, seed) for seed in range(3)] for rows in (800, 801)]
    for key in per_set[0][0]:
        first = {str(v[key]) for v in per_set[0]}
        second = {str(v[key]) for v in per_set[1]}
        assert not (len(first) == 1 and len(second) == 1 and first != second), key


# ------------------------------------------ with param_distributions, scoring, refit


def test_repeat_and_select_runs_the_sampled_candidates_and_publishes_their_results():
    from scipy.stats import loguniform

    from sklearn_dpu.model_selection._search_results import candidate_points

    X, y = _regression()
    search = PrivateGridSearch(
        DPLinearRegression(feature_norm=1.5, target_bound=1.0),
        param_distributions={"alpha": loguniform(1e-2, 1e2)},
        n_iter=4,
        method="repeat_and_select",
        random_state=0,
    ).fit(X, y)
    # the n_iter points split_select would run, drawn from the public random_state
    points = candidate_points(search.get_params(deep=False))
    results = search.cv_results_
    assert results["params"] == points
    # no run count: the accounting holds with the number of runs hidden
    assert sorted(results) == ["epsilon_spent", "param_alpha", "params"]
    assert list(results["param_alpha"]) == [p["alpha"] for p in points]
    assert search.best_params_ == points[search.best_index_]
    fit_epsilon = search.best_estimator_.privacy_spent_.epsilon
    np.testing.assert_allclose(results["epsilon_spent"], fit_epsilon)


def test_param_distributions_costs_checked_and_threshold_refused_before_data():
    X = _Unreadable()
    with pytest.raises(ValueError, match="same privacy"):
        PrivateGridSearch(
            DPLogisticRegression(),
            param_distributions={"epsilon": [0.5, 1.0]},
            n_iter=2,
            method="repeat_and_select",
        ).fit(X, np.zeros(100))
    search = PrivateGridSearch(
        DPLogisticRegression(),
        param_distributions={"C": [0.1, 1.0]},
        n_iter=2,
        method="threshold",
    )
    with pytest.raises(ValueError, match="param_grid only"):
        search.fit(X, np.zeros(100))
    assert not hasattr(search, "best_estimator_")


class _Exact:
    """A score mechanism that releases the exact value (to read the score)."""

    def release(self, value, rng):
        return value


@pytest.mark.parametrize("tau", [None, 0.25])
def test_run_score_is_the_scorings_cost_normalised_by_its_bounds(tau):
    from sklearn_dpu.model_selection._scoring import check_scoring
    from sklearn_dpu.model_selection._search_results import split_rows
    from sklearn_dpu.model_selection._selection_methods import _fit_and_score
    from sklearn_dpu.unlearning.ids import requested_ids

    X, y = _regression(n=400)
    estimator = DPLinearRegression(feature_norm=1.5, target_bound=1.0, random_state=0)
    split = split_rows(X, y, requested_ids(X, None), np.random.default_rng(0), 0.5)

    def score_func(y_true, y_pred):
        return -np.abs(y_true - y_pred)

    scorer = check_scoring(score_func, (-4.0, 0.0), estimator)
    model, score = _fit_and_score(estimator, split, scorer, _Exact(), tau, 0)
    # per row: s in [-4, 0], cost -s in [0, 4], normalised by h - l = 4
    normalised = np.clip(np.abs(split.y_val - model.predict(split.X_val)), 0, 4) / 4.0
    expected = -normalised.sum() if tau is None else np.sum(1.0 - tau - normalised)
    assert score == pytest.approx(expected)


@pytest.mark.parametrize("method", ["repeat_and_select", "threshold"])
def test_random_run_methods_take_the_named_and_callable_scorings(method):
    from sklearn.metrics import make_scorer, mean_squared_error

    X, y = _regression(n=1000)
    kwargs = dict(method=method, threshold=0.05, random_state=0)
    estimator = DPLinearRegression(feature_norm=1.5, target_bound=1.0)
    for scoring, bounds in [("neg_mean_absolute_error", None), ("r2", None)]:
        search = PrivateGridSearch(
            estimator, {"alpha": [0.0, 10.0]}, scoring=scoring, score_bounds=bounds, **kwargs
        ).fit(X, y)
        assert search.best_params_ in search.cv_results_["params"]
    search = PrivateGridSearch(
        estimator,
        {"alpha": [0.0, 10.0]},
        scoring=lambda t, p: -np.abs(t - p),
        score_bounds=(-2.0, 0.0),
        **kwargs,
    ).fit(X, y)
    assert "mean_test_score" not in search.cv_results_  # no score was released
    with pytest.raises(ValueError, match="scorer object"):
        PrivateGridSearch(
            estimator, {"alpha": [0.0]}, scoring=make_scorer(mean_squared_error), **kwargs
        ).fit(_Unreadable(), np.zeros(100))


@pytest.mark.parametrize("method", ["repeat_and_select", "threshold"])
def test_refit_fits_the_chosen_point_on_all_rows_planned_and_charged(method):
    X, y = _regression(n=1000)
    estimator = DPLinearRegression(feature_norm=1.5, target_bound=1.0)
    kwargs = dict(method=method, threshold=0.05, random_state=0)
    budget = PrivacyBudget(epsilon=100.0, delta=1e-3)
    search = PrivateGridSearch(
        estimator, {"alpha": [0.0, 10.0]}, refit=True, budget=budget, **kwargs
    ).fit(X, y)
    plan = search._plan_releases(search.get_params(deep=False), None)
    assert [entry["chunks"] for entry in search.privacy_ledger_] == [[1, 2]] * len(plan.releases)
    assert len(plan.releases) == 1 + len(clone(estimator).fit(X, y).privacy_ledger_)
    events = [entry.event for entry in plan.releases]
    assert search.privacy_spent_.epsilon == pytest.approx(epsilon_spent(events, DELTA))
    assert budget.spent().epsilon == pytest.approx(epsilon_spent(events, 1e-3))
    # the refit model holds every row: a row of either part is deleted from it
    model = search.best_estimator_
    assert model.get_params()["alpha"] == search.best_params_["alpha"]
    assert model.n_features_in_ == 2 and search._validation_ids == set()
    search.delete_samples([0, 1, 2, 3])
    assert model.deletion_log_[-1].n_deleted == 4
    assert search.privacy_ledger_[-1]["chunks"] == [1, 2]

    # a budget that pays the selection alone is refused before any data is read
    alone = PrivateGridSearch(estimator, {"alpha": [0.0, 10.0]}, **kwargs)
    selection = alone._plan_releases(alone.get_params(deep=False), None).releases
    cap = 1.01 * epsilon_spent([r.event for r in selection], DELTA)
    small = PrivacyBudget(epsilon=cap, delta=DELTA)
    alone.set_params(budget=small).fit(X, y)
    small = PrivacyBudget(epsilon=cap, delta=DELTA)
    refused = PrivateGridSearch(
        estimator, {"alpha": [0.0, 10.0]}, refit=True, budget=small, **kwargs
    )
    with pytest.raises(BudgetExceededError):
        refused.fit(_Unreadable(), np.zeros(100))
    assert small.spent().epsilon == 0.0 and not hasattr(refused, "best_estimator_")


@pytest.mark.parametrize("refit", [False, True])
def test_a_failed_threshold_search_is_charged_with_or_without_refit(tmp_path, refit):
    """The runs read the data before the rule stopped: the budget pays for
    the selection either way (before: with refit=True the plan was charged
    after the computation, so a failure charged nothing and could be retried
    for free)."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 3)), rng.integers(0, 2, 300)
    budget = PrivacyBudget(epsilon=100.0, delta=1e-4, path=str(tmp_path / "b.sqlite"))
    search = PrivateGridSearch(
        DPLogisticRegression(feature_norm=3.0, solver="output"),
        {"C": [0.1, 1.0]},
        method="threshold",
        threshold=0.99,
        stop_probability=0.9,
        refit=refit,
        budget=budget,
        random_state=0,
    )
    with pytest.raises(SelectionFailedError):
        search.fit(X, y)
    assert len(budget.charges()) == 1
    assert budget.spent().epsilon > 0
    assert not hasattr(search, "best_estimator_")


def test_the_runs_are_silent_and_uncounted(capsys):
    """Neither the number of runs nor a run's own values are published: no
    n_runs in cv_results_ (the bound is for K hidden), and the inner
    estimator's progress lines are silenced for the runs."""
    X, y = _regression()
    search = PrivateGridSearch(
        DPLinearRegression(feature_norm=1.5, target_bound=1.0, verbose=1),
        {"alpha": [0.0, 1.0]},
        method="repeat_and_select",
        random_state=0,
    ).fit(X, y)
    assert "n_runs" not in search.cv_results_
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("refit", [False, True])
def test_zero_poisson_runs_are_charged_with_or_without_refit(tmp_path, refit):
    """K = 0 is an outcome of the mechanism: a retry-until-success user must
    pay for it (before: with refit=True nothing was charged)."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 3)), rng.integers(0, 2, 200)
    budget = PrivacyBudget(epsilon=100.0, delta=1e-4, path=str(tmp_path / "b.sqlite"))
    failures = 0
    for seed in range(8):
        search = PrivateGridSearch(
            DPLogisticRegression(feature_norm=3.0, solver="output"),
            {"C": [0.1, 1.0]},
            method="repeat_and_select",
            distribution="poisson",
            expected_runs=1.01,
            refit=refit,
            budget=budget,
            random_state=seed,
        )
        try:
            search.fit(X, y)
        except SelectionFailedError:
            failures += 1
    assert 0 < failures < 8
    assert len(budget.charges()) == 8
